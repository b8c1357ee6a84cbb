"""Named cluster states for preflight tests and the bench, written into a KubeEmulator as a real cluster
holds them (the shapes of Node, Pod, Kueue, GKE multi-networking, DRA and CSIDriver objects as their API
servers return them). Each builder takes the emulator and returns it.

- healthy_a3ultra: a GKE cluster with a 64-node A3 Ultra pool (8 x H200 each), Kueue with TAS (ClusterQueue
  `a3-ultra-cq` with 512 GPUs of quota, LocalQueue `a3-ultra` in ml-team), the RDMA Networks and their
  GKENetworkParamSets, the GCS FUSE CSI driver;
- variations: quota_too_small, crd_missing (no JobSet API), wrong_queue, half_busy, rdma_networks_missing;
- healthy_p5 / eks_without_efa_plugin: an EKS P5 node group (with / without the EFA device plugin);
- a4x_max (a GB300 pool with the mrdma DeviceClass), run on an emulator of Kubernetes 1.33 or 1.34.
"""

from __future__ import annotations

NAMESPACE = "ml-team"
QUEUE = "a3-ultra"
A3ULTRA_NETWORKS = ["gvnic-1"] + [f"rdma-{i}" for i in range(8)]
TOPOLOGY_LEVELS = [
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "kubernetes.io/hostname",
]


def node(name: str, labels: dict, allocatable: dict, taints: list | None = None, ready: bool = True) -> dict:
    capacity = dict(allocatable)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels}},
        "spec": {"taints": taints or []},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}],
            "nodeInfo": {
                "kubeletVersion": "v1.32.3-gke.1000",
                "architecture": labels.get("kubernetes.io/arch", "amd64"),
            },
        },
    }


def pod(name: str, namespace: str, node_name: str, requests: dict, phase: str = "Running") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": node_name,
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"limits": requests, "requests": requests}}
            ],
        },
        "status": {"phase": phase},
    }


def namespaces(kube, *names: str):
    for name in ("default", "kube-system", *names):
        if kube.get("Namespace", name) is None:
            kube.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return kube


def kueue(
    kube,
    *,
    queue: str = QUEUE,
    cluster_queue: str = "a3-ultra-cq",
    flavor: str = "a3-ultra",
    quota: int = 512,
    used: int = 0,
    topology: bool = True,
    namespace: str = NAMESPACE,
    resource: str = "nvidia.com/gpu",
    node_labels: dict | None = None,
    also: dict[str, str] | None = None,
):
    """Kueue's Topology (TAS), a ResourceFlavor, a ClusterQueue whose one resource group covers `resource`
    with `quota` (and each of `also`: resource -> its nominal quota), and the LocalQueue `queue`."""
    covered = {resource: quota, **(also or {})}
    if topology:
        kube.put(
            {
                "apiVersion": "kueue.x-k8s.io/v1alpha1",
                "kind": "Topology",
                "metadata": {"name": "gke-default"},
                "spec": {"levels": [{"nodeLabel": level} for level in TOPOLOGY_LEVELS]},
            }
        )
    kube.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {
                "nodeLabels": node_labels or {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"},
                **({"topologyName": "gke-default"} if topology else {}),
            },
        }
    )
    kube.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": list(covered),
                        "flavors": [
                            {"name": flavor, "resources": [{"name": r, "nominalQuota": q} for r, q in covered.items()]}
                        ],
                    }
                ],
            },
            "status": {
                "conditions": [{"type": "Active", "status": "True", "reason": "Ready"}],
                "flavorsUsage": [
                    {"name": flavor, "resources": [{"name": resource, "total": str(used), "borrowed": "0"}]}
                ],
                "admittedWorkloads": 1 if used else 0,
            },
        }
    )
    kube.put(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": queue, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )
    return kube


def gke_networks(kube, names=A3ULTRA_NETWORKS):
    kube.put(
        {
            "apiVersion": "networking.gke.io/v1",
            "kind": "Network",
            "metadata": {"name": "default"},
            "spec": {"type": "L3"},
        }
    )
    for name in names:
        device = name.startswith("rdma")
        kube.put(
            {
                "apiVersion": "networking.gke.io/v1",
                "kind": "GKENetworkParamSet",
                "metadata": {"name": name},
                "spec": {
                    "vpc": "a3u-net",
                    "vpcSubnet": f"a3u-sub-{name}",
                    **({"deviceMode": "RDMA"} if device else {}),
                },
            }
        )
        kube.put(
            {
                "apiVersion": "networking.gke.io/v1",
                "kind": "Network",
                "metadata": {"name": name},
                "spec": {
                    "type": "Device" if device else "L3",
                    "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
                },
            }
        )
    return kube


def csi(kube, *drivers: str):
    for driver in drivers:
        kube.put(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": driver},
                "spec": {"attachRequired": False, "podInfoOnMount": True},
            }
        )
    return kube


def a3ultra_nodes(kube, count: int = 64, prefix: str = "gke-a3u-pool"):
    for index in range(count):
        block, sub = index // 32, index // 8
        kube.put(
            node(
                f"{prefix}-{index:04d}",
                {
                    "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
                    "cloud.google.com/gke-nodepool": "a3u-pool",
                    "node.kubernetes.io/instance-type": "a3-ultragpu-8g",
                    "kubernetes.io/arch": "amd64",
                    "cloud.google.com/gce-topology-block": f"b{block}",
                    "cloud.google.com/gce-topology-subblock": f"s{sub}",
                },
                {"cpu": "220", "memory": "2800Gi", "nvidia.com/gpu": "8", "ephemeral-storage": "10Ti", "pods": "110"},
                taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            )
        )
    return kube


def healthy_a3ultra(kube, *, nodes: int = 64, quota: int = 512):
    namespaces(kube, NAMESPACE)
    a3ultra_nodes(kube, nodes)
    kueue(kube, quota=quota)
    gke_networks(kube)
    csi(kube, "gcsfuse.csi.storage.gke.io", "pd.csi.storage.gke.io")
    return kube


def quota_too_small(kube):
    return healthy_a3ultra(kube, quota=64)


def crd_missing(kube):
    """Use with KubeEmulator(resources=without("JobSet")): JobSet is not installed."""
    return healthy_a3ultra(kube)


def wrong_queue(kube):
    """The LocalQueue is called `a3ultra` (the values say `a3-ultra`)."""
    namespaces(kube, NAMESPACE)
    a3ultra_nodes(kube, 64)
    kueue(kube, queue="a3ultra")
    gke_networks(kube)
    return csi(kube, "gcsfuse.csi.storage.gke.io")


def half_busy(kube, *, nodes: int = 64):
    """Another team's job holds all 8 GPUs of half the nodes (admitted by the same ClusterQueue)."""
    healthy_a3ultra(kube, nodes=nodes, quota=1024)
    for index in range(nodes // 2):
        kube.put(pod(f"other-{index:04d}", "other-team", f"gke-a3u-pool-{index:04d}", {"nvidia.com/gpu": "8"}))
    return kube


def rdma_networks_missing(kube):
    """Multi-networking is on, but only the gVNIC Network was created: no rdma-* Network objects."""
    namespaces(kube, NAMESPACE)
    a3ultra_nodes(kube, 64)
    kueue(kube)
    gke_networks(kube, ["gvnic-1"])
    return csi(kube, "gcsfuse.csi.storage.gke.io")


def p5_nodes(kube, count: int = 4, efa: bool = True):
    for index in range(count):
        allocatable = {"cpu": "190", "memory": "2000Gi", "nvidia.com/gpu": "8", "hugepages-2Mi": "10Gi", "pods": "100"}
        if efa:
            allocatable["vpc.amazonaws.com/efa"] = "32"
        kube.put(
            node(
                f"ip-10-0-{index}-1.ec2.internal",
                {
                    "node.kubernetes.io/instance-type": "p5.48xlarge",
                    "eks.amazonaws.com/nodegroup": "p5-ng",
                    "kubernetes.io/arch": "amd64",
                },
                allocatable,
                taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
            )
        )
    return kube


def healthy_p5(kube, *, efa: bool = True, namespace: str = NAMESPACE):
    namespaces(kube, namespace)
    p5_nodes(kube, 4, efa=efa)
    csi(kube, "fsx.csi.aws.com", "ebs.csi.aws.com")
    return kube


def eks_without_efa_plugin(kube):
    """The P5 nodes are there, but no EFA device plugin runs: no vpc.amazonaws.com/efa allocatable."""
    return healthy_p5(kube, efa=False)


def a4x_max(kube, *, nodes: int = 64, queue: str = "a4x-max", device_class: bool = True):
    """An A4X Max pool (GB300, arm64, 4 blocks of 16 nodes) with the RDMA DeviceClass, Kueue TAS by block;
    run it on KubeEmulator(kube_version="v1.34.1") (or v1.33 without resource.k8s.io/v1: too old)."""
    namespaces(kube, NAMESPACE)
    for index in range(nodes):
        kube.put(
            node(
                f"gke-a4xmax-{index:03d}",
                {
                    "kubernetes.io/arch": "arm64",
                    "cloud.google.com/gke-nodepool": "a4xmax",
                    "cloud.google.com/gke-accelerator": "nvidia-gb300",
                    "cloud.google.com/gce-topology-block": f"b{index // 16}",
                    "cloud.google.com/gce-topology-subblock": f"s{index // 16}",
                },
                {"cpu": "140", "memory": "880Gi", "nvidia.com/gpu": "4", "pods": "110"},
                taints=[
                    {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                    {"key": "kubernetes.io/arch", "value": "arm64", "effect": "NoSchedule"},
                ],
            )
        )
    if device_class:
        served = next(r.group_version for r in kube.resources if r.kind == "DeviceClass")  # v1 from 1.34, else beta
        kube.put(
            {
                "apiVersion": served,
                "kind": "DeviceClass",
                "metadata": {"name": "mrdma.google.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'mrdma.google.com'"}}]},
            }
        )
    kueue(
        kube,
        queue=queue,
        cluster_queue="a4x-max-cq",
        flavor="a4x-max",
        quota=256,
        node_labels={"kubernetes.io/arch": "arm64"},
    )
    return csi(kube, "gcsfuse.csi.storage.gke.io")
