#!/usr/bin/env python3
"""`helm-nemo preflight` of the seed 001 recipe against an emulated cluster of 1,000 nodes and 5,000 pods
(issue 24, Python start included; the target a ratio to a reference, issue 41).

The loopback API emulator (tests/kube_emulator.py) runs in its own process, as an API server would, holding
a healthy A3 Ultra cluster (tests/cluster_states.py) grown to 1,000 GPU nodes and 5,000 running pods of
realistic size (labels, owner references, env, mounts, status: ~3 KB of JSON each, as kubectl get -o json
shows them). Side by side, alternately after a warm-up: A = the preflight (it renders the three releases
with helm template, then reads the cluster), B = the three plain `helm template`s of the same charts and
values one after another (what any install of the recipe costs before it touches the cluster), then a fresh
Python asking the same emulator for the node and pod lists with urllib and decoding them (bench/reference.py get).
The reference is B plus that; `ratio` is the median of the rounds' ratios A / reference, the target (issue 41).

`--json` prints one line of JSON for bench/run.py.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import reference

HELM = os.environ.get("HELM4", str(ROOT / ".tools/helm4/helm"))
RECIPE = ROOT / "values/examples/a3ultra-405b.yaml"
NODES, PODS = 1000, 5000


def gpu_pods(nodes: int) -> int:
    """How many of the pods hold 4 GPUs: two on each of the first fifth of the nodes (400 of 5,000 at 1,000 nodes)."""
    return 2 * (nodes // 5)


TARGET = reference.target("preflight")


def realistic_pod(index: int, node: str, gpus: int) -> dict:
    """A running training pod as the API server returns it (~3 KB)."""
    name = f"team-job-{index // 8:04d}-workload-{index % 8}-0-{index:05x}"
    requests = {"cpu": "8", "memory": "64Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": f"team-{index % 7}",
            "uid": f"5f0c6a8e-{index:04x}-4d7e-9d2e-2a1b3c4d5e6f",
            "resourceVersion": str(100000 + index),
            "creationTimestamp": "2026-11-20T08:00:00Z",
            "labels": {
                "batch.kubernetes.io/job-name": name[:40],
                "jobset.sigs.k8s.io/jobset-name": "team-job",
                "jobset.sigs.k8s.io/replicatedjob-name": "workload",
                "kueue.x-k8s.io/queue-name": "team-q",
                "batch.kubernetes.io/job-completion-index": str(index % 8),
            },
            "annotations": {
                "kubectl.kubernetes.io/default-container": "workload",
                "kueue.x-k8s.io/workload": f"jobset-team-job-{index:05x}",
            },
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": name[:40],
                    "controller": True,
                    "blockOwnerDeletion": True,
                    "uid": f"8a7b6c5d-{index:04x}-4e3f-8a9b-0c1d2e3f4a5b",
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "schedulerName": "default-scheduler",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "hostNetwork": True,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "workload",
                    "image": "us-docker.pkg.dev/project/repo/nemo:25.07",
                    "command": ["bash", "-c"],
                    "args": ["bash /workload/launcher/launch-workload.sh"],
                    "env": [{"name": f"NCCL_VAR_{n}", "value": str(n)} for n in range(12)],
                    "resources": {"limits": requests, "requests": requests},
                    "volumeMounts": [{"name": v, "mountPath": f"/{v}"} for v in ("dshm", "data", "ckpt", "launcher")],
                }
            ],
            "volumes": [
                {"name": "dshm", "emptyDir": {"medium": "Memory"}},
                {"name": "data", "emptyDir": {}},
                {"name": "ckpt", "emptyDir": {}},
                {"name": "launcher", "configMap": {"name": "launcher"}},
            ],
        },
        "status": {
            "phase": "Running",
            "hostIP": "10.0.0.1",
            "podIP": "10.0.0.1",
            "qosClass": "Burstable",
            "startTime": "2026-11-20T08:00:05Z",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": "2026-11-20T08:00:05Z"}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "containerStatuses": [
                {
                    "name": "workload",
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": "us-docker.pkg.dev/project/repo/nemo:25.07",
                    "imageID": "us-docker.pkg.dev/project/repo/nemo@sha256:" + "ab" * 32,
                    "containerID": f"containerd://{index:064x}",
                    "state": {"running": {"startedAt": "2026-11-20T08:00:09Z"}},
                }
            ],
        },
    }


def serve(node_count: int = NODES, pod_count: int = PODS) -> None:
    """Child process: the emulator with the big cluster; prints its URL, serves until stdin closes."""
    import cluster_states as states
    from kube_emulator import KubeEmulator

    kube = KubeEmulator().start()
    states.healthy_a3ultra(kube, nodes=node_count, quota=4096)
    nodes = [f"gke-a3u-pool-{i:04d}" for i in range(node_count)]
    for index in range(pod_count):  # 5 pods a node; the first two of each of the first fifth hold GPUs
        gpus = 4 if index < gpu_pods(node_count) else 0
        kube.put(realistic_pod(index, nodes[index % node_count], gpus))
    print(kube.url, flush=True)
    sys.stdin.read()
    kube.stop()


def kubeconfig_for_emulator(url: str, path: Path, namespace: str = "ml-team") -> Path:
    """A kubeconfig for the loopback emulator at `url` (any bearer token passes)."""
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "bench",
                "clusters": [{"name": "bench", "cluster": {"server": url}}],
                "users": [{"name": "bench", "user": {"token": "emulator-token"}}],
                "contexts": [
                    {"name": "bench", "context": {"cluster": "bench", "user": "bench", "namespace": namespace}}
                ],
            }
        )
    )
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds first")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=NODES, help=argparse.SUPPRESS)  # with --serve
    parser.add_argument("--pods", type=int, default=PODS, help=argparse.SUPPRESS)  # with --serve
    args = parser.parse_args()
    if args.serve:
        serve(args.nodes, args.pods)
        return 0
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            kubeconfig = kubeconfig_for_emulator(url, tmp / "kubeconfig")
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(
                KUBECONFIG=str(kubeconfig),
                HELM_BIN=HELM,
                PROJECT_ID="bench-project",
                GCS_BUCKET="bench-bucket",
                KUEUE_NAME="a3-ultra",
                HELM_NEMO_CACHE_DIR=str(tmp / "cache"),
            )
            ours = [
                str(ROOT / ".venv/bin/helm-nemo"),
                "preflight",
                "--values",
                str(RECIPE),
                "-n",
                "ml-team",
                "-o",
                "json",
            ]
            from helm_nemo.values.plan import build_plans, helm_values_json

            plain = []
            for plan in build_plans(RECIPE, env):
                values = tmp / f"{plan.release}.json"
                values.write_text(helm_values_json(plan))
                plain.append([HELM, "template", plan.release, plan.chart, "-f", str(values), "-n", "ml-team"])

            def timed(commands) -> tuple[float, str]:
                start, out = time.perf_counter(), ""
                for command in commands:
                    proc = subprocess.run(command, env=env, capture_output=True, text=True)
                    if proc.returncode not in (0, 1) or (command is not ours and proc.returncode):
                        raise SystemExit(f"failed: {' '.join(command)}\n{proc.stderr}")
                    out = proc.stdout
                return time.perf_counter() - start, out

            lists = [url + "/api/v1/nodes", url + "/api/v1/pods"]
            for _ in range(args.warmup):
                timed([ours]), timed(plain), reference.timed_reference("get", *lists)
            ta, tb, tc, report = [], [], [], ""
            for _ in range(args.rounds):
                elapsed, report = timed([ours])
                ta.append(elapsed)
                tb.append(timed(plain)[0])
                tc.append(tb[-1] + reference.timed_reference("get", *lists))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    document = json.loads(report)
    gpus = next(c for c in document["checks"] if c["id"] == "capacity.gpus")
    result = {
        "nodes": NODES,
        "pods": PODS,
        "rounds": args.rounds,
        "preflight": {"min": min(ta), "median": statistics.median(ta), "max": max(ta)},
        "helm_template_x3": {"min": min(tb), "median": statistics.median(tb), "max": max(tb)},
        "samples": ta,
        "reference_samples": tc,
        **reference.judge(TARGET, ta, tc),
        "exit_code": document["exit_code"],
        "summary": document["summary"],
        "capacity": gpus["message"],
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"preflight of {RECIPE.name} against {NODES} nodes and {PODS} pods ({args.rounds} rounds):")
        for key in ("preflight", "helm_template_x3"):
            s = result[key]
            print(
                f"  {key:17} min {s['min'] * 1000:6.0f} ms  median {s['median'] * 1000:6.0f} ms  max {s['max'] * 1000:6.0f} ms"
            )
        print(
            f"  median {result['preflight']['median']:.2f} s, reference {result['reference_seconds']:.2f} s, ratio "
            f"{result['ratio']:.2f} (target <= {TARGET.limit}; {TARGET.absolute} s before issue 41: information) "
            f"{'ok' if result['ok'] else 'MISSED'}; checks: {result['summary']}; {result['capacity']}"
        )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
