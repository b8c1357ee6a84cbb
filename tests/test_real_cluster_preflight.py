"""`helm nemo preflight` on the real control plane (tests/real_cluster.py, marker `cluster`): the named cluster
states of tests/test_preflight.py that a real server can hold, built by the same builders
(tests/cluster_states.py, written through tests/real_states.py). Each test asserts the verdict and the check
id, as the emulator tests do, and each fails if its check were broken (the healthy state passes the same
check in test_healthy_a3ultra_pool_passes_every_check).

Held here: the healthy 64-node A3 Ultra pool (kwok nodes, Kueue 0.19's real ClusterQueue/LocalQueue/
Topology, the GKE Network objects, CSIDrivers); quota too small; wrong queue; half the nodes busy (pods bound
with nodeName, run by kwok); too few schedulable nodes (cordoned by the real `spec.unschedulable`); a CRD
missing (the A4X Max example's ComputeDomain, resource.nvidia.com: no module of tests/cluster ships NVIDIA's
DRA driver) with no matching node and the DRA DeviceClass missing then present (resource.k8s.io/v1 of
Kubernetes 1.36); missing RDMA Network objects and a Network without its GKENetworkParamSet; EKS P5 nodes
without, then with, the EFA device resource; missing PVC/Secret/ConfigMap/ServiceAccount/PriorityClass refs,
then present, and a claim the real PV controller leaves Pending; the namespace missing and
--create-namespace; a foreign PersistentVolume in the way; the CSI driver missing; RBAC denied (a
ServiceAccount token that may read but not create: the real authorizer's SelfSubjectAccessReview answers);
a forbidden read (a token that may not list nodes: the real 403).

Not held here, and why (the emulator tests cover them):
- the JobSet CRD (or Kueue) not installed, or JobSet served only in another version: the control plane is
  one per session and its JobSet and Kueue managers and the other tests need them; deleting a CRD deletes
  every object of it and breaks their watches. The same check (api.served) fails here for ComputeDomain;
- A4X Max on Kubernetes 1.33: the server's version is the one tests/cluster/go.mod builds (v1.36.3);
- an unreachable cluster, a 5xx: not a server state.

GPU nodes the other cluster tests made (tests/test_real_cluster.py, same session) are cordoned while this
module runs, so the counts are this module's nodes; they are uncordoned at its end.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import cluster_states as states
from conftest import HELMS, helm_env
from real_states import RealKube
from test_preflight import (
    HEALTHY_A3ULTRA_PASSES,
    MISSING_REFS,
    RECIPE,
    VARS,
    examples,
    result,
    referencing_jobset,
    verdicts,
)

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "values/examples"
POOL = 64
MARK = {"helm-nemo-test": "preflight"}
MERGE = "application/merge-patch+json"
_numbers = itertools.count()


@pytest.fixture(scope="module")
def pool(real_cluster):
    """64 A3 Ultra kwok nodes (cluster_states' shape), the GKE networks, the CSI drivers, Kueue's Topology
    and ResourceFlavor; the other tests' GPU nodes cordoned meanwhile."""
    cluster = real_cluster
    cordoned = []
    for node in cluster.list_objects("v1", "nodes"):
        allocatable = node.get("status", {}).get("allocatable") or {}
        if "nvidia.com/gpu" in allocatable and not node["spec"].get("unschedulable"):
            cordon(cluster, node["metadata"]["name"], True)
            cordoned.append(node["metadata"]["name"])
    kube = RealKube(cluster, labels=MARK)
    states.a3ultra_nodes(kube, POOL)
    states.gke_networks(kube)
    states.csi(kube, "gcsfuse.csi.storage.gke.io", "pd.csi.storage.gke.io", "fsx.csi.aws.com", "ebs.csi.aws.com")
    shared = _Collect()  # Kueue's Topology and ResourceFlavor: shared by the tests' ClusterQueues
    states.kueue(shared)
    for obj in shared.objects:
        if obj["kind"] in ("Topology", "ResourceFlavor"):
            kube.put(obj)
    kube.flush()
    cluster.wait_for(f"{POOL} A3 Ultra nodes Ready", lambda: ready_nodes(cluster, "gke-a3u-pool-") == POOL, 90, 1)
    try:
        yield cluster
    finally:
        kube.delete_created()
        for name in cordoned:
            cordon(cluster, name, False)


def cordon(cluster, name: str, on: bool) -> None:
    cluster.api(
        "PATCH",
        f"/api/v1/nodes/{name}",
        {"spec": {"unschedulable": on or None}},
        content_type="application/merge-patch+json",
    )


def ready_nodes(cluster, prefix: str) -> int:
    """Nodes named `prefix`... that are Ready and no longer carry the node lifecycle controller's
    `node.kubernetes.io/not-ready` taint (a new node has it for a few seconds after it is Ready: until then
    the scheduler, and preflight, rightly do not count it)."""
    return sum(
        1
        for n in cluster.list_objects("v1", "nodes")
        if n["metadata"]["name"].startswith(prefix)
        and any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
        and not any(t["key"].startswith("node.kubernetes.io/") for t in n["spec"].get("taints") or [])
    )


@pytest.fixture
def state(pool, tmp_path):
    """make(quota=512, queue="a3-ultra", kueue=True) -> (RealKube, namespace, env): a namespace of its own with
    its ClusterQueue and LocalQueue; what the test puts through the RealKube is deleted at its end."""
    made = []

    def make(*, quota: int = 512, queue: str = states.QUEUE, kueue: bool = True, **kueue_args):
        namespace = f"pf-{next(_numbers)}"
        kube = RealKube(pool, labels=MARK)
        made.append(kube)
        states.namespaces(_Putter(kube), namespace)
        if kueue:
            states.kueue(
                kube, queue=queue, cluster_queue=f"cq-{namespace}", quota=quota, namespace=namespace, **kueue_args
            )
        kube.flush()
        return kube, namespace, preflight_env(pool, tmp_path)

    yield make
    for kube in reversed(made):
        kube.delete_created()


class _Putter:
    """states.namespaces() asks get() first; on the real cluster `default` and `kube-system` exist."""

    def __init__(self, kube: RealKube):
        self.kube = kube

    def get(self, kind: str, name: str):
        return {} if name in ("default", "kube-system") else None

    def put(self, obj: dict) -> dict:
        return self.kube.put(obj)


class _Collect:
    def __init__(self):
        self.objects: list[dict] = []

    def put(self, obj: dict) -> dict:
        self.objects.append(obj)
        return obj


def preflight_env(cluster, tmp_path: Path, kubeconfig: Path | None = None) -> dict[str, str]:
    env = helm_env(tmp_path)
    for name in ("HELM_NAMESPACE", "HELM_KUBECONTEXT", "HELM_DRIVER", "HELM_DEBUG", "HELM_NEMO_DEBUG"):
        env.pop(name, None)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env.update(VARS, KUBECONFIG=str(kubeconfig or cluster.kubeconfig_path), HOME=str(home))
    env["HELM_BIN"] = str(HELMS["helm4"])
    return env


def check(env: dict, namespace: str, values: Path = RECIPE, *extra: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "helm_nemo", "preflight", "--values", str(values), "-n", namespace, "-o", "json"]
        + ["--show-secrets", *extra],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode in (0, 1), f"exit {proc.returncode}\n{proc.stderr}"
    document = json.loads(proc.stdout)
    assert document["exit_code"] == proc.returncode
    return proc.returncode, document


def failing(document) -> list:
    return [c for c in document["checks"] if c["verdict"] == "fail"]


# --------------------------------------------------------------------------------------------------


def test_healthy_a3ultra_pool_passes_every_check(state):
    _, namespace, env = state()
    code, document = check(env, namespace)
    assert code == 0 and document["failed"] == [], failing(document)
    found = verdicts(document)
    for check_id in HEALTHY_A3ULTRA_PASSES:
        assert found[check_id] == {"ok"}, (check_id, [c for c in document["checks"] if c["id"] == check_id])
    # Kueue's own ClusterQueue (v1beta2, quota as the server returns it; usage as Kueue writes it)
    assert result(document, "queue.quota")["details"] == {
        "resource": "nvidia.com/gpu",
        "quota": "512",
        "needed": "432",
        "used": "0",
    }
    gpus = result(document, "capacity.gpus")["details"]
    assert (gpus["pods"], gpus["fit_idle"], gpus["fit_now"], gpus["nodes"]) == (54, POOL, POOL, POOL)


def test_quota_too_small(state):
    _, namespace, env = state(quota=64)
    code, document = check(env, namespace)
    assert code == 1 and document["failed"] == ["queue.quota"], failing(document)
    quota = result(document, "queue.quota")
    assert "has 64 nvidia.com/gpu of quota" in quota["message"] and "needs 432" in quota["message"]


def test_wrong_queue(state):
    _, namespace, env = state(queue="a3ultra")
    code, document = check(env, namespace)
    assert code == 1 and document["failed"] == ["queue.localqueue"], failing(document)
    local = result(document, "queue.localqueue")
    assert local["message"] == f"LocalQueue {namespace}/a3-ultra does not exist"
    assert f"LocalQueues in {namespace}: a3ultra" in local["hint"]


def test_half_the_nodes_busy_is_a_warning(state, pool):
    kube, namespace, env = state(quota=1024)
    other = f"{namespace}-other"
    states.namespaces(_Putter(kube), other)
    for index in range(POOL // 2):  # bound by nodeName as the scheduler would; kwok runs them
        kube.put(states.pod(f"other-{index:04d}", other, f"gke-a3u-pool-{index:04d}", {"nvidia.com/gpu": "8"}))
    kube.flush()
    try:
        code, document = check(env, namespace)
    finally:  # at once, not after kwok's graceful deletion: a terminating pod still holds its GPUs
        for index in range(POOL // 2):
            pool.api("DELETE", f"/api/v1/namespaces/{other}/pods/other-{index:04d}?gracePeriodSeconds=0")
        pool.wait_for("the busy pods gone", lambda: not pool.list_objects("v1", "pods", other), 60)
    assert code == 0 and document["failed"] == [], failing(document)
    gpus = result(document, "capacity.gpus")
    assert gpus["verdict"] == "warn" and (gpus["details"]["fit_idle"], gpus["details"]["fit_now"]) == (POOL, 32)


def test_finished_and_unbound_pods_hold_no_gpus(state, pool):
    """The pod list's fieldSelector (facts.POD_SELECTOR) on the real server: a pod that Succeeded and one
    that Failed on a node (their status written as a kubelet would, once kwok runs them) and a Pending pod
    the scheduler finds no node for hold no GPUs; a Running one holds its 8."""
    kube, namespace, env = state(quota=1024)
    other = f"{namespace}-other"
    states.namespaces(_Putter(kube), other)
    gpus = {"nvidia.com/gpu": "8"}
    bound = {"running": 0, "succeeded": 1, "failed": 2}
    for name, index in bound.items():
        kube.put(states.pod(name, other, f"gke-a3u-pool-{index:04d}", gpus))
    waiting = states.pod("waiting", other, "", gpus)
    del waiting["spec"]["nodeName"], waiting["status"]
    waiting["spec"]["nodeSelector"] = {"helm-nemo-test/no-such-pool": "true"}
    kube.put(waiting)
    kube.flush()
    base = f"/api/v1/namespaces/{other}/pods"
    try:
        pool.wait_for(
            "kwok runs the bound pods",
            lambda: all(pool.get(f"{base}/{name}")["status"].get("phase") == "Running" for name in bound),
            60,
        )
        for name, phase in (("succeeded", "Succeeded"), ("failed", "Failed")):
            pool.api("PATCH", f"{base}/{name}/status", {"status": {"phase": phase}}, content_type=MERGE)
        phases = {p["metadata"]["name"]: p["status"].get("phase") for p in pool.list_objects("v1", "pods", other)}
        assert phases == {"running": "Running", "succeeded": "Succeeded", "failed": "Failed", "waiting": "Pending"}
        code, document = check(env, namespace)
    finally:
        for name in [*bound, "waiting"]:
            pool.api("DELETE", f"{base}/{name}?gracePeriodSeconds=0")
        pool.wait_for("the pods gone", lambda: not pool.list_objects("v1", "pods", other), 60)
    assert code == 0 and document["failed"] == [], failing(document)
    gpus_result = result(document, "capacity.gpus")
    assert (gpus_result["details"]["fit_idle"], gpus_result["details"]["fit_now"]) == (POOL, POOL - 1)


def test_too_few_schedulable_nodes_fails_capacity(state, pool):
    _, namespace, env = state()
    cordoned = [f"gke-a3u-pool-{i:04d}" for i in range(40, POOL)]
    try:
        for name in cordoned:
            cordon(pool, name, True)
        code, document = check(env, namespace)
    finally:
        for name in cordoned:
            cordon(pool, name, False)
        # The node lifecycle controller takes its node.kubernetes.io/unschedulable taint off a moment later.
        pool.wait_for("the pool schedulable again", lambda: ready_nodes(pool, "gke-a3u-pool-") == POOL, 60)
    assert code == 1 and document["failed"] == ["capacity.gpus"], failing(document)
    assert "hold 40 such pods" in result(document, "capacity.gpus")["message"]
    assert result(document, "capacity.nodes")["message"].startswith("JobSet llama31-405b: 40 of ")


def test_a4x_max_without_its_crd_nodes_and_device_class(state, pool, tmp_path):
    """A cluster without NVIDIA's DRA driver (ComputeDomain not served), without GB300 nodes, and without
    then with the mrdma DeviceClass (resource.k8s.io/v1, served by Kubernetes 1.36)."""
    kube, namespace, env = state(queue="a4x-max", topology=False)
    env = {**env, "KUEUE_NAME": "a4x-max"}
    values = EXAMPLES / "a4x-max-llama31-405b.yaml"
    code, document = check(env, namespace, values)
    assert code == 1
    assert {"api.served", "capacity.nodes", "profile.deviceclasses"} <= set(document["failed"]), failing(document)
    served = result(document, "api.served")
    assert "ComputeDomain (resource.nvidia.com/v1beta1)" in served["message"], served
    assert "resource.k8s.io" not in served["message"]  # DRA itself is served (1.36)
    assert result(document, "api.version")["verdict"] == "ok"  # minKubernetesVersion 1.34
    nodes = result(document, "capacity.nodes")
    assert nodes["message"].startswith("JobSet ") and "none of the" in nodes["message"], nodes
    assert "DRA networking driver" in result(document, "profile.deviceclasses")["hint"]

    kube.put(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "mrdma.google.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'mrdma.google.com'"}}]},
        }
    )
    kube.flush()
    _, document = check(env, namespace, values)
    assert "profile.deviceclasses" not in document["failed"]
    assert result(document, "profile.deviceclasses")["message"] == "DeviceClass mrdma.google.com exists"


def test_missing_rdma_networks_and_param_sets(state, pool, tmp_path):
    _, namespace, env = state()
    values = examples(tmp_path) / "a3ultra-pod-network.yaml"
    values.write_text(RECIPE.read_text().replace("hostNetwork: true", "hostNetwork: false"))
    code, document = check(env, namespace, values)
    assert code == 0 and result(document, "profile.networks")["verdict"] == "ok"  # the pool's networks: all there
    saved = []
    try:
        for name in ("rdma-0", "rdma-1"):
            saved.append(pool.get(f"/apis/networking.gke.io/v1/networks/{name}"))
            pool.api("DELETE", f"/apis/networking.gke.io/v1/networks/{name}")
        saved.append(pool.get("/apis/networking.gke.io/v1/gkenetworkparamsets/rdma-3"))
        pool.api("DELETE", "/apis/networking.gke.io/v1/gkenetworkparamsets/rdma-3")
        code, document = check(env, namespace, values)
    finally:
        for obj in saved:
            for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
                obj["metadata"].pop(key, None)
            pool.create_many([obj], exist_ok=True)
    assert code == 1 and document["failed"] == ["profile.networks"], failing(document)
    networks = result(document, "profile.networks")
    assert "Network objects missing: rdma-0, rdma-1" in networks["message"], networks
    assert "GKENetworkParamSet missing for rdma-3 -> rdma-3" in networks["message"], networks


P5_VALUES = EXAMPLES / "p5-gpt3-5b-slurm.yaml"  # on EKS it installs the nemo-training chart


def test_eks_p5_without_then_with_the_efa_device_plugin(state, pool):
    kube, namespace, env = state(kueue=False)
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "fsx-pvc", "namespace": namespace},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1200Gi"}}},
        }
    )
    kube.flush()
    nodes = RealKube(pool, labels=MARK)
    try:
        states.p5_nodes(nodes, 4, efa=False)
        nodes.flush()
        pool.wait_for("4 P5 nodes Ready", lambda: ready_nodes(pool, "ip-10-0-") == 4, 60, 1)
        code, document = check(env, namespace, P5_VALUES)
        assert code == 1 and document["failed"] == ["node.resources"], failing(document)
        resources = result(document, "node.resources")
        assert "vpc.amazonaws.com/efa" in resources["message"] and "aws-efa-k8s-device-plugin" in resources["hint"]
        # The device plugin advertises the EFA devices: the nodes' allocatable, as a kubelet reports it.
        for index in range(4):
            name = f"ip-10-0-{index}-1.ec2.internal"
            node = pool.get(f"/api/v1/nodes/{name}")
            for field in ("capacity", "allocatable"):
                node["status"][field]["vpc.amazonaws.com/efa"] = "32"
            pool.api("PUT", f"/api/v1/nodes/{name}/status", node)
        code, document = check(env, namespace, P5_VALUES)
        assert code == 0, failing(document)
        assert result(document, "node.resources")["verdict"] == "ok"
        assert result(document, "refs.pvc")["verdict"] == "warn"  # the claim: Pending (no PV, no StorageClass)
    finally:
        nodes.delete_created()


def test_referenced_objects(state, pool, tmp_path):
    kube, namespace, env = state()
    path = referencing_jobset(tmp_path)
    code, document = check(env, namespace, path)
    assert code == 1
    assert set(document["failed"]) == MISSING_REFS, failing(document)
    assert result(document, "refs.configmaps")["message"] == f"ConfigMap missing: {namespace}/nccl-tuning (JobSet solo)"
    assert f"{namespace}/llama31-405b-checkpoints-pvc" in result(document, "refs.pvc")["message"]
    assert f"{namespace}/hf-token" in result(document, "refs.secrets")["message"]

    for obj in (
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"}, "data": {"token": "eA=="}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "train-ksa"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nccl-tuning"}, "data": {"profile": "a3u"}},
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "llama31-405b-checkpoints-pvc"},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Ti"}}},
        },
    ):
        obj["metadata"]["namespace"] = namespace
        kube.put(obj)
    kube.put(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "training-high"},
            "value": 1000,
        }
    )
    kube.flush()
    code, document = check(env, namespace, path)
    assert code == 0, failing(document)
    for check_id in ("refs.secrets", "refs.configmaps", "refs.serviceaccounts", "refs.priorityclass"):
        assert result(document, check_id)["verdict"] == "ok", check_id
    # No PersistentVolume matches and there is no StorageClass: the real PV controller leaves the claim Pending.
    claim = pool.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/llama31-405b-checkpoints-pvc")
    assert claim["status"]["phase"] == "Pending"
    assert result(document, "refs.pvc")["verdict"] == "warn"


def test_namespace_missing_and_create_namespace(pool, tmp_path):
    env = preflight_env(pool, tmp_path)
    namespace = f"pf-missing-{next(_numbers)}"
    _, document = check(env, namespace)
    assert "namespace.exists" in document["failed"]
    assert result(document, "namespace.exists")["hint"].startswith(f"kubectl create namespace {namespace}")
    _, document = check(env, namespace, RECIPE, "--create-namespace")
    assert result(document, "namespace.exists")["verdict"] == "ok"


def test_an_object_of_the_release_owned_by_no_release(state, pool):
    kube, namespace, env = state()
    name = "llama31-405b-storage-llama31-405b-checkpoints-pv"
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Ti"},
                "accessModes": ["ReadWriteMany"],
                "csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeHandle": "someone-elses-bucket"},
            },
        }
    )
    kube.flush()
    code, document = check(env, namespace)
    assert code == 1 and document["failed"] == ["objects.free"], failing(document)
    assert (
        f"PersistentVolume {name} of llama31-405b-storage (owned by no helm release)"
        in (result(document, "objects.free")["message"])
    )


def test_csi_driver_missing(state, pool):
    _, namespace, env = state()
    saved = pool.get("/apis/storage.k8s.io/v1/csidrivers/gcsfuse.csi.storage.gke.io")
    pool.api("DELETE", "/apis/storage.k8s.io/v1/csidrivers/gcsfuse.csi.storage.gke.io")
    try:
        code, document = check(env, namespace)
    finally:
        for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields"):
            saved["metadata"].pop(key, None)
        pool.create_many([saved], exist_ok=True)
    assert code == 1 and document["failed"] == ["storage.csi"], failing(document)
    assert "GcsFuseCsiDriver=ENABLED" in result(document, "storage.csi")["hint"]


# --------------------------------------------------------------------------------------------------
# Credentials of a ServiceAccount: the real authorizer (RBAC) answers the SelfSubjectAccessReviews and reads


def token_kubeconfig(cluster, namespace: str, account: str, rules: list[dict], path: Path) -> Path:
    """A ServiceAccount bound cluster-wide to a ClusterRole of `rules`, and a kubeconfig with its token."""
    role = f"{namespace}-{account}"
    cluster.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account}},
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": role, "labels": MARK},
            "rules": rules,
        }
    )
    cluster.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": MARK},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
        }
    )
    token = cluster.api(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
    )["status"]["token"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "sa",
                "clusters": [
                    {"name": "c", "cluster": {"server": cluster.url, "certificate-authority": str(cluster.pki.ca)}}
                ],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "c", "user": account, "namespace": namespace}}],
            }
        )
    )
    return path


def drop_role(cluster, namespace: str, account: str) -> None:
    role = f"{namespace}-{account}"
    cluster.api("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{role}")
    cluster.api("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{role}")


READ_ALL = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}]


def test_rbac_denied_by_the_real_authorizer(state, pool, tmp_path):
    _, namespace, env = state()
    kubeconfig = token_kubeconfig(pool, namespace, "reader", READ_ALL, tmp_path / "reader.kubeconfig")
    try:
        code, document = check({**env, "KUBECONFIG": str(kubeconfig)}, namespace)
    finally:
        drop_role(pool, namespace, "reader")
    assert code == 1 and document["failed"] == ["access.rbac"], failing(document)
    denied = result(document, "access.rbac")["details"]["denied"]
    assert f"create secrets in {namespace}" in denied  # helm's release record
    assert f"create jobsets.jobset.x-k8s.io in {namespace}" in denied
    assert "create clusterroles.rbac.authorization.k8s.io (cluster-wide)" in denied
    assert result(document, "capacity.gpus")["verdict"] == "ok"  # reads were allowed

    # The same account may create everything in its namespace and the cluster-wide kinds: allowed.
    writer = token_kubeconfig(
        pool,
        namespace,
        "writer",
        [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
        tmp_path / "writer.kubeconfig",
    )
    try:
        code, document = check({**env, "KUBECONFIG": str(writer)}, namespace)
    finally:
        drop_role(pool, namespace, "writer")
    assert code == 0 and result(document, "access.rbac")["verdict"] == "ok", failing(document)


def test_a_forbidden_read_skips_its_check_with_the_servers_reason(state, pool, tmp_path):
    _, namespace, env = state()
    # Everything the checks read but nodes.
    rules = [
        {"apiGroups": [""], "resources": [r for r in CORE if r != "nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [g for g in GROUPS if g], "resources": ["*"], "verbs": ["get", "list", "watch"]},
    ]
    kubeconfig = token_kubeconfig(pool, namespace, "no-nodes", rules, tmp_path / "no-nodes.kubeconfig")
    try:
        code, document = check({**env, "KUBECONFIG": str(kubeconfig)}, namespace)
    finally:
        drop_role(pool, namespace, "no-nodes")
    skipped = result(document, "capacity.nodes")
    assert skipped["verdict"] == "skipped" and "403 Forbidden" in skipped["message"], skipped
    assert "nodes" in skipped["message"], skipped
    assert "capacity.gpus" not in verdicts(document)


CORE = [
    "namespaces",
    "nodes",
    "pods",
    "secrets",
    "configmaps",
    "serviceaccounts",
    "persistentvolumeclaims",
    "persistentvolumes",
    "services",
    "events",
]
GROUPS = [
    "apps",
    "batch",
    "jobset.x-k8s.io",
    "kueue.x-k8s.io",
    "networking.gke.io",
    "storage.k8s.io",
    "scheduling.k8s.io",
    "resource.k8s.io",
    "rbac.authorization.k8s.io",
    "apiextensions.k8s.io",
    "policy",
]
