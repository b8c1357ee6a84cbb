"""The generated jobset charts rendered by the real helm binaries: lint, schema, and the anchor fixes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from conftest import JOB_TIMESTAMP

ROOT = Path(__file__).resolve().parent.parent
GKE = ["a3high", "a3mega", "a3ultra", "a4", "a4x"]
GPUS_PER_NODE = {"a3high": 8, "a3mega": 8, "a3ultra": 8, "a4": 8, "a4x": 4}


def chart(acc: str) -> Path:
    return ROOT / "charts" / acc / "jobset"


def docs(text: str) -> list[dict]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text) if d]


def jobset_of(text: str) -> dict:
    (js,) = [d for d in docs(text) if d["kind"] == "JobSet"]
    return js


def pod_spec(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def workload(js: dict) -> dict:
    (c,) = [c for c in pod_spec(js)["containers"] if c["name"] == "workload"]
    return c


def env_of(container: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


BASE = ["--set", "volumes.gcsMounts[0].bucketName=bkt-1", "--set", "volumes.gcsMounts[0].mountPath=/logs"]


@pytest.mark.parametrize("acc", GKE)
def test_namespace_follows_the_release_everywhere(helm, acc):
    out = helm.template("train", chart(acc), "-n", "team-a", *BASE).stdout
    objects = docs(out)
    assert objects and all(o["metadata"]["namespace"] == "team-a" for o in objects)
    assert "default" not in out.replace("default-container", "").replace('"network":"default"', "").replace(
        "default-interface", ""
    )
    env = env_of(workload(jobset_of(out)))
    assert env["MASTER_ADDR"] == "train-workload-0-0.train.team-a.svc.cluster.local"


@pytest.mark.parametrize("acc", GKE)
def test_jobset_named_after_release_and_render_is_deterministic(helm, acc):
    # deterministic once the values set the run's time (tests/test_run_identity.py)
    stamped = [*BASE, "--set", "workload.jobTimestamp=2026-01-01-00-00-00"]
    first = helm.template("train", chart(acc), *stamped).stdout
    second = helm.template("train", chart(acc), *stamped).stdout
    assert first == second
    assert jobset_of(first)["metadata"]["name"] == "train"
    suffixed = jobset_of(helm.template("train", chart(acc), *BASE, "--set", "workload.nameSuffix=r2").stdout)
    assert suffixed["metadata"]["name"] == "train-r2"


@pytest.mark.parametrize("acc", GKE)
def test_job_timestamp_and_uuid(helm, acc):
    """Per-run identity (tests/test_run_identity.py has more): the clock by default, values win."""
    js = jobset_of(helm.template("train", chart(acc), *BASE).stdout)
    env = env_of(workload(js))
    assert re.fullmatch(r"\d{4}(-\d\d){5}", env["JOB_TIMESTAMP"])
    assert env["JOB_IDENTIFIER"] == f"train-{env['JOB_TIMESTAMP']}"
    assert env["JOB_UUID"] == {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-uid']"}}
    js = jobset_of(
        helm.template(
            "train",
            chart(acc),
            *BASE,
            "--set",
            "workload.jobTimestamp=2026-11-22-10-00-00",
            "--set",
            "workload.jobUUID=2f2fb044-7b04-44f9-8bb1-9d0a56f8d6f0",
        ).stdout
    )
    env = env_of(workload(js))
    assert env["JOB_TIMESTAMP"] == "2026-11-22-10-00-00"
    assert env["JOB_IDENTIFIER"] == "train-2026-11-22-10-00-00"
    assert env["JOB_UUID"] == "2f2fb044-7b04-44f9-8bb1-9d0a56f8d6f0"


@pytest.mark.parametrize("acc", ["a3high", "a3mega", "a3ultra", "a4", "a4x"])
@pytest.mark.parametrize("count", [1, 3, 9, 10, 12])
def test_interfaces_annotation_is_valid_json_for_any_length(helm, acc, count):
    nets = ",".join(f"net-{i}" for i in range(count))
    out = helm.template(
        "train", chart(acc), *BASE, "--set", "network.hostNetwork=false", "--set", f"network.subnetworks={{{nets}}}"
    ).stdout
    annotations = jobset_of(out)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]
    parsed = json.loads(annotations["networking.gke.io/interfaces"])
    assert parsed == [{"interfaceName": f"eth{i}", "network": f"net-{i}"} for i in range(count)]


@pytest.mark.parametrize("acc", GKE)
def test_default_interfaces_come_from_the_profile(helm, acc):
    from helm_nemo.generate.profiles import load_profiles

    out = helm.template("train", chart(acc), *BASE, "--set", "network.hostNetwork=false").stdout
    annotations = jobset_of(out)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]
    nets = [i["network"] for i in json.loads(annotations["networking.gke.io/interfaces"])]
    assert nets == load_profiles()[acc]["network"]["interfaces"]


@pytest.mark.parametrize("acc", GKE)
def test_target_and_avoid_nodes_merge_into_one_term(helm, acc):
    out = helm.template(
        "train",
        chart(acc),
        *BASE,
        "--set",
        "targetNodes={n1,n2}",
        "--set",
        "avoidNodes={n3}",
        "--set",
        "targetNodepools={pool-a}",
    ).stdout
    assert out.count("nodeSelectorTerms:") == 1
    terms = pod_spec(jobset_of(out))["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1", "n2"]},
                {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n3"]},
                {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["pool-a"]},
            ]
        }
    ]


@pytest.mark.parametrize("acc", GKE)
def test_gpu_arithmetic_follows_the_profile(helm, acc):
    g = GPUS_PER_NODE[acc]
    js = jobset_of(helm.template("train", chart(acc), *BASE, "--set", f"workload.gpus={g * 6}").stdout)
    job = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["parallelism"] == job["completions"] == 6
    env = env_of(workload(js))
    assert (env["NNODES"], env["GPUS_PER_NODE"], env["WORLD_SIZE"]) == ("6", str(g), str(g * 6))
    assert workload(js)["resources"]["limits"]["nvidia.com/gpu"] == g
    small = jobset_of(helm.template("train", chart(acc), *BASE, "--set", "workload.gpus=2").stdout)
    assert small["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 1
    assert workload(small)["resources"]["limits"]["nvidia.com/gpu"] == 2


def test_secrets_stay_in_secret_key_refs(helm):
    out = helm.template(
        "train",
        chart("a4"),
        *BASE,
        "--set",
        "workload.envs[0].name=HF_TOKEN",
        "--set",
        "workload.envs[0].valueFrom.secretKeyRef.name=hf-token",
        "--set",
        "workload.envs[0].valueFrom.secretKeyRef.key=token",
    ).stdout
    env = env_of(workload(jobset_of(out)))
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "hf-token", "key": "token"}}


def test_compute_domain_only_where_the_profile_asks(helm):
    a4x = docs(helm.template("train", chart("a4x"), *BASE).stdout)
    (cd,) = [d for d in a4x if d["kind"] == "ComputeDomain"]
    assert cd["spec"] == {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "train"}}}
    spec = pod_spec(jobset_of(helm.template("train", chart("a4x"), *BASE).stdout))
    assert spec["resourceClaims"] == [{"name": "compute-domain-channel", "resourceClaimTemplateName": "train"}]
    a4 = docs(helm.template("train", chart("a4"), *BASE).stdout)
    assert not [d for d in a4 if d["kind"] == "ComputeDomain"]


def test_too_long_name_fails_with_a_clear_message(helm):
    name = "r" * 52
    result = helm.template(name, chart("a3ultra"), *BASE, "--set", "workload.gpus=800", check=False)
    assert result.returncode != 0
    assert "exceeds 63 characters" in result.stderr


# --- schema: values that must be rejected by plain helm (values.schema.json), on both binaries ---

REJECT = [
    (["--set", "workload.gpus=12"], "gpus"),
    (["--set", "workload.gpus=0"], "gpus"),
    (["--set", "worklaod.gpus=8"], "worklaod"),
    (["--set", "volumes.sharedMemorySize=lots"], "sharedMemorySize"),
    (["--set", "queue=Not_A_Queue"], "queue"),
    (["--set", "accelerator=a3mega"], "accelerator"),
    (["--set", "network.subnetworks={Bad_Net}"], "subnetworks"),
    (["--set", "volumes.gcsMounts[1].mountPath=/x"], "bucketName"),
    (["--set", "workload.jobTimestamp=yesterday"], "jobTimestamp"),
    (["--set", "volumes.pvcMounts[0].claimName=Bad_Claim", "--set", "volumes.pvcMounts[0].mountPath=/c"], "claimName"),
]


@pytest.mark.parametrize("args, needle", REJECT, ids=[r[1] + str(i) for i, r in enumerate(REJECT)])
def test_schema_rejects(helm, args, needle):
    result = helm.template("train", chart("a3ultra"), *BASE, *args, check=False)
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert needle in result.stderr


def test_legacy_literal_keys_are_accepted_and_ignored(helm, tmp_path):
    values = tmp_path / "legacy.yaml"
    values.write_text(
        "workload:\n  gpus: 16\n  image: img:1\n  defaultArguments[]:\n  arguments[]:\nnetwork:\n  subnetworks[]:\n"
    )
    run_time = ["--set", f"workload.jobTimestamp={JOB_TIMESTAMP}"]  # the two renders may straddle a second
    with_legacy = helm.template("train", chart("a3ultra"), "-f", str(values), *BASE, *run_time).stdout
    values.write_text("workload:\n  gpus: 16\n  image: img:1\n")
    without = helm.template("train", chart("a3ultra"), "-f", str(values), *BASE, *run_time).stdout
    assert with_legacy == without
