#!/usr/bin/env python3
"""Write the diagnosis accuracy table (tests/logs/real/, measured now) into docs/status.md between its
markers, so the table is measured, never typed. tests/test_diagnosis_corpus.py fails when it is stale.

    python scripts/diagnosis_table.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helm_nemo.diagnose import corpus

DOC = ROOT / "docs" / "status.md"


def main() -> int:
    found = corpus.table(ROOT / "tests" / "logs" / "real")
    if "--check" in sys.argv[1:]:
        same = corpus.shown_table(DOC) == found.markdown().strip()
        print("docs/status.md: the table is current" if same else "docs/status.md: the table is stale")
        return 0 if same else 1
    changed = corpus.write_table(DOC, found)
    print(found.markdown())
    print(f"docs/status.md {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
