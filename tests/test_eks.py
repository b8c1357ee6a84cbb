"""EKS: the EFA profiles (p4de, p5, p5en) through the same chart sources, and the fsx-lustre chart."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from helm_nemo.generate.profiles import load_profiles

ROOT = Path(__file__).resolve().parent.parent
EKS = sorted(acc for acc, p in load_profiles().items() if p["cloud"] == "eks")
KINDS = ["jobset", "nemo-training"]
FSX = ROOT / "charts" / "fsx-lustre"
GOOD_FS = [
    "--set",
    "fileSystems[0].name=fsx",
    "--set",
    "fileSystems[0].fileSystemId=fs-0123456789abcdef0",
    "--set",
    "fileSystems[0].dnsName=fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com",
    "--set",
    "fileSystems[0].mountName=abcdefgh",
    "--set",
    "fileSystems[0].capacity=1200Gi",
]


def docs(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d]


def workload_container(doc: dict) -> dict:
    spec = doc["spec"]
    pod = (
        spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        if doc["kind"] == "JobSet"
        else spec["template"]["spec"]
    )
    (container,) = [c for c in pod["containers"] if c["name"] == "workload"]
    return container


def render_workload(helm, acc: str, kind: str, *args: str) -> tuple[str, dict]:
    out = helm.template("run", ROOT / "charts" / acc / kind, "--set", "workload.gpus=16", *args).stdout
    (doc,) = [d for d in docs(out) if d["kind"] in ("JobSet", "Job")]
    return out, doc


def test_three_aws_profiles():
    assert EKS == ["p4de", "p5", "p5en"]
    expected = {"p4de": 4, "p5": 32, "p5en": 16}
    for acc in EKS:
        assert load_profiles()[acc]["fabric"] == {"resource": "vpc.amazonaws.com/efa", "perNode": expected[acc]}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("acc", EKS)
def test_every_aws_profile_requests_its_efa_devices(helm, acc, kind):
    per_node = load_profiles()[acc]["fabric"]["perNode"]
    out, doc = render_workload(helm, acc, kind)
    resources = workload_container(doc)["resources"]
    assert resources["requests"]["vpc.amazonaws.com/efa"] == per_node
    assert resources["limits"]["vpc.amazonaws.com/efa"] == per_node
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == 8
    assert resources["limits"]["hugepages-2Mi"] == "5120Mi"
    env = {e["name"]: e.get("value") for e in workload_container(doc)["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1" and env["FI_EFA_FORK_SAFE"] == "1"
    assert env["JOB_ORCHESTRATOR"] == "eks"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("acc", EKS)
def test_no_gke_only_pieces_on_eks(helm, acc, kind):
    out, doc = render_workload(helm, acc, kind, "--set", "volumes.ssdMountPath=/local")
    assert "gke.io" not in out and "cloud.google.com" not in out and "gcsfuse" not in out
    pod = (
        doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        if doc["kind"] == "JobSet"
        else doc["spec"]["template"]["spec"]
    )
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": load_profiles()[acc]["machineType"]}
    (ssd,) = [v for v in pod["volumes"] if v["name"] == "local-ssd"]
    assert ssd["hostPath"]["path"] == "/mnt/k8s-disks/0"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--set", "volumes.gcsMounts[0].bucketName=bkt-1", "--set", "volumes.gcsMounts[0].mountPath=/b"], "gcsMounts"),
        (["--set", "volumes.gcsVolumes=true"], "gcsVolumes"),
        (["--set", "workload.efa=2"], "efa"),
        (["--set", "workload.gpus=12"], "gpus"),
    ],
)
def test_eks_schema_rejects(helm, args, needle):
    result = helm.template("run", ROOT / "charts" / "p5" / "jobset", *args, check=False)
    assert result.returncode != 0 and needle in result.stderr


def test_target_nodepools_use_the_eks_node_group_label(helm):
    _, doc = render_workload(helm, "p5", "jobset", "--set", "targetNodepools={gpu-ng}")
    pod = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["gpu-ng"]}]}
    ]


# --- fsx-lustre --------------------------------------------------------------------------------------


def test_fsx_renders_a_bound_pv_pvc_pair(helm):
    objects = {
        (d["kind"], d["metadata"]["name"]): d for d in docs(helm.template("st", FSX, "-n", "ml", *GOOD_FS).stdout)
    }
    pv, pvc = objects[("PersistentVolume", "st-fsx-pv")], objects[("PersistentVolumeClaim", "fsx-pvc")]
    assert pv["spec"]["csi"] == {
        "driver": "fsx.csi.aws.com",
        "volumeHandle": "fs-0123456789abcdef0",
        "volumeAttributes": {"dnsname": "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com", "mountname": "abcdefgh"},
    }
    assert pv["spec"]["claimRef"] == {"namespace": "ml", "name": "fsx-pvc"}
    assert pvc["metadata"]["namespace"] == "ml" and pvc["spec"]["volumeName"] == "st-fsx-pv"
    assert pvc["spec"]["resources"]["requests"]["storage"] == pv["spec"]["capacity"]["storage"] == "1200Gi"
    assert ("StorageClass", "fsx-sc") not in objects
    with_sc = docs(helm.template("st", FSX, *GOOD_FS, "--set", "storageClass.create=true").stdout)
    assert [d["provisioner"] for d in with_sc if d["kind"] == "StorageClass"] == ["fsx.csi.aws.com"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("fileSystemId", "fs-xyz"),
        ("fileSystemId", "0123456789abcdef0"),
        ("dnsName", "fsx.example.com"),
        ("mountName", "ABCDEFGH"),
        ("capacity", "lots"),
        ("name", "Bad_Name"),
    ],
)
def test_fsx_schema_rejects_bad_ids(helm, key, value):
    args = list(GOOD_FS)
    args[args.index(next(a for a in args if a.startswith(f"fileSystems[0].{key}=")))] = f"fileSystems[0].{key}={value}"
    result = helm.template("st", FSX, *args, check=False)
    assert result.returncode != 0 and key in result.stderr


def test_fsx_missing_capacity_is_rejected(helm):
    result = helm.template("st", FSX, *GOOD_FS[:-2], check=False)
    assert result.returncode != 0 and "capacity" in result.stderr
