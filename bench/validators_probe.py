#!/usr/bin/env python3
"""Probe: what the manifest check of `helm-nemo template` (A4 405B example) costs in a fresh process.

Renders the example once with plain helm (the same chart and final values helm nemo hands to helm,
bench/run.py plain_helm_inputs), then runs --rounds fresh interpreters, each:
  warm      import helm_nemo.actions.lint + warm_validators(plans)  (what the CLI runs while helm renders)
  validate  validate_manifests(rendered text)                         (validators ready)
each with the schema cache filled (a previous run wrote it) and, for this checkout, also cold (an empty
cache folder: the run writes it) and off (HELM_NEMO_CACHE_DIR=""). The plans are built before the clock starts
(the CLI has them too); the figures are medians in ms.

`--root DIR` measures the package in DIR (default: this checkout); `--before DIR` measures DIR too,
alternately with it (A B A B ...), e.g. the main checkout for the code before a change.

  .venv/bin/python bench/validators_probe.py [--rounds 10] [--before /work/main] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def one_run(root: Path, text_file: Path) -> dict:
    sys.path.insert(0, str(root))
    from helm_nemo.values.plan import build_plans

    sys.path.insert(0, str(HERE / "bench"))
    from run import ENV, EXAMPLE

    plans = build_plans(EXAMPLE, ENV)
    text = text_file.read_text()
    start = time.perf_counter()
    from helm_nemo.actions.lint import warm_validators

    warm_validators(plans)
    warm = time.perf_counter() - start
    from helm_nemo.validate.manifests import validate_manifests

    start = time.perf_counter()
    problems = validate_manifests(text)
    check = time.perf_counter() - start
    import helm_nemo

    return {"warm": warm * 1000, "validate": check * 1000, "problems": len(problems), "package": helm_nemo.__file__}


def render(tmp: Path) -> Path:
    sys.path.insert(0, str(HERE / "bench"))
    from run import ENV, plain_helm_inputs

    (cmd,) = plain_helm_inputs(tmp)
    out = subprocess.run(cmd, env=ENV, capture_output=True, text=True, check=True).stdout
    path = tmp / "rendered.yaml"
    path.write_text(out)
    return path


def fresh_run(root: Path, text: Path, cache: Path | str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(root)
    env["HELM_NEMO_CACHE_DIR"] = str(cache)  # the schema cache (helm_nemo.validate.schema_cache)
    proc = subprocess.run(
        [sys.executable, __file__, "--root", str(root), "--one-run", str(text)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summary(runs: list[dict]) -> dict:
    med = {key: statistics.median(r[key] for r in runs) for key in ("warm", "validate")}
    med["total"] = statistics.median(r["warm"] + r["validate"] for r in runs)
    return {**med, "rounds": len(runs), "problems": runs[0]["problems"], "package": runs[0]["package"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--root", type=Path, default=HERE)
    parser.add_argument(
        "--before",
        type=Path,
        help="also measure the package in this folder, alternately (A B A B ...), e.g. /work/main",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one-run", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_run:
        print(json.dumps(one_run(args.root.resolve(), args.one_run)))
        return 0
    # (root, cache state): "cold" runs start with an empty cache folder, "cached" ones find it filled, "off"
    # ones have none (HELM_NEMO_CACHE_DIR="")
    cases = ([(args.before.resolve(), "cached")] if args.before else []) + [
        (args.root.resolve(), "off"),
        (args.root.resolve(), "cold"),
        (args.root.resolve(), "cached"),
    ]
    runs: dict[tuple, list] = {case: [] for case in cases}
    with tempfile.TemporaryDirectory() as tmp:
        text = render(Path(tmp))
        for root, _ in cases:
            fresh_run(root, text, Path(tmp) / f"cache-{abs(hash(root))}")  # bytecode, cache: not counted
        for i in range(args.rounds):
            for root, state in cases:
                cache = (
                    ""
                    if state == "off"
                    else Path(tmp) / (f"cold-{i}-{abs(hash(root))}" if state == "cold" else f"cache-{abs(hash(root))}")
                )
                runs[root, state].append(fresh_run(root, text, cache))
    results = []
    for case in cases:
        med = summary(runs[case])
        results.append({**med, "cache": case[1]})
        print(
            f"{med['package']} ({case[1]} schema cache, if it has one): median of {args.rounds} fresh processes, "
            f"{med['problems']} problem(s)"
        )
        print(f"  import + warm_validators: {med['warm']:6.1f} ms")
        print(f"  validate_manifests:       {med['validate']:6.1f} ms")
        print(f"  total:                    {med['total']:6.1f} ms")
    if args.json:
        print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
