#!/usr/bin/env python3
"""Benchmark: `helm-nemo report` of a failed 1,024-pod JobSet whose rank-0 log is 50 MB (target <= 3 s wall, issue 41).

The run is tests/failed_at_scale.py's (real GPU logs: rank FIRST's CUDA OOM, every other rank's NCCL watchdog), on
the real control plane of tests/real_cluster.py as bench/real_cluster_bench.py builds it (the chart's JobSet,
admitted by Kueue, its pods made by the controllers, run by kwok on A3 Ultra nodes, each pod's own log served by
kwok, each pod ended as the kubelet reports it, the JobSet Failed), and beside it on the loopback emulator
(tests/kube_emulator.py) with the same objects and logs.

Rank 0's log is 50 MB: before its real lines (the hang run's rank 0, steps 0–30 and its watchdog), the healthy
2-node run's real step lines (tests/logs/real/gpu/healthy-2node/node-0.log) cycled as tests/test_report.py's
`grown` does: step k is the real line of step k mod 60 with its numbers set to k and the kubelet's time moved so
the steps come as far apart as the real ones did; the hang's own steps follow, numbered after them. The report
reads that whole log (its curves) besides everything `status` reads.

Each round runs the command as a user does (a new process) and checks its answer (exit 0, the page names rank
FIRST's pod and cuda-oom, the curves span every step). Reported: the median wall time, the report process's CPU
time (user + system: what a loaded machine does not inflate), `status` of the same run in the same rounds (the
reference: the report reads all that status reads, then the whole rank-0 log), and the page's size.

  .venv/bin/python bench/report_bench.py [--rounds N] [--pods N] [--log-mb N] [--emulator-only] [--json]

`bench_report(...)` is the measurement; `main()` starts (and stops) the control plane around it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

TARGET = 3.0
HEALTHY = ROOT / "tests/logs/real/gpu/healthy-2node/node-0.log"


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def _time(line: str) -> datetime:
    whole, _, fraction = line.partition(" ")[0].rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{whole}.{fraction[:6]:0<6}+00:00")


def _renumber(text: str, step: int, total: int) -> str:
    text = re.sub(r"iteration \d+/\d+", f"iteration {step}/{total - 1}", text)
    return re.sub(r"global_step: \d+", f"global_step: {step}", text)


def rank0_log(log: str, megabytes: float) -> tuple[str, int]:
    """Rank 0's real log with a history of real step lines before it, `megabytes` in all; (log, steps)."""
    real = HEALTHY.read_text(encoding="utf-8").splitlines()
    body = [line for line in real if "Training epoch" in line]
    times = [_time(line) for line in body]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)] + [times[1] - times[0]]
    per_step = sum(len(line) + 1 for line in body) / len(body)
    ended = log.rstrip("\n").split("\n")
    own = [n for n, line in enumerate(ended) if "Training epoch" in line]
    history = max(0, int((megabytes * 1e6 - len(log)) / per_step))
    total = history + len(own)
    start = _time(ended[own[0]]) - sum((gaps[k % len(gaps)] for k in range(history)), timedelta(0))
    head = ended[: own[0]]
    # the launcher's first lines (moved to just before the history, so the log stays in time order), the history,
    # then rank 0's lines from its first step
    out = [
        f"{_stamp(start - timedelta(milliseconds=3 - n))} {line.partition(' ')[2]}" for n, line in enumerate(head[:3])
    ]
    at = start
    for k in range(history):
        out.append(f"{_stamp(at)} {_renumber(body[k % len(body)].partition(' ')[2], k, total)}")
        at += gaps[k % len(gaps)]
    step = history
    for line in ended[own[0] :]:
        if "Training epoch" in line:
            stamp, _, rest = line.partition(" ")
            line = f"{stamp} {_renumber(rest, step, total)}"
            step += 1
        out.append(line)
    return "\n".join(out) + "\n", total


def bench_report(envs: dict[str, dict], expected: dict[str, str], tmp: Path, rounds: int, steps: int) -> dict:
    """Median wall time of `helm-nemo report` on each cluster in `envs` (name -> environment), answers checked."""
    from real_cluster_bench import FAILED_RELEASE, NAMESPACE, NEMO, run, stats

    import resource

    times: dict[str, list[float]] = {name: [] for name in envs}
    times.update({f"{name}_cpu": [] for name in envs})
    times.update({f"{name}_status": [] for name in envs})
    times.update({f"{name}_status_cpu": [] for name in envs})
    size = 0
    for round_ in range(rounds + 1):
        for name, env in envs.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            status, _ = run([*NEMO, "status", FAILED_RELEASE, "-n", NAMESPACE, "-o", "json"], env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            status_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            out = tmp / f"report-{name}.html"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            elapsed, proc = run([*NEMO, "report", FAILED_RELEASE, "-n", NAMESPACE, "-o", str(out)], env)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            page = out.read_text(encoding="utf-8") if out.exists() else ""
            if proc.returncode != 0 or "FAILED: cuda-oom" not in page or expected[name] not in page:
                raise SystemExit(f"report on the {name} cluster: exit {proc.returncode}\n{proc.stderr[-3000:]}")
            if f"steps 0–{steps - 1}" not in page:
                raise SystemExit(f"report on the {name} cluster: the curves do not hold the {steps} steps")
            size = len(page.encode())
            if round_:  # the first round warms the caches (bytecode, the API server's watch caches)
                times[name].append(elapsed)
                times[f"{name}_cpu"].append(cpu)
                times[f"{name}_status"].append(status)
                times[f"{name}_status_cpu"].append(status_cpu)
    measured = "real" if "real" in envs else next(iter(envs))
    return {
        "html_bytes": size,
        "cluster": measured,
        "samples": times[measured],  # bench/run.py judges these beside status's (bench/reference.py TARGETS)
        "reference_samples": times[f"{measured}_status"],
        **{name: stats(samples) for name, samples in times.items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pods", type=int, default=1024)
    parser.add_argument("--log-mb", type=float, default=50)
    parser.add_argument("--emulator-only", action="store_true", help="no control plane: the emulator's figure only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from failed_at_scale import failed_run
    from kube_emulator import KubeEmulator
    from real_cluster_bench import ENV, NAMESPACE, echo, failed_emulator, failed_real

    began = time.monotonic()
    first = args.pods // 2 + 5
    runs = failed_run(args.pods, first, datetime.now(UTC) - timedelta(minutes=30))
    runs[0].log, steps = rank0_log(runs[0].log, args.log_mb)
    result: dict = {"pods": args.pods, "first": first, "rank0_log_bytes": len(runs[0].log), "steps": steps}
    with tempfile.TemporaryDirectory(prefix="helm-nemo-report-bench-") as tmp_name, KubeEmulator(ready=False) as kube:
        tmp = Path(tmp_name)
        names = failed_emulator(kube, runs, tmp)
        base = {**ENV, "HOME": str(tmp)}
        envs = {"emulator": {**base, "KUBECONFIG": str(kube.kubeconfig(tmp / "emulator", namespace=NAMESPACE))}}
        expected = {"emulator": names[first]}
        cluster = None
        try:
            if not args.emulator_only:
                from real_cluster import RealCluster

                cluster = RealCluster(tmp / "cluster", echo=echo, large=True)
                cluster.start()
                real_names, setup = failed_real(cluster, runs, tmp)
                result["setup_seconds"] = setup
                envs["real"] = {**base, "KUBECONFIG": str(cluster.kubeconfig_path)}
                expected["real"] = real_names[first]
            result.update(bench_report(envs, expected, tmp, args.rounds, steps))
        finally:
            if cluster is not None:
                cluster.stop()
    result["target"] = TARGET
    result["total_seconds"] = time.monotonic() - began
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"report of a failed {args.pods}-pod JobSet, rank-0 log {result['rank0_log_bytes'] / 1e6:.1f} MB "
            f"({steps} steps), page {result['html_bytes'] / 1024:.0f} KiB ({args.rounds} rounds, medians; min-max; "
            f"target <= {TARGET} s on the real control plane):"
        )
        for name in ("emulator", "real"):
            for key, what in (
                (name, "wall"),
                (f"{name}_cpu", "CPU time of the report process"),
                (f"{name}_status", "wall of `status` (reference, same rounds)"),
                (f"{name}_status_cpu", "CPU time of `status`"),
            ):
                if key in result:
                    s = result[key]
                    print(f"  {key:16} {s['median']:.3f} s  ({s['min']:.3f}-{s['max']:.3f})  {what}")
        print(f"  load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    measured = result.get("real", result["emulator"])["median"]
    return 0 if measured <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
