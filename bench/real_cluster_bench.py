#!/usr/bin/env python3
"""The preflight and status benchmarks on the loopback emulator and on the real control plane, side by side
in one run (issue 30 item 4).

Real: the control plane of tests/real_cluster.py (etcd, kube-apiserver, controller-manager, scheduler, the
JobSet and Kueue managers with their webhooks, kwok), started here and stopped at the end. Emulator: the same
states as bench/preflight_bench.py and bench/status_bench.py build them.

1. preflight of seed 001 (values/examples/a3ultra-405b.yaml) against 1,000 A3 Ultra nodes and 5,000 pods.
   Both clusters hold the states of tests/cluster_states.py (healthy_a3ultra grown to 1,000 nodes, quota
   4096) and preflight_bench's 5,000 pods of ~3 KB (400 of them holding 4 GPUs, one on each of the first 400 nodes). On
   the real one the nodes are kwok's (Ready, with leases) and the pods are created with `nodeName` set
   (bound, as the scheduler would) and run by kwok; they come back with managedFields and the status kwok
   writes. Rounds alternate: emulator, real, and the three plain `helm template`s the preflight renders.
2. `helm-nemo status` of a 512-pod JobSet with a 50 MB rank-0 log. Emulator: bench/status_bench.py's state.
   Real: the JobSet the a3ultra jobset chart renders (4,096 GPUs), created on the same cluster once the
   preflight rounds are done: Kueue admits it (TAS, preferred hostname), the JobSet controller makes the Job,
   the Job controller 512 pods, Kueue's TAS ungates them and kwok runs them (a kwok delay annotation keeps
   them Running); kwok serves the rank-0 log (the same NeMo 2 text, in the container runtime's log format)
   through the API server's pods/log. Rounds alternate emulator / real; each answer is checked (Running,
   512 pods, the log's last step).

Wall times include Python start; medians. `--json` prints one line of JSON. The setup (cluster start,
objects, kwok bringing 6,000 objects to their state) is reported separately.

  .venv/bin/python bench/real_cluster_bench.py [--rounds N] [--json]

--quick (make test runs it, tests/test_bench.py): the same setup and rounds at a tiny size (10 nodes, 20 pods, a
2-pod JobSet, a 1 MB log; one round), so a broken setup fails the suite instead of the next `make bench-real`.
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import preflight_bench as pb
import status_bench as sb

# The checkout's own console script, else this interpreter on this checkout (a git worktree has no .venv).
NEMO = (
    [str(ROOT / ".venv/bin/helm-nemo")]
    if (ROOT / ".venv/bin/helm-nemo").exists()
    else [sys.executable, "-m", "helm_nemo"]
)
HELM = pb.HELM
NAMESPACE = "ml-team"
FAILED_RELEASE = sb.RELEASE  # the chart renders its names and labels for it
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
ENV["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
for _name in ("HELM_NAMESPACE", "HELM_KUBECONTEXT", "HELM_KUBEAPISERVER", "HELM_KUBETOKEN"):
    ENV.pop(_name, None)


def echo(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def mark(took: dict[str, float], what: str, start: float) -> None:
    took[what] = time.monotonic() - start
    echo(f"{what}: {took[what]:.1f} s")


def stats(samples: list[float]) -> dict:
    return {"min": min(samples), "median": statistics.median(samples), "max": max(samples), "n": len(samples)}


def run(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc


# --------------------------------------------------------------------------------------------------
# The states on the real control plane


def preflight_state(cluster, node_count: int = pb.NODES, pod_count: int = pb.PODS) -> dict[str, float]:
    """1,000 A3 Ultra nodes, Kueue, networks, CSI drivers, 5,000 pods (made while kwok readies the nodes);
    waits until kwok runs them all and every node is Ready."""
    import cluster_states as states
    from real_states import RealKube

    took: dict[str, float] = {}
    kube = RealKube(cluster)
    start = time.monotonic()
    states.healthy_a3ultra(kube, nodes=node_count, quota=4096)
    kube.flush(workers=6)
    mark(took, f"create {node_count:,} nodes + Kueue, networks, CSI", start)
    start = time.monotonic()
    nodes = [f"gke-a3u-pool-{i:04d}" for i in range(node_count)]
    for team in range(7):
        kube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{team}"}})
    for index in range(pod_count):
        kube.put(pb.realistic_pod(index, nodes[index % node_count], 4 if index < pb.gpu_pods(node_count) else 0))
    kube.flush(workers=6)
    mark(took, f"create {pod_count:,} pods (nodeName set)", start)
    start = time.monotonic()
    cluster.wait_for(
        f"{pod_count:,} pods Running",
        lambda: running_pods(cluster) >= pod_count,
        300,
        3 if pod_count >= 1000 else 0.5,
    )
    mark(took, f"kwok: {pod_count:,} pods Running", start)
    start = time.monotonic()
    settled(cluster)
    mark(took, "every node Ready, no not-ready taint", start)
    return took


def settled(cluster) -> None:
    """Every node Ready (kwok renews 1,000 leases while it runs 5,000 pods: none may have lapsed)."""
    cluster.wait_for(
        "every node Ready",
        lambda: all(
            ready(n) and not any(t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints") or [])
            for n in cluster.list_objects("v1", "nodes")
        ),
        120,
        2,
    )


def ready(node: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions") or [])


def running_pods(cluster) -> int:
    count, token = 0, ""
    while True:
        page = cluster.get(
            "/api/v1/pods?limit=2000&fieldSelector=status.phase%3DRunning" + (f"&continue={token}" if token else "")
        )
        count += len(page["items"])
        token = page["metadata"].get("continue")
        if not token:
            return count


def cri_log(text: str, started: datetime, step_s: float) -> str:
    """`text` in the container runtime's log format (what a kubelet, and kwok, read)."""
    out = []
    for index, line in enumerate(text.splitlines()):
        at = started + timedelta(seconds=index * step_s)
        out.append(f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z stdout F {line}\n")
    return "".join(out)


def status_state(cluster, tmp: Path, pods: int, log_mb: int) -> tuple[int, int, dict[str, float]]:
    """The 512-pod JobSet, run by the controllers; kwok serves the rank-0 log. (log bytes, steps, setup)."""
    import status_states as S

    took: dict[str, float] = {}
    start = time.monotonic()
    jobset, _ = sb.chart_pod_spec(gpus=8 * pods)
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    # kwok's pod-complete stage would end the pods a few seconds after they run: a training runs for hours.
    # (kwok takes the smaller of delay and jitter-delay when jitter-delay is not the larger: both are set.)
    annotations = template["metadata"].setdefault("annotations", {})
    annotations["pod-complete.stage.kwok.x-k8s.io/delay"] = "24h"
    annotations["pod-complete.stage.kwok.x-k8s.io/jitter-delay"] = "24h"
    per_step = len(S.nemo2_log(1000, 10_000_000)) / 1000
    steps = int(log_mb * 1024 * 1024 / per_step) + 1
    text = S.nemo2_log(steps, 10_000_000)
    lines = text.count("\n")
    log_file = tmp / "rank0.log"
    log_file.write_text(cri_log(text, datetime.now(UTC) - timedelta(seconds=lines * 0.001), 0.001))
    cluster.serve_logs(NAMESPACE, log_file)
    mark(took, f"write the {log_mb} MB log", start)
    start = time.monotonic()
    cluster.api("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets", jobset)
    selector = f"jobset.sigs.k8s.io/jobset-name={sb.RELEASE}"

    def all_running() -> bool:
        items = cluster.list_objects("v1", "pods", NAMESPACE, selector)
        count = sum(p["status"].get("phase") == "Running" for p in items)
        echo(f"  {len(items)} pods, {count} Running")
        return len(items) == pods and count == pods

    cluster.wait_for(f"{pods} pods of the JobSet Running", all_running, 300, 3 if pods >= 100 else 0.5)
    mark(took, f"Kueue admits, controllers make and kwok runs {pods} pods", start)
    return len(text), steps, took


# --------------------------------------------------------------------------------------------------
# A failed 1,024-pod JobSet (issue 34 item 7): tests/failed_at_scale.py's run of real GPU logs


def failed_pod_status(template: dict, run, finished: dict) -> dict:
    """A pod's status as the kubelet leaves it: the workload container ended with the run's exit code, the
    others killed with it (137)."""
    containers = []
    for container in template["spec"]["containers"]:
        code = run.exit_code if container["name"] == "workload" else 137
        term = {"exitCode": code, "reason": "Error", "startedAt": run.started_at, "finishedAt": run.finished_at}
        containers.append(
            {
                "name": container["name"],
                "ready": False,
                "restartCount": 0,
                "image": container.get("image", ""),
                "state": {"terminated": term},
            }
        )
    return {**finished, "phase": "Failed", "containerStatuses": containers}


def failed_emulator(kube, runs: list, tmp: Path) -> dict[int, str]:
    """The emulator's copy: the chart's JobSet (Failed) and pods (the same pod spec), the same logs."""
    import status_states as S
    from real_cluster import cri_log

    jobset, template = sb.chart_pod_spec(gpus=8 * len(runs))
    failed = S.condition("Failed", reason="FailedJobs", message="jobset failed: job workload-0 failed")
    jobset["status"] = {
        "restarts": 0,
        "conditions": [failed],
        "replicatedJobsStatus": [
            {"name": "workload", "ready": 0, "active": 0, "succeeded": 0, "failed": 1, "suspended": 0}
        ],
    }
    kube.put(jobset)
    names = {}
    for run in runs:
        pod = S.pod(FAILED_RELEASE, run.rank)
        pod["metadata"]["labels"].update(template["metadata"].get("labels") or {})
        pod["spec"] = {**template["spec"], "nodeName": f"gke-a3u-{run.rank:04d}"}
        pod["status"] = failed_pod_status(template, run, {"startTime": run.started_at, "conditions": []})
        kube.put(pod)
        names[run.rank] = pod["metadata"]["name"]
        kube.write_cri_log(NAMESPACE, names[run.rank], cri_log(run.log))
    return names


def failed_real(cluster, runs: list, tmp: Path) -> tuple[dict[int, str], dict[str, float]]:
    """On the real control plane: A3 Ultra nodes for every pod, Kueue, the chart's JobSet; the controllers
    and kwok run its pods (kept running); kwok serves each pod's own log (a Logs object per pod); each pod
    ends as the run says (the kubelet's report, the controller-manager stopped meanwhile and started again, so
    the Job controller sees them all ended at once); the JobSet fails."""
    import cluster_states as states
    from real_cluster import KEEP_RUNNING_LABEL, cri_log
    from real_states import RealKube

    took: dict[str, float] = {}
    pods = len(runs)
    start = time.monotonic()
    kube = RealKube(cluster)
    states.healthy_a3ultra(kube, nodes=pods, quota=8 * pods)
    kube.flush(workers=6)
    mark(took, f"create {pods} nodes + Kueue, networks, CSI", start)
    start = time.monotonic()
    jobset, template = sb.chart_pod_spec(gpus=8 * pods)
    template["metadata"].setdefault("labels", {})[KEEP_RUNNING_LABEL] = "true"
    cluster.api("POST", f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets", jobset)
    selector = f"jobset.sigs.k8s.io/jobset-name={FAILED_RELEASE}"

    def running() -> dict[int, str]:
        items = cluster.list_objects("v1", "pods", NAMESPACE, selector)
        count = sum(p["status"].get("phase") == "Running" for p in items)
        echo(f"  {len(items)} pods, {count} Running")
        if len(items) != pods or count != pods:
            return {}
        index = "batch.kubernetes.io/job-completion-index"
        return {int(p["metadata"]["annotations"][index]): p["metadata"]["name"] for p in items}

    names = cluster.wait_for(f"{pods} pods of the JobSet Running", running, 600, 3)
    mark(took, f"Kueue admits, controllers make and kwok runs {pods} pods", start)
    start = time.monotonic()
    logs = []
    for run in runs:
        path = tmp / f"failed-{run.rank}.log"
        path.write_text(cri_log(run.log))
        logs.append(
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": names[run.rank], "namespace": NAMESPACE},
                "spec": {"logs": [{"logsFile": str(path), "follow": False, "containers": ["workload"]}]},
            }
        )
    cluster.create_many(logs, workers=6)
    for rank in (0, pods - 1):
        last = runs[rank].log.rstrip("\n").rsplit("\n", 1)[-1].partition(" ")[2]
        log = f"/api/v1/namespaces/{NAMESPACE}/pods/{names[rank]}/log?container=workload&tailLines=1"
        cluster.wait_for(
            f"kwok serves rank {rank}'s log", lambda log=log, last=last: cluster.api("GET", log) == last + "\n", 120, 1
        )
    mark(took, f"{pods} Logs objects, served by kwok", start)
    start = time.monotonic()
    from concurrent.futures import ThreadPoolExecutor

    with cluster.stopped("kube-controller-manager"), ThreadPoolExecutor(max_workers=6) as pool:
        list(
            pool.map(
                lambda run: cluster.end_pod(
                    NAMESPACE, names[run.rank], run.exit_code, run.finished_at, started_at=run.started_at
                ),
                runs,
            )
        )
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{NAMESPACE}/jobsets/{FAILED_RELEASE}"
    cluster.wait_for(
        "the JobSet Failed",
        lambda: any(
            c["type"] == "Failed" and c["status"] == "True" for c in cluster.get(path)["status"].get("conditions") or []
        ),
        120,
        1,
    )
    failed = [
        p for p in cluster.list_objects("v1", "pods", NAMESPACE, selector) if p["status"].get("phase") == "Failed"
    ]
    assert len(failed) == pods, f"{len(failed)} of {pods} pods Failed"
    mark(took, f"{pods} pods ended (the kubelet's reports), the JobSet Failed", start)
    return names, took


def bench_failed(cluster, tmp: Path, rounds: int, pods: int, setup: dict) -> dict:
    from failed_at_scale import failed_run
    from kube_emulator import KubeEmulator

    first = pods // 2 + 5
    runs = failed_run(pods, first, datetime.now(UTC) - timedelta(minutes=30))
    with KubeEmulator(ready=False) as kube:
        emulated = failed_emulator(kube, runs, tmp)
        names, took = failed_real(cluster, runs, tmp)
        setup.update(took)
        base = {**ENV, "HOME": str(tmp)}
        envs = {
            "emulator": {**base, "KUBECONFIG": str(kube.kubeconfig(tmp / "failed-emulator", namespace=NAMESPACE))},
            "real": {**base, "KUBECONFIG": str(cluster.kubeconfig_path)},
        }
        expected = {"emulator": emulated[first], "real": names[first]}
        times: dict[str, list[float]] = {"emulator": [], "real": []}
        reads = []
        for round_ in range(rounds + 1):
            for name, env in envs.items():
                before = len(kube.requests)
                elapsed, proc = run([*NEMO, "status", FAILED_RELEASE, "-n", NAMESPACE, "-o", "json"], env)
                try:
                    release = json.loads(proc.stdout)["releases"][0]
                    cause = release["diagnosis"]["cause"]
                except (ValueError, KeyError, IndexError, TypeError):
                    raise SystemExit(f"status on the {name} cluster: exit {proc.returncode}\n{proc.stderr}") from None
                answer = (proc.returncode, release["state"], cause["pod"], cause["signature"])
                if answer != (1, "Failed", expected[name], "cuda-oom"):
                    raise SystemExit(f"wrong answer from the {name} cluster: {answer}")
                if name == "emulator":
                    reads.append(sum(r.path.endswith("/log") for r in list(kube.requests)[before:]))
                if round_:
                    times[name].append(elapsed)
    return {"pods": pods, "first": first, "log_reads": max(reads), **{k: stats(v) for k, v in times.items()}}


# --------------------------------------------------------------------------------------------------


def bench_preflight(
    cluster, tmp: Path, rounds: int, baseline: Path | None = None, nodes: int = pb.NODES, pods: int = pb.PODS
) -> dict:
    from helm_nemo.values.plan import build_plans, helm_values_json

    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench/preflight_bench.py"), "--serve", "--nodes", str(nodes), "--pods", str(pods)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()
        base = {
            **ENV,
            "HELM_BIN": HELM,
            "PROJECT_ID": "bench-project",
            "GCS_BUCKET": "bench-bucket",
            "KUEUE_NAME": "a3-ultra",
        }
        envs = {
            "emulator": {
                **base,
                "KUBECONFIG": str(pb.kubeconfig_for_emulator(url, tmp / "emulator.kubeconfig", NAMESPACE)),
                "HELM_NEMO_CACHE_DIR": str(tmp / "cache-e"),
            },
            "real": {**base, "KUBECONFIG": str(cluster.kubeconfig_path), "HELM_NEMO_CACHE_DIR": str(tmp / "cache-r")},
        }
        if baseline is not None:  # another checkout's code (e.g. main) on the same clusters, in the same rounds
            for name in ("emulator", "real"):
                envs[f"baseline_{name}"] = {**envs[name], "PYTHONPATH": str(baseline)}
        cmd = [*NEMO, "preflight", "--values", str(pb.RECIPE), "-n", NAMESPACE, "-o", "json"]
        plain = []
        for plan in build_plans(pb.RECIPE, base):
            values = tmp / f"{plan.release}.json"
            values.write_text(helm_values_json(plan))
            plain.append([HELM, "template", plan.release, plan.chart, "-f", str(values), "-n", NAMESPACE])
        times: dict[str, list[float]] = {name: [] for name in envs} | {"helm_template_x3": [], "load_average": []}
        documents: dict[str, dict] = {}
        for round_ in range(rounds + 1):
            for name, env in envs.items():
                elapsed, proc = run(cmd, env)
                if proc.returncode not in (0, 1):
                    raise SystemExit(f"preflight on the {name} cluster: exit {proc.returncode}\n{proc.stderr}")
                documents[name] = json.loads(proc.stdout)
                if round_:  # the first round warms up
                    times[name].append(elapsed)
            elapsed = 0.0
            for command in plain:
                took, proc = run(command, base)
                if proc.returncode:
                    raise SystemExit(f"failed: {' '.join(command)}\n{proc.stderr}")
                elapsed += took
            if round_:
                times["helm_template_x3"].append(elapsed)
                times["load_average"].append(os.getloadavg()[0])  # the 2 cores are shared: what else ran
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    out: dict = {key: stats(value) for key, value in times.items()}
    for name, document in documents.items():
        gpus = next(c for c in document["checks"] if c["id"] == "capacity.gpus")
        out[f"{name}_verdicts"] = {
            "summary": document["summary"],
            "failed": document["failed"],
            "capacity": gpus["message"],
            "details": gpus.get("details"),
        }
    out["same_capacity_answer"] = out["emulator_verdicts"]["details"] == out["real_verdicts"]["details"]
    return out


def bench_status(cluster, tmp: Path, rounds: int, pods: int, log_mb: int, setup: dict) -> dict:
    from kube_emulator import KubeEmulator

    with KubeEmulator(ready=False) as kube:
        log_bytes, expected_steps = sb.build(kube, pods, log_mb)
        real_bytes, real_steps, took = status_state(cluster, tmp, pods, log_mb)
        setup.update(took)
        assert (real_bytes, real_steps) == (log_bytes, expected_steps), "the two logs differ"
        base = {**ENV, "HOME": str(tmp)}
        envs = {
            "emulator": {**base, "KUBECONFIG": str(kube.kubeconfig(tmp / "status-emulator", namespace=NAMESPACE))},
            "real": {**base, "KUBECONFIG": str(cluster.kubeconfig_path)},
        }
        times: dict[str, list[float]] = {"emulator": [], "real": []}
        answers = {}
        for round_ in range(rounds + 1):
            for name, env in envs.items():
                elapsed, proc = run([*NEMO, "status", sb.RELEASE, "-n", NAMESPACE, "-o", "json"], env)
                try:
                    release = json.loads(proc.stdout)["releases"][0]
                except (ValueError, KeyError, IndexError):
                    raise SystemExit(f"status on the {name} cluster: exit {proc.returncode}\n{proc.stderr}") from None
                answer = (release["state"], release["progress"]["steps_done"], release["pods"]["total"])
                if proc.returncode != 0 or answer != ("Running", expected_steps, pods):
                    raise SystemExit(f"wrong answer from the {name} cluster (exit {proc.returncode}): {answer}")
                answers[name] = answer
                if round_:
                    times[name].append(elapsed)
    return {"pods": pods, "log_bytes": log_bytes, "steps": expected_steps, **{k: stats(v) for k, v in times.items()}}


def bench_nccl(cluster, tmp: Path, rounds: int) -> dict:
    """`preflight --nccl` of the G4 example on 1 node against plain `preflight`, side by side, Helm 4: its
    own cost is the difference less the test's run as the cluster records it (the Job's creation to rank 0's
    end: Kueue, the scheduler, kwok's pod start, the test; details.seconds.in_cluster, 1 s resolution). No
    emulator figure: the emulator has no Job controller, scheduler or kubelet to run the test's pods."""
    import test_real_cluster_nccl as tn

    for profile in ("g4",):
        have = cluster.nodes.get(profile, [])
        if len(have) < 2:
            cluster.add_gpu_nodes(profile, 2 - len(have))
    for driver in ("gcsfuse.csi.storage.gke.io", "parallelstore.csi.storage.gke.io"):
        cluster.apply(
            {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver}, "spec": {}}
        )
    namespace, env = tn.setup(cluster, tmp, "helm4", "g4", 16, "all_reduce_nvlink_info")
    env = {**env, "PYTHONPATH": ENV["PYTHONPATH"]}
    base = [*NEMO, "preflight", "--values", str(tn.G4_RECIPE), "-n", namespace, "-o", "json"]
    times: dict[str, list[float]] = {"plain": [], "nccl": [], "in_cluster": [], "own_cost": []}
    for round_ in range(rounds + 1):
        plain, proc = run(base, env)
        if proc.returncode:
            raise SystemExit(f"preflight: exit {proc.returncode}\n{proc.stderr}")
        nccl, proc = run([*base, "--nccl", "--nccl-nodes", "1"], env)
        check = next(c for c in json.loads(proc.stdout)["checks"] if c["id"] == "fabric.busbw")
        if proc.returncode or check["verdict"] != "ok":
            raise SystemExit(f"preflight --nccl: exit {proc.returncode}: {check['message']}\n{proc.stderr}")
        if round_:
            in_cluster = check["details"]["seconds"]["in_cluster"]
            times["plain"].append(plain)
            times["nccl"].append(nccl)
            times["in_cluster"].append(in_cluster)
            times["own_cost"].append(nccl - plain - in_cluster)
    return {key: stats(value) for key, value in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pods", type=int, default=512)
    parser.add_argument("--log-mb", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--only",
        choices=["preflight", "status", "nccl", "failed"],
        help="one of them (the status state needs the preflight's nodes; `failed`, the failed 1,024-pod JobSet, "
        "runs alone: it needs a node per pod)",
    )
    parser.add_argument("--failed-pods", type=int, default=1024)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a checkout (e.g. /work/main) whose preflight runs in the same rounds beside this one's",
    )
    parser.add_argument("--quick", action="store_true", help="a tiny size, one round (make test: the bench still runs)")
    args = parser.parse_args()
    nodes, pods = (10, 20) if args.quick else (pb.NODES, pb.PODS)
    if args.quick:
        args.rounds, args.pods, args.log_mb = 1, 2, 1
    from real_cluster import RealCluster

    began = time.monotonic()
    setup: dict[str, float] = {}
    result: dict = {"rounds": args.rounds, "nodes": nodes, "pods": pods}
    with tempfile.TemporaryDirectory(prefix="helm-nemo-real-bench-") as tmp_name:
        tmp = Path(tmp_name)
        cluster = RealCluster(tmp / "cluster", echo=echo, large=True)
        cluster.start()
        try:
            setup["control plane start"] = cluster.timings["start"]
            if args.only in (None, "nccl"):
                echo("preflight --nccl rounds ...")
                result["nccl"] = bench_nccl(cluster, tmp, args.rounds)
            if args.only == "nccl":
                return _print(result, setup, began, args)
            if args.only == "failed":
                echo("failed-run status rounds ...")
                result["failed"] = bench_failed(cluster, tmp, args.rounds, args.failed_pods, setup)
            else:
                setup.update(preflight_state(cluster, nodes, pods))
            if args.only not in ("status", "failed"):
                echo("preflight rounds ...")
                result["preflight"] = bench_preflight(cluster, tmp, args.rounds, args.baseline, nodes, pods)
            if args.only not in ("preflight", "failed"):
                echo("status rounds ...")
                result["status"] = bench_status(cluster, tmp, args.rounds, args.pods, args.log_mb, setup)
        finally:
            cluster.stop()
    return _print(result, setup, began, args)


def _print(result: dict, setup: dict, began: float, args) -> int:
    result["setup_seconds"] = setup
    result["total_seconds"] = time.monotonic() - began
    if args.json:
        print(json.dumps(result))
        return 0
    print("setup (s): " + ", ".join(f"{k} {v:.1f}" for k, v in setup.items()))
    for name in ("preflight", "status", "failed"):
        if name not in result:
            continue
        r = result[name]
        if name == "preflight":
            what = f"preflight of {pb.RECIPE.name}, {result['nodes']} nodes + {result['pods']} pods"
        elif name == "status":
            what = f"status of a {r['pods']}-pod JobSet, {r['log_bytes'] / 1e6:.1f} MB rank-0 log"
        else:
            what = (
                f"status of a failed {r['pods']}-pod JobSet (rank {r['first']} first; "
                f"{r['log_reads']} log reads on the emulator)"
            )
        print(f"{what} ({args.rounds} rounds, medians; min-max):")
        for key in ("emulator", "real", "baseline_emulator", "baseline_real", "helm_template_x3", "load_average"):
            if key in r:
                s = r[key]
                unit = "" if key == "load_average" else " s"
                print(f"  {key:17} {s['median']:.3f}{unit}  ({s['min']:.3f}-{s['max']:.3f})")
        print(f"  real / emulator   {r['real']['median'] / r['emulator']['median']:.2f}")
        if "same_capacity_answer" in r:
            print(f"  the same capacity.gpus details on both: {r['same_capacity_answer']}")
        for key in ("emulator_verdicts", "real_verdicts"):
            if key in r:
                print(f"  {key}: {r[key]['summary']}; failed {r[key]['failed']}; {r[key]['capacity']}")
    if "nccl" in result:
        r = result["nccl"]
        print(
            f"preflight --nccl of {Path('values/examples/g4-llama3-70b-finetune.yaml').name} on 1 node, Helm 4 "
            f"({args.rounds} rounds, medians; min-max):"
        )
        for key in ("plain", "nccl", "in_cluster", "own_cost"):
            s = r[key]
            print(f"  {key:17} {s['median']:.3f} s  ({s['min']:.3f}-{s['max']:.3f})")
    print(f"total {result['total_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
