#!/usr/bin/env python3
"""Benchmark: validating 1,000 rendered documents with helm_nemo.validate (the target a ratio, issue 41).

The documents are the golden renders of every chart (tests/golden/**), repeated to 1,000: JobSets,
Jobs, Deployments, DaemonSets, ConfigMaps, Services, PVs, a ComputeDomain, ... All are valid, which is
the common case (an invalid document additionally runs jsonschema for its messages).

Figures (each the median of --rounds runs, every run in a fresh interpreter so nothing is cached):
  cold      validate_manifests(1,000 parsed documents) in a new process: loading and compiling every
            schema is included (what `helm nemo lint` pays once)
  warm      the same call again in the same process (schemas cached)
  parse     parsing the 1,000 documents from `helm template` text first (CSafeLoader), then validating warm
  reference right after cold, in the same process: the golden files read again and parsed with yaml's
            CSafeLoader alone (the distinct documents the 1,000 are made of: the same bytes, a fixed parser)
`seconds` is the cold figure; `ratio` (the target, judged by bench/run.py) the median of the runs' ratios
cold / reference. The parsed schemas come from the
disk cache (helm_nemo.validate.schema_cache) where the environment puts it, filled by the first run;
HELM_NEMO_CACHE_DIR= (empty) measures without it.

  .venv/bin/python bench/validate_bench.py [--rounds N] [--documents N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import reference

TARGET = reference.target("validate")


def one_run(documents: int) -> dict:
    """Runs inside a fresh interpreter: cold, warm and parse timings for `documents` documents."""
    sys.path.insert(0, str(ROOT))
    from helm_nemo.validate import parse_documents, validate_manifests

    files = sorted((ROOT / "tests" / "golden").glob("**/*.yaml"))
    texts = [p.read_text() for p in files]
    base = [d.data for text in texts for d in parse_documents(text)[0]]
    docs = (base * (documents // len(base) + 1))[:documents]
    repeat = documents // len(base) + 1
    stream = "".join(texts * repeat)

    start = time.perf_counter()
    cold_problems = validate_manifests(docs)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    import yaml

    again = "".join(p.read_text() for p in files)
    parsed_again = sum(1 for doc in yaml.load_all(again, Loader=yaml.CSafeLoader) if doc is not None)
    reference_seconds = time.perf_counter() - start
    start = time.perf_counter()
    validate_manifests(docs)
    warm = time.perf_counter() - start
    start = time.perf_counter()
    parsed = parse_documents(stream)[0][:documents]
    validate_manifests(parsed)
    parse = time.perf_counter() - start
    kinds = sorted({d["kind"] for d in base})
    return {
        "cold": cold,
        "warm": warm,
        "parse": parse,
        "reference": reference_seconds,
        "reference_documents": parsed_again,
        "problems": len(cold_problems),
        "kinds": kinds,
        "distinct": len(base),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="last line: the result as JSON (for bench/run.py)")
    parser.add_argument("--one-run", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_run:
        print(json.dumps(one_run(args.documents)))
        return 0
    runs = []
    for _ in range(args.rounds):
        proc = subprocess.run(
            [sys.executable, __file__, "--one-run", "--documents", str(args.documents)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=False,
        )
        if proc.returncode != 0:
            print(proc.stderr, file=sys.stderr)
            return 1
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    med = {key: statistics.median(r[key] for r in runs) for key in ("cold", "warm", "parse")}
    result = {
        "documents": args.documents,
        "samples": [r["cold"] for r in runs],
        "reference_samples": [r["reference"] for r in runs],
        **reference.judge(TARGET, [r["cold"] for r in runs], [r["reference"] for r in runs]),
        "cold": med["cold"],
        "warm": med["warm"],
        "parse_and_validate_warm": med["parse"],
        "rounds": args.rounds,
        "problems": runs[0]["problems"],
        "distinct_documents": runs[0]["distinct"],
        "kinds": runs[0]["kinds"],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    print(
        f"{args.documents} documents ({runs[0]['distinct']} distinct golden renders, {len(runs[0]['kinds'])} kinds; "
        f"{runs[0]['problems']} problem(s) found), median of {args.rounds} fresh processes on "
        f"{os.cpu_count()} CPUs:"
    )
    print(
        f"  cold (schemas loaded and compiled): {med['cold']:.3f} s, reference (read + parse the golden YAML) "
        f"{result['reference_seconds']:.3f} s: ratio {result['ratio']:.2f} (target <= {TARGET.limit}; "
        f"{TARGET.absolute} s before issue 41: information) {'ok' if result['ok'] else 'MISSED'}"
    )
    print(f"  warm (schemas cached):              {med['warm']:.3f} s")
    print(f"  parse YAML + validate (warm):       {med['parse']:.3f} s")
    if args.json:
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
