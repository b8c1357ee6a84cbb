#!/usr/bin/env python3
"""Benchmark: what helm_nemo.fit (Megatron's layout rules and the memory estimate) adds to `helm nemo validate`
(issue 40: at most 20 ms).

CPU time (time.process_time: the machine may be shared), .pyc files written as an installed package has them.
For each example of values/examples/ that trains (and the issue's refused layout, which also searches a layout
that works), in a fresh interpreter:
  (each figure the minimum over --rounds interpreters, the least disturbed by other load)
  cold   the first build_plans (what one `helm nemo validate` run pays: imports of helm_nemo.fit and its parts of
         metrics included), with fit, minus the first build_plans of a fresh interpreter with fit left out
  warm   the same difference for further calls in one process (the median of --repeat calls)
`added_ms` is the largest cold difference over the examples that validate, the figure to hold against the 20 ms
(the rules and the estimate). The refused layout is printed beside them with its own figure, `refused_added_ms`:
its error also carries a layout that works, searched over a few thousand candidates, which only an error pays.

  .venv/bin/python bench/fit_bench.py [--rounds N] [--repeat N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 20.0
REFUSED = "issue-40-refused-layout"
sys.path.insert(0, str(ROOT / "tests"))
from test_examples_golden import ENV  # the examples' stand-ins for the environment, as the tests use

EXAMPLES = (
    "a3mega-gpt3-175b.yaml",  # a NeMo 1 config read with positions
    "a3high-llama3-8b-jobset.yaml",  # a NeMo 2 recipe name and its defaults
    "a3ultra-405b.yaml",  # a recipe file of three releases
    "p4de-gpt3-5b.yaml",
)


def issue_layout(folder: Path) -> Path:
    """The issue's refused layout (TP 1, PP 1, VP 12, micro batch 16): the rules fail and a working layout is searched."""
    shutil.copy(ROOT / "values" / "examples" / "a3mega-gpt3-175b.yaml", folder / "values.yaml")
    (folder / "configs").mkdir()
    text = (ROOT / "values" / "examples" / "configs" / "gpt3-175b.yaml").read_text()
    text = text.replace("tensor_model_parallel_size: 4", "tensor_model_parallel_size: 1")
    text = text.replace("pipeline_model_parallel_size: 8", "pipeline_model_parallel_size: 1")
    text = text.replace("micro_batch_size: 1\n", "micro_batch_size: 16\n")
    (folder / "configs" / "gpt3-175b.yaml").write_text(text)
    return folder / "values.yaml"


def one_run(path: str, with_fit: bool, repeat: int) -> dict:
    """Inside a fresh interpreter: the first build_plans and the median of `repeat` more, in ms."""
    sys.path.insert(0, str(ROOT))
    from helm_nemo.cli import _defer_rare_modules

    _defer_rare_modules()  # as a `helm nemo validate` run starts
    from helm_nemo.user_errors import UserError
    from helm_nemo.values import plan

    if not with_fit:
        plan._fit = lambda *args, **kwargs: []  # type: ignore[assignment]

    def once() -> float:
        start = time.process_time()  # CPU time: the machine is shared, wall time measures the neighbours too
        try:
            plan.build_plans(path, ENV)
        except UserError:
            pass  # the refused layout: the time to refuse it
        return (time.process_time() - start) * 1000

    first = once()
    warm = statistics.median(once() for _ in range(repeat))
    return {"first_ms": first, "warm_ms": warm}


def fresh(path: Path, with_fit: bool, repeat: int) -> dict:
    code = (
        f"import json, sys; sys.path.insert(0, {str(ROOT / 'bench')!r}); import fit_bench; "
        f"print(json.dumps(fit_bench.one_run({str(path)!r}, {with_fit!r}, {repeat})))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as installed: .pyc files used
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(rounds: int = 5, repeat: int = 20) -> dict:
    """Per example: the medians over `rounds` fresh interpreters of the first and the warm build_plans, with and
    without fit, and their differences."""
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = [ROOT / "values" / "examples" / name for name in EXAMPLES] + [issue_layout(Path(tmp))]
        for path in paths:
            fresh(path, True, 1)  # writes the .pyc files
            runs = {flag: [fresh(path, flag, repeat) for _ in range(rounds)] for flag in (True, False)}
            cold = min(r["first_ms"] for r in runs[True]) - min(r["first_ms"] for r in runs[False])
            warm = min(r["warm_ms"] for r in runs[True]) - min(r["warm_ms"] for r in runs[False])
            name = REFUSED if path.parent == Path(tmp) else path.stem
            results[name] = {
                "cold_added_ms": round(cold, 2),
                "warm_added_ms": round(warm, 2),
                "validate_ms_without_fit": round(min(r["first_ms"] for r in runs[False]), 2),
            }
    added = max(r["cold_added_ms"] for name, r in results.items() if name != REFUSED)
    return {
        "name": "fit",
        "added_ms": round(added, 2),
        "refused_added_ms": results[REFUSED]["cold_added_ms"],
        "target_ms": TARGET_MS,
        "ok": added <= TARGET_MS,
        "examples": results,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.rounds, args.repeat)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for name, row in result["examples"].items():
            print(
                f"{name:32} +{row['cold_added_ms']:6.2f} ms cold, +{row['warm_added_ms']:6.2f} ms warm "
                f"(validate without fit {row['validate_ms_without_fit']:.1f} ms)"
            )
        print(
            f"fit adds at most {result['added_ms']:.2f} ms to a validate that passes (target {TARGET_MS:.0f} ms); "
            f"{result['refused_added_ms']:.2f} ms to refusing the issue's layout, with a layout that works"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
