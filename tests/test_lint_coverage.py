"""ruff's file selection covers every Python module of the project: an exclude pattern that also matches a
package folder (a bare `values` matched helm_nemo/values/) silently takes it out of lint and format checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUFF = Path(sys.executable).parent / "ruff"


def test_ruff_checks_every_python_file_of_the_project():
    proc = subprocess.run([str(RUFF), "check", "--show-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    seen = {Path(line.strip()).resolve() for line in proc.stdout.splitlines() if line.strip().endswith(".py")}
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    wanted = {(ROOT / name).resolve() for name in tracked.stdout.split()}
    missing = sorted(str(path.relative_to(ROOT)) for path in wanted - seen)
    assert not missing, f"ruff does not see: {missing[:10]}"
    # the data folders stay out (generated charts, user values): nothing there is Python anyway
    assert not any(str(path.relative_to(ROOT)).startswith(("charts/", "values/", "schemas/")) for path in seen)
