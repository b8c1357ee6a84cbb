#!/usr/bin/env python3
"""Benchmark: `helm-nemo logs --errors --file LOG` of a 50 MB log (issue 34; the target a ratio, issue 41).

The log is real lines only: a healthy Megatron training log of the corpus (tests/logs/real/public/
megatron-lm-756-…, iteration lines and the rest) repeated to 50 MB, its steps renumbered so training goes
on, then a real CUDA OOM traceback (…/gpt2-chinese-215-cuda-oom) as the run's end. Each round runs the
command as a user does (a new process) and checks its answer (cuda-oom, the traceback's line), then the reference
(bench/reference.py: a fresh Python reading, decoding and splitting the same 50 MB and searching each line for a
fixed pattern); `ratio` is the median of the rounds' ratios to it, the target (issue 41).
A second figure: the same 50 MB without the failure (a healthy log: no failure, exit 0; no reference).

  .venv/bin/python bench/diagnose_bench.py [--rounds N] [--log-mb N] [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "tests" / "logs" / "real" / "public"
sys.path.insert(0, str(ROOT / "bench"))
import reference

TARGET = reference.target("diagnose")


def build(path: Path, megabytes: int, failure: bool) -> int:
    healthy = (REAL / "megatron-lm-756-healthy-mixtral-h100" / "log.txt").read_text(encoding="utf-8")
    oom = (REAL / "gpt2-chinese-215-cuda-oom" / "log.txt").read_text(encoding="utf-8")
    iteration = re.compile(r"iteration\s+(\d+)/")
    parts, size, step = [], 0, 0
    while size < megabytes * 1_000_000:
        for line in healthy.splitlines(keepends=True):
            if iteration.search(line):
                step += 1
                line = iteration.sub(f"iteration {step:8d}/", line, count=1)
            parts.append(line)
            size += len(line)
    text = "".join(parts) + (oom if failure else "")
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


def measure(path: Path, rounds: int, want_code: int, with_reference: bool) -> tuple[list[float], list[float]]:
    """One warm-up round, then `rounds`; with the reference run after the command in each round."""
    cmd = [sys.executable, "-m", "helm_nemo", "logs", "--errors", "--file", str(path), "-o", "json"]

    def once() -> float:
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        elapsed = time.perf_counter() - start
        doc = json.loads(proc.stdout)
        if proc.returncode != want_code or (want_code == 1 and doc["cause"]["signature"] != "cuda-oom"):
            raise SystemExit(f"wrong answer: exit {proc.returncode}: {proc.stdout[:500]} {proc.stderr[-500:]}")
        return elapsed

    if not with_reference:
        return [once() for _ in range(rounds + 1)][1:], []
    return reference.interleave(once, lambda: reference.timed_reference("scan", str(path)), rounds, warmup=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--log-mb", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        failed, healthy = Path(tmp) / "failed.log", Path(tmp) / "healthy.log"
        size = build(failed, args.log_mb, True)
        build(healthy, args.log_mb, False)
        a, ref = measure(failed, args.rounds, 1, with_reference=True)
        b, _ = measure(healthy, args.rounds, 0, with_reference=False)
    result = {
        "log_bytes": size,
        "seconds": statistics.median(a),
        "min": min(a),
        "max": max(a),
        "healthy_seconds": statistics.median(b),
        "samples": a,
        "reference_samples": ref,
        **{k: v for k, v in reference.judge(TARGET, a, ref).items() if k != "seconds"},
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"diagnose  {size / 1e6:.0f} MB log: median {result['seconds']:.3f} s (min {result['min']:.3f}, max "
            f"{result['max']:.3f}), reference {result['reference_seconds']:.3f} s, ratio {result['ratio']:.2f} "
            f"(target <= {TARGET.limit}; {TARGET.absolute} s before issue 41: information); healthy: median "
            f"{result['healthy_seconds']:.3f} s"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
