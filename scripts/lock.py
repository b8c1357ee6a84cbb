#!/usr/bin/env python3
"""`make lock`: refresh requirements/runtime.lock and requirements/dev.lock from pyproject.toml, then say what
changed (name: old -> new).

uv resolves (`uv pip compile`, universal: one file for every platform, markers where they differ; hashes of every
wheel and sdist): it is the only resolver that writes a cross-platform lock in the requirements format that plain
`pip install --require-hashes -r` reads, so installing needs nothing but pip. The runtime lock is resolved first
and constrains the dev lock, so the two always agree on what they share. Nothing changes unless a range in
pyproject.toml moved or `--upgrade` (make lock does) lets newer releases in; review the diff, run `make test`,
commit both files.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCKS = ROOT / "requirements"
PYTHON = "3.11"  # the oldest Python pyproject.toml allows: the lock then holds for every newer one too


def versions(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    return dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s;\\]+)", path.read_text(), re.M))


def compile_lock(uv: str, output: Path, extras: list[str], upgrade: bool, constraint: Path | None) -> None:
    args = [
        uv,
        "pip",
        "compile",
        "../pyproject.toml",  # relative to LOCKS (the cwd): the locks' "via" comments name no checkout's path
        "--universal",
        "--python-version",
        PYTHON,
        "--generate-hashes",
        "--no-header",
        "--quiet",
        "--output-file",
        str(output),
    ]
    for extra in extras:
        args += ["--extra", extra]
    if constraint:
        args += ["--constraint", str(constraint)]
    if upgrade:
        args.append("--upgrade")
    subprocess.run(args, check=True, cwd=LOCKS)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-upgrade", action="store_true", help="keep every pin that still fits pyproject.toml")
    args = parser.parse_args()
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if not uv:
        print("lock: uv is missing (it is in requirements/dev.lock: run make setup)", file=sys.stderr)
        return 2
    before = {name: versions(LOCKS / name) for name in ("runtime.lock", "dev.lock")}
    compile_lock(uv, LOCKS / "runtime.lock", [], not args.no_upgrade, None)
    compile_lock(uv, LOCKS / "dev.lock", ["test", "dev"], not args.no_upgrade, LOCKS / "runtime.lock")
    for name, old in before.items():
        new = versions(LOCKS / name)
        changes = [
            f"  {pkg}: {old.get(pkg, '(new)')} -> {new.get(pkg, '(gone)')}"
            for pkg in sorted(set(old) | set(new))
            if old.get(pkg) != new.get(pkg)
        ]
        print(f"lock: requirements/{name}: " + (f"{len(changes)} change(s)" if changes else "unchanged"))
        print("\n".join(changes)) if changes else None
    return 0


if __name__ == "__main__":
    sys.exit(main())
