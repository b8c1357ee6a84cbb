"""`helm nemo preflight --nccl` on the real control plane (tests/real_cluster.py, marker `cluster`), Helm 3 and 4:
the temporary nccl-test release goes through the real API server, Kueue (admission, topology-aware placement,
the gate it lifts), the scheduler and the Job controller; kwok runs its pods and serves as every pod's log one
of the nccl-tests outputs recorded on two H100s (tests/fixtures/nccl/gpu/, in the container runtime's log
framing, as a kubelet stores it); preflight reads rank 0's log through the API server's pods/log.

- the good fabric: G4 (values/examples/g4-llama3-70b-finetune.yaml: one node, NCCL over TCP sockets, the
  expected transport) on 1 node, the NVLink all_reduce output (average busbw 94.0 GB/s against G4's floor of
  30 GB/s averaged over a one-node all_reduce sweep): passes;
- a socket fallback: P5 (EFA expected: the Libfabric net) on 2 nodes, the output forced onto NCCL's socket
  transport: fails as a fallback (and below the 270 GB/s all_reduce floor);
- a too-low figure: G4 with the socket output (1.4 GB/s average, Socket as expected): fails below the floor;
- pods that cannot start: Kueue holding the test on quota, Kueue's topology placement finding no room, the
  scheduler finding no node (every G4 node busy): each ends with the status words, before the timeout;
- Ctrl-C while the test waits: exit 130, the release removed.
After each: no release, no Job, no pod, no Workload left in the namespace.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import HELMS, helm_env

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "tests/fixtures/nccl/gpu"
G4_RECIPE = ROOT / "values/examples/g4-llama3-70b-finetune.yaml"
QUEUE = "test-queue"
LEFTOVER_KINDS = [
    ("batch/v1", "jobs"),
    ("v1", "pods"),
    ("kueue.x-k8s.io/v1beta2", "workloads"),
    ("v1", "services"),
]
_made = iter(range(1 << 20))


@pytest.fixture(scope="module", params=sorted(HELMS))
def helm_name(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def pools(real_cluster):
    """2 G4 and 2 P5 kwok nodes of this module (other modules' GPU nodes of these profiles are used as well:
    the tests count what they find), the CSI drivers the G4 recipe mounts."""
    cluster = real_cluster
    for profile in ("g4", "p5"):
        have = cluster.nodes.get(profile, [])
        if len(have) < 2:
            cluster.add_gpu_nodes(profile, 2 - len(have))
    for driver in ("gcsfuse.csi.storage.gke.io", "parallelstore.csi.storage.gke.io"):
        cluster.apply(
            {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver}, "spec": {}}
        )
    return cluster


def setup(cluster, tmp_path: Path, helm_name: str, profile: str, gpus: int, recording: str) -> tuple[str, dict]:
    """A namespace with the Secret the G4 recipe reads, a Kueue queue for `profile` holding `gpus` GPUs (and
    every other resource its pods request), kwok serving `recording` as every pod's log. -> (namespace, env)"""
    namespace = f"nccl-{helm_name}-{next(_made)}"
    cluster.api(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    cluster.wait_for(
        "default service account",
        lambda: cluster._exists(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
        30,
    )
    cluster.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/secrets",
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"}, "stringData": {"token": "x"}},
    )
    accelerator = yaml.safe_load((ROOT / f"values/accelerators/{profile}.yaml").read_text())
    kueue = "kueue.x-k8s.io/v1beta2"
    cluster.apply(
        {
            "apiVersion": kueue,
            "kind": "Topology",
            "metadata": {"name": "hosts"},
            "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
        }
    )
    cluster.apply(
        {
            "apiVersion": kueue,
            "kind": "ResourceFlavor",
            "metadata": {"name": f"nccl-{profile}"},
            "spec": {"nodeLabels": accelerator["nodeLabels"], "topologyName": "hosts"},
        }
    )
    # Kueue admits a workload only when its ClusterQueue covers every resource the pods request.
    quotas = {"nvidia.com/gpu": gpus, "memory": "100Ti", "hugepages-2Mi": "1Ti"}
    fabric = accelerator.get("fabric") or {}
    if fabric.get("resource"):
        quotas[fabric["resource"]] = 1024
    cluster.apply(
        {
            "apiVersion": kueue,
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{namespace}"},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [
                    {
                        "coveredResources": sorted(quotas),
                        "flavors": [
                            {
                                "name": f"nccl-{profile}",
                                "resources": [{"name": k, "nominalQuota": v} for k, v in sorted(quotas.items())],
                            }
                        ],
                    }
                ],
            },
        }
    )
    cluster.apply(
        {
            "apiVersion": kueue,
            "kind": "LocalQueue",
            "metadata": {"name": QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": f"cq-{namespace}"},
        }
    )
    log = tmp_path / f"{recording}.cri.log"  # the recorded lines, framed as the container runtime writes them
    lines = (GPU / f"{recording}.log").read_text().splitlines()
    log.write_text("".join(f"2026-11-26T10:00:00.{i:09d}Z stdout F {line}\n" for i, line in enumerate(lines)))
    cluster.serve_logs(namespace, log)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = helm_env(tmp_path)
    for name in ("HELM_NAMESPACE", "HELM_KUBECONTEXT", "HELM_DRIVER", "HELM_DEBUG", "HELM_NEMO_DEBUG"):
        env.pop(name, None)
    env.update(
        KUBECONFIG=str(cluster.kubeconfig_path),
        HOME=str(home),
        HELM_BIN=str(HELMS[helm_name]),
        GCS_BUCKET="test-bucket",
        KUEUE_NAME=QUEUE,
    )
    return namespace, env


def preflight(env: dict, namespace: str, values: list[Path], *extra: str) -> tuple[int, dict, str, float]:
    """(exit code, the JSON document, stderr, wall seconds) of `helm nemo preflight -o json`."""
    files = [a for v in values for a in ("--values", str(v))]
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "helm_nemo", "preflight", *files, "-n", namespace, "-o", "json", *extra],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    took = time.monotonic() - start
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.returncode, json.loads(proc.stdout), proc.stderr, took


def failed_checks(document: dict) -> str:
    """The failed checks' messages: what an assertion on `failed` shows when it fails (stderr holds none)."""
    return "; ".join(f"{c['id']}: {c['message']}" for c in document["checks"] if c["id"] in document["failed"])


def node_states(cluster, names: list[str]) -> str:
    """Each node's Ready condition, taints and cordon: what capacity.gpus counts nodes by."""
    out = []
    for name in names:
        node = cluster.get(f"/api/v1/nodes/{name}")
        ready = next((c["status"] for c in node["status"].get("conditions", []) if c["type"] == "Ready"), "?")
        taints = [t["key"] for t in node["spec"].get("taints") or []]
        out.append(f"{name}: Ready={ready} taints={taints} unschedulable={node['spec'].get('unschedulable')}")
    return "; ".join(out)


def fabric(document: dict) -> dict:
    (found,) = [c for c in document["checks"] if c["id"] == "fabric.busbw"]
    return found


def nothing_left(cluster, env: dict, namespace: str) -> None:
    """No release (helm's own list), no Job, pod, Workload or Service of the test in the namespace."""
    every = ["-a"] if env["HELM_BIN"] == str(HELMS["helm3"]) else []  # Helm 4 lists releases in any status by default
    releases = subprocess.run(
        [env["HELM_BIN"], "list", *every, "-q", "-n", namespace], env=env, capture_output=True, text=True, check=True
    )
    assert releases.stdout.split() == [], releases.stdout
    left = [
        f"{plural}/{item['metadata']['name']}"
        for group_version, plural in LEFTOVER_KINDS
        for item in cluster.list_objects(group_version, plural, namespace)
    ]
    assert left == [], left


def p5_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "p5.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "accelerator": "p5",
                "chart": "jobset",
                "release": "gpt-p5",
                "queue": QUEUE,
                "workload": {"gpus": 16, "image": "nvcr.io/nvidia/nemo:25.07"},
            }
        )
    )
    return path


# --------------------------------------------------------------------------------------------------


def test_a_good_fabric_passes_and_nothing_is_left(pools, helm_name, tmp_path):
    namespace, env = setup(pools, tmp_path, helm_name, "g4", 16, "all_reduce_nvlink_info")
    code, document, said, _ = preflight(env, namespace, [G4_RECIPE], "--nccl", "--nccl-nodes", "1")
    check = fabric(document)
    assert code == 0 and document["failed"] == [], said
    assert check["verdict"] == "ok", check
    details = check["details"]
    assert (details["benchmark"], details["largest_size"], details["busbw"]) == ("all_reduce", 2 << 30, 340.11)
    assert (details["measured"], details["floor"], details["transport"], details["wrong"]) == (94.0476, 30, "Socket", 0)
    assert len(details["nodes_used"]) == 1 and details["nodes_used"][0] in pools.nodes["g4"]
    # placed like the recipe's pods: its queue and NCCL settings, the collective G4's floor is for
    assert details["test_values"]["queue"] == QUEUE
    assert details["test_values"]["workload"] == {"gpus": 8, "arguments": ["--benchmark", "all_reduce"]}
    # the progress went to stderr; what it said first depends on how soon Kueue admitted the test (waiting for
    # Kueue, or already admitted and waiting for its topology gate): only the end is the same every time
    assert (
        said.startswith("helm nemo: NCCL test llama3-70b-g4-nccl: 1 x G4") and "rank 0 (llama3-70b-g4-nccl-0-" in said
    )
    nothing_left(pools, env, namespace)


def test_a_socket_fallback_fails(pools, helm_name, tmp_path):
    namespace, env = setup(pools, tmp_path, helm_name, "p5", 16, "all_reduce_socket_info")
    code, document, said, _ = preflight(env, namespace, [p5_recipe(tmp_path)], "--nccl")
    check = fabric(document)
    assert code == 1 and document["failed"] == ["fabric.busbw"], (
        f"{failed_checks(document)}; P5 nodes now: {node_states(pools, pools.nodes['p5'])}"
    )
    assert "NCCL used Socket, not Libfabric; below the floor 270 GB/s" in check["message"]
    assert check["details"]["busbw"] == 2.79 and check["details"]["nodes"] == 2
    used = check["details"]["nodes_used"]
    assert len(used) == 2 and set(used) <= set(pools.nodes["p5"]), used
    nothing_left(pools, env, namespace)


def test_a_figure_below_the_floor_fails(pools, helm_name, tmp_path):
    namespace, env = setup(pools, tmp_path, helm_name, "g4", 16, "all_reduce_socket_info")
    code, document, said, _ = preflight(env, namespace, [G4_RECIPE], "--nccl", "--nccl-nodes", "1")
    check = fabric(document)
    assert code == 1 and document["failed"] == ["fabric.busbw"], said
    assert check["message"].endswith("average busbw 1.4 GB/s over Socket: below the floor 30 GB/s"), check
    nothing_left(pools, env, namespace)


def test_kueue_holding_the_test_on_quota_or_topology_ends_it_with_kueues_words(pools, helm_name, tmp_path):
    g4_nodes = len(pools.nodes["g4"])
    namespace, env = setup(pools, tmp_path, helm_name, "g4", 16, "all_reduce_nvlink_info")
    code, document, _, took = preflight(
        env, namespace, [G4_RECIPE], "--nccl", "--nccl-nodes", "3", "--nccl-timeout", "6s"
    )
    check = fabric(document)
    assert code == 1 and document["failed"] == ["fabric.busbw"]
    assert "did not start" in check["message"] and "Kueue: pending on quota" in check["message"], check
    assert "(24) > maximum capacity (16)" in check["message"] and took < 60
    nothing_left(pools, env, namespace)

    namespace, env = setup(pools, tmp_path, helm_name, "g4", 1024, "all_reduce_nvlink_info")
    nodes = str(g4_nodes + 1)  # one pod per node (8 GPUs each): Kueue's topology placement finds no room
    code, document, _, _ = preflight(
        env, namespace, [G4_RECIPE], "--nccl", "--nccl-nodes", nodes, "--nccl-timeout", "6s"
    )
    check = fabric(document)
    assert code == 1 and "Kueue: pending on topology" in check["message"], check
    nothing_left(pools, env, namespace)


def busy(cluster, names: list[str], namespace: str) -> None:
    """Pods bound to these nodes holding all their GPUs (kwok runs them), as other teams' jobs would."""
    cluster.api(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    cluster.wait_for(
        "default service account",
        lambda: cluster._exists(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
        30,
    )
    for index, node in enumerate(names):
        cluster.api(
            "POST",
            f"/api/v1/namespaces/{namespace}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"busy-{index}"},
                "spec": {
                    "nodeName": node,
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                    "containers": [{"name": "c", "image": "busy", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
                },
            },
        )


def free(cluster, namespace: str) -> None:
    for pod in cluster.list_objects("v1", "pods", namespace):
        cluster.api("DELETE", f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}?gracePeriodSeconds=0")
    cluster.wait_for("the busy pods gone", lambda: not cluster.list_objects("v1", "pods", namespace), 60)


def test_pods_the_scheduler_cannot_place_end_the_test_and_ctrl_c_removes_it(pools, helm_name, tmp_path):
    """Every G4 node busy (preflight warns: they hold the job once idle), no queue: the scheduler finds no node
    for the test's pod; the check ends with its words. Then the same wait, stopped by SIGINT."""
    namespace, env = setup(pools, tmp_path, helm_name, "g4", 16, "all_reduce_nvlink_info")
    no_queue = tmp_path / "no-queue.yaml"
    no_queue.write_text("queue: null\n")
    other = f"{namespace}-busy"
    busy(pools, pools.nodes["g4"], other)
    try:
        code, document, _, _ = preflight(
            env, namespace, [G4_RECIPE, no_queue], "--nccl", "--nccl-nodes", "1", "--nccl-timeout", "6s"
        )
        check = fabric(document)
        assert code == 1 and document["failed"] == ["fabric.busbw"], document["checks"]
        assert "did not start" in check["message"] and "1 pod(s) not scheduled: 0/" in check["message"], check
        assert "Insufficient nvidia.com/gpu" in check["message"]
        nothing_left(pools, env, namespace)

        proc = subprocess.Popen(
            [sys.executable, "-m", "helm_nemo", "preflight", "-f", str(G4_RECIPE), "-f", str(no_queue)]
            + ["-n", namespace, "--nccl", "--nccl-nodes", "1", "--nccl-timeout", "5m"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        said = []
        for line in proc.stderr:  # wait until the test release is installed and waiting
            said.append(line)
            if "not scheduled" in line:
                break
        proc.send_signal(signal.SIGINT)
        rest, errors = proc.communicate(timeout=120)
        assert proc.returncode == 130, "".join(said) + errors
        nothing_left(pools, env, namespace)
    finally:
        free(pools, other)
