#!/usr/bin/env python3
"""Benchmark: `helm-nemo status` of a 512-pod JobSet whose rank-0 log is 50 MB (target: a ratio, issue 41).

The cluster is the loopback API emulator (tests/kube_emulator.py, in this process, its own threads): one
JobSet of 512 pods, each pod with the pod spec the a3ultra jobset chart renders (env, volumes, sidecars:
~5.7 KB of JSON per pod; a real API server adds managedFields) and a running container status, the admitted Kueue
Workload, 200 warning events in the namespace, and a NeMo 2 rank-0 log of 50 MB (about 200,000 training
steps with NeMo's other lines). Each round runs the command as a user does (a new process: start-up,
kubeconfig, the lists, the log's tail, the verdict) and checks its answer (Running, the right last step), then
the reference (bench/reference.py get: a fresh Python asking the same emulator for the pod list and rank 0's
log tail as status does, with urllib, and decoding them: process start, the server's work, loopback, decode).
`seconds` is the median wall time, `ratio` the median of the rounds' ratios to the reference (the target, issue
41); the figure also reports how many bytes of the log were read.

  .venv/bin/python bench/status_bench.py [--rounds N] [--pods N] [--log-mb N] [--json]
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
from datetime import datetime, timedelta, UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import reference

TARGET = reference.target("status")
RELEASE = "bench-run"


def chart_pod_spec(gpus: int = 4096) -> dict:
    """The pod spec the a3ultra jobset chart renders (plain helm template) for `gpus` GPUs (8 a pod)."""
    import yaml

    helm = os.environ.get("HELM4", str(ROOT / ".tools/helm4/helm"))
    out = subprocess.run(
        [
            helm,
            "template",
            RELEASE,
            str(ROOT / "charts/a3ultra/jobset"),
            "--namespace",
            "ml-team",
            "--set",
            f"workload.gpus={gpus}",
            "--set",
            "queue=a3-ultra",
            "--set",
            "volumes.gcsMounts[0].bucketName=bench",
            "--set",
            "volumes.gcsMounts[0].mountPath=/b",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for doc in yaml.safe_load_all(out):
        if isinstance(doc, dict) and doc.get("kind") == "JobSet":
            return doc, doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    raise SystemExit("the chart rendered no JobSet")


def build(kube, pods: int, log_mb: int) -> int:
    """Fill the emulator; returns the last step the log shows (1-based count)."""
    import status_states as S

    jobset, template = chart_pod_spec(gpus=8 * pods)
    jobset["status"] = {
        "restarts": 0,
        "replicatedJobsStatus": [
            {"name": "workload", "ready": pods, "active": pods, "succeeded": 0, "failed": 0, "suspended": 0}
        ],
    }
    jobset["spec"]["suspend"] = False
    stored = kube.put(jobset)
    kube.put(S.workload(stored, [S.condition("QuotaReserved"), S.condition("Admitted")], admitted_by="a3-ultra-cq"))
    for index in range(pods):
        pod = S.pod(RELEASE, index)
        pod["metadata"]["labels"].update(template["metadata"].get("labels") or {})
        pod["spec"] = {
            **template["spec"],
            "nodeName": f"gke-a3u-{index:04d}",
            "hostname": f"{RELEASE}-workload-0-{index}",
        }
        pod["status"]["containerStatuses"] = [
            {
                "name": c["name"],
                "ready": True,
                "restartCount": 0,
                "image": c.get("image", ""),
                "state": {"running": {"startedAt": S.iso(S.T0)}},
            }
            for c in template["spec"]["containers"]
        ]
        kube.put(pod)
    for index in range(200):
        kube.put(
            S.event(
                "Pod",
                f"other-job-{index}",
                "FailedMount",
                'MountVolume.SetUp failed for volume "x"',
                S.T0,
                name=f"other-job-{index}.evt",
            )
        )
    target = log_mb * 1024 * 1024
    per_step = len(S.nemo2_log(1000, 10_000_000)) / 1000
    steps = int(target / per_step) + 1
    text = S.nemo2_log(steps, 10_000_000)
    lines = text.count("\n")
    started = datetime.now(UTC) - timedelta(seconds=lines * 0.001)
    kube.write_log("ml-team", S.pod(RELEASE, 0)["metadata"]["name"], text, at=started, step_s=0.001)
    return len(text), steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--warmup", type=int, default=1, help="unmeasured rounds first (bytecode, the emulator's first answers)"
    )
    parser.add_argument("--pods", type=int, default=512)
    parser.add_argument("--log-mb", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    import status_states as S
    from kube_emulator import KubeEmulator

    from helm_nemo.status.cluster import TAIL_LINES

    with KubeEmulator(ready=False) as kube, tempfile.TemporaryDirectory() as tmp:
        log_bytes, expected_steps = build(kube, args.pods, args.log_mb)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(KUBECONFIG=str(kube.kubeconfig(Path(tmp) / "kubeconfig", namespace="ml-team")), HOME=tmp)
        env.pop("HELM_NAMESPACE", None)
        cmd = [str(ROOT / ".venv/bin/helm-nemo"), "status", RELEASE, "-o", "json"]
        rank0 = S.pod(RELEASE, 0)["metadata"]["name"]
        urls = [
            f"{kube.url}/api/v1/namespaces/ml-team/pods",
            f"{kube.url}/api/v1/namespaces/ml-team/pods/{rank0}/log?tailLines={TAIL_LINES}&container=workload"
            "&timestamps=true",
        ]
        times, reference_times = [], []
        for round_ in range(args.warmup + args.rounds):
            before = len(kube.requests)
            start = time.perf_counter()
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
            elapsed = time.perf_counter() - start
            data = json.loads(proc.stdout)
            release = data["releases"][0]
            if (
                proc.returncode != 0
                or release["state"] != "Running"
                or release["progress"]["steps_done"] != expected_steps
                or release["pods"]["total"] != args.pods
            ):
                raise SystemExit(f"wrong answer (exit {proc.returncode}): {proc.stdout[:2000]}{proc.stderr}")
            requests = kube.requests[before:]
            reference_elapsed = reference.timed_reference("get", *urls)
            if round_ >= args.warmup:
                times.append(elapsed)
                reference_times.append(reference_elapsed)
        log_reads = [r for r in requests if r.path.endswith("/log")]
    result = {
        "pods": args.pods,
        "log_bytes": log_bytes,
        "requests_per_run": len(requests),
        "log_requests": [r.query for r in log_reads],
        "seconds": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "rounds": args.rounds,
        "samples": times,
        "reference_samples": reference_times,
        **{k: v for k, v in reference.judge(TARGET, times, reference_times).items() if k != "seconds"},
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"status of a {args.pods}-pod JobSet, rank-0 log {log_bytes / 1e6:.1f} MB: median {result['seconds']:.3f} s "
            f"(min {result['min']:.3f}, max {result['max']:.3f}), reference {result['reference_seconds']:.3f} s, "
            f"ratio {result['ratio']:.2f} (target <= {TARGET.limit}; {TARGET.absolute} s before issue 41: information), "
            f"{len(requests)} requests, log read with {log_reads[0].query if log_reads else 'none'}"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
