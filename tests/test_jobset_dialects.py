"""The gpu-recipes values dialects the jobset charts accept (issue 15, item 2), with the meaning the recipe
chart copies give them, and the A4X Max / G4 profiles (item 1). Rendered with the real Helm 3 and 4."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def chart(acc: str) -> Path:
    return ROOT / "charts" / acc / "jobset"


def objects(text: str) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


def jobset(helm, acc: str, *args: str) -> dict:
    return objects(helm.template("r", chart(acc), *args).stdout)[("JobSet", "r")]


def pod(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def annotations(js: dict) -> dict:
    return js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["annotations"]


def workload(js: dict) -> dict:
    return [c for c in pod(js)["containers"] if c["name"] == "workload"][0]


def env(js: dict) -> dict:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in workload(js)["env"]}


def test_affinity_values_are_merged_with_the_node_terms(helm):
    affinity = (
        "--set-json",
        'affinity={"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":'
        '[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]},{"matchExpressions":[]}]}},'
        '"podAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":1,"podAffinityTerm":'
        '{"topologyKey":"x"}}]}}',
    )
    terms = pod(jobset(helm, "a4x-max", *affinity, "--set", "targetNodes={n1}", "--set", "targetNodepools={p1}"))[
        "affinity"
    ]
    assert terms["podAffinity"] == {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "x"}}]
    }
    expected_tail = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]},
        {"key": "cloud.google.com/gke-nodepool", "operator": "In", "values": ["p1"]},
    ]
    got = terms["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert got == [
        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}] + expected_tail},
        {"matchExpressions": expected_tail},
    ]
    assert "affinity" not in pod(jobset(helm, "a4"))


def test_node_selector_from_both_keys_and_no_contradiction(helm):
    js = jobset(
        helm,
        "a4x",
        "--set",
        "nodeSelector.pool=x",
        "--set",
        "workload.nodeSelector.cloud\\.google\\.com/gke-accelerator=nvidia-gb200",
    )
    assert pod(js)["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-gb200", "pool": "x"}
    bad = helm.template(
        "r",
        chart("a4x"),
        "--set",
        "workload.nodeSelector.cloud\\.google\\.com/gke-accelerator=nvidia-b200",
        check=False,
    )
    assert bad.returncode != 0 and "contradicts the A4X nodes' label" in bad.stderr
    assert "nodeSelector" not in pod(jobset(helm, "a4x-max"))  # no label asserted for A4X Max


def test_run_script_is_mounted_next_to_the_config(helm, tmp_path):
    run = tmp_path / "run.py"
    run.write_text("print('run')\n")
    out = objects(
        helm.template(
            "r",
            chart("a4x"),
            "--set",
            "workload.configFile=cfg.py",
            "--set",
            "workload.runScript=run.py",
            "--set-file",
            f"run_script_config={run}",
        ).stdout
    )
    volume = [v for v in pod(out[("JobSet", "r")])["volumes"] if v["name"] == "workload-configuration"][0]
    assert volume["configMap"]["items"] == [
        {"key": "workload-configuration", "path": "cfg.py"},
        {"key": "run-script-configuration", "path": "run.py"},
    ]
    assert out[("ConfigMap", "r-config")]["data"]["run-script-configuration"] == "print('run')\n"
    no_config = objects(helm.template("r", chart("a4x"), "--set", "workload.configFile=null").stdout)
    assert ("ConfigMap", "r-config") not in no_config
    assert "workload-configuration" not in {v["name"] for v in pod(no_config[("JobSet", "r")])["volumes"]}


def test_storage_dialect_env_and_claims(helm):
    claims = [
        "--set",
        "volumes.pvcMounts[0].claimName=data",
        "--set",
        "volumes.pvcMounts[0].mountPath=/data",
        "--set",
        "volumes.pvcMounts[1].claimName=ckpt",
        "--set",
        "volumes.pvcMounts[1].mountPath=/ckpt",
    ]
    js = jobset(
        helm,
        "a4",
        *claims,
        "--set",
        "workload.step_count=100",
        "--set",
        "workload.enable_dataloading=false",
        "--set",
        "workload.enable_ckpt_write=true",
        "--set",
        "workload.configPath=/workload/configs/",
        "--set",
        "workload.configFile=llama.py",
        "--set",
        "workload.experimentName=exp",
    )
    e = env(js)
    assert (
        e["STEP_COUNT"],
        e["ENABLE_DATALOADING"],
        e["ENABLE_CKPT_WRITE"],
        e["ENABLE_CKPT_LOAD"],
        e["RESTORE_PATH"],
    ) == ("100", "false", "true", "", "")
    assert e["NEMO_LAUNCH_SCRIPT"] == "/workload/configs/llama.py" and e["ARTIFACT_DIR"] == "/job-logs/exp/r"
    claimed = {v["persistentVolumeClaim"]["claimName"] for v in pod(js)["volumes"] if "persistentVolumeClaim" in v}
    assert claimed == {"ckpt"}  # the data claim only with enable_dataloading
    assert "STEP_COUNT" not in env(jobset(helm, "a4", *claims))  # not the dialect: every claim, no such env
    assert len([v for v in pod(jobset(helm, "a4", *claims))["volumes"] if "persistentVolumeClaim" in v]) == 2


def test_gcs_volumes_off_makes_the_buckets_empty_directories(helm):
    bucket = ["--set", "volumes.gcsMounts[0].bucketName=bkt", "--set", "volumes.gcsMounts[0].mountPath=/logs"]
    off = jobset(helm, "a4x-max", *bucket, "--set", "volumes.gcsVolumes=false")
    (volume,) = [v for v in pod(off)["volumes"] if v["name"].startswith("gcs-")]
    assert volume == {"name": "gcs-0-bkt", "emptyDir": {}} and "gke-gcsfuse/volumes" not in annotations(off)
    on = jobset(helm, "a4x-max", *bucket, "--set", "volumes.gcsVolumes=true")
    assert [v for v in pod(on)["volumes"] if v["name"] == "gcs-0-bkt"][0]["csi"]["volumeAttributes"] == {
        "bucketName": "bkt"
    }
    # Unlimited, as the A4X Max recipe that mounts buckets (0a7cec0): a capped sidecar throttles I/O.
    assert annotations(on)["gke-gcsfuse/memory-limit"] == "0"


def test_topology_request_is_replaced_not_merged_and_legacy_tas(helm):
    queue = ["--set", "queue=q"]
    assert (
        annotations(jobset(helm, "a4", *queue))["kueue.x-k8s.io/podset-preferred-topology"] == "kubernetes.io/hostname"
    )
    required = annotations(
        jobset(
            helm,
            "a4",
            *queue,
            "--set-json",
            'tasSettings.topologyRequest={"kueue.x-k8s.io/podset-required-topology":"b"}',
        )
    )
    assert required["kueue.x-k8s.io/podset-required-topology"] == "b"
    assert "kueue.x-k8s.io/podset-preferred-topology" not in required  # Kueue refuses both
    legacy = jobset(helm, "a4", *queue, "--set", "tasSettings.useLegacyTAS=true")
    assert pod(legacy)["schedulingGates"] == [{"name": "gke.io/topology-aware-auto-scheduling"}]
    assert not [k for k in annotations(legacy) if k.startswith("kueue.x-k8s.io/")]


@pytest.mark.parametrize("acc", ["a3ultra", "a4", "a4x"])
def test_gib_plugin_path_is_one_directory_and_the_installer_can_be_left_out(helm, acc):
    # A3 Ultra: no installer unless the values name its image (the src a3ultra chart has no default; the
    # nemo2407 recipes leave it out and use an image with gIB built in).
    image = ["--set", "network.gibVersion=us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"]
    js = jobset(helm, acc, *(image if acc == "a3ultra" else []))
    if acc == "a3ultra":
        assert "NCCL_INIT_SCRIPT" not in env(jobset(helm, acc)) and not pod(jobset(helm, acc)).get("initContainers")
    assert env(js)["NCCL_PLUGIN_PATH"] == "/usr/local/gib/lib64"
    assert env(js)["NCCL_INIT_SCRIPT"] == "/usr/local/gib/scripts/set_nccl_env.sh"
    assert [c["name"] for c in pod(js)["initContainers"]] == ["nccl-plugin-installer"]
    built_in = jobset(helm, acc, "--set", "network.gibVersion=null")
    assert not pod(built_in).get("initContainers") and "NCCL_INIT_SCRIPT" not in env(built_in)
    assert "gib" not in {v["name"] for v in pod(built_in)["volumes"]}
    assert env(built_in)["NCCL_PLUGIN_PATH"] == "/usr/local/gib/lib64"  # the image's own plugin


def test_a4x_max_profile(helm):
    out = objects(helm.template("r", chart("a4x-max"), "--set", "workload.gpus=256", "--kube-version", "1.34.0").stdout)
    js = out[("JobSet", "r")]
    assert out[("ResourceClaimTemplate", "r-all-mrdma")]["spec"]["spec"]["devices"]["requests"] == [
        {
            "name": "req-mrdma",
            "exactly": {"deviceClassName": "mrdma.google.com", "allocationMode": "ExactCount", "count": 8},
        }
    ]
    assert out[("ComputeDomain", "r")]["spec"]["numNodes"] == 64
    assert pod(js)["resourceClaims"] == [
        {"name": "compute-domain-channel", "resourceClaimTemplateName": "r"},
        {"name": "rdma", "resourceClaimTemplateName": "r-all-mrdma"},
    ]
    w = workload(js)
    assert w["resources"]["claims"] == [{"name": "compute-domain-channel"}, {"name": "rdma"}]
    assert w["securityContext"] == {"privileged": True, "capabilities": {"add": ["IPC_LOCK"]}}
    assert pod(js)["hostIPC"] is True and "hostNetwork" not in pod(js)
    assert {"name": "library-dir-host", "mountPath": "/usr/local/nvidia"} in w["volumeMounts"]
    e = env(js)
    assert e["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64" and e["NODE_NAME"] == {
        "fieldRef": {"fieldPath": "spec.nodeName"}
    }
    assert "NCCL_PLUGIN_PATH" not in e and "NCCL_INIT_SCRIPT" not in e
    script = w["command"][2]
    assert "apt install nccl-gib-plugins" in script and "doca/3.1.0/ubuntu22.04/arm64-sbsa/" in script
    assert script.index("set -eo pipefail") < script.index("apt install nccl-gib-plugins") < script.index("set +e")
    assert "NCCL_INIT_SCRIPT" not in script and not pod(js).get("initContainers")
    assert {"key": "kubernetes.io/arch", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"} in pod(js)[
        "tolerations"
    ]
    # An older recipe names A4X Max's gIB installer image: it runs as on A4X.
    installer = jobset(
        helm,
        "a4x-max",
        "--set",
        "network.gibVersion=us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-gib-a4x-max-arm64:v1.1.1",
    )
    assert [c["name"] for c in pod(installer)["initContainers"]] == ["nccl-plugin-installer"]
    assert env(installer)["NCCL_INIT_SCRIPT"] == "/usr/local/gib/scripts/set_nccl_env.sh"
    assert "source ${NCCL_INIT_SCRIPT}" in workload(installer)["command"][2]


@pytest.mark.parametrize(
    "select",
    [
        ["--set", "network.generation=pre-dra"],
        ["--set", "workload.privileged=true"],
        ["--set", "network.hostNetwork=true"],
    ],
)
def test_a4x_max_pre_dra_generation(helm, select):
    """The nemo2511/2602 recipes' networking: selected by name, or by what their values set (privileged or host
    network); no DRA RDMA claim, so a cluster without the mrdma DeviceClass schedules the pods."""
    out = objects(
        helm.template("r", chart("a4x-max"), "--set", "workload.gpus=64", *select, "--kube-version", "1.34.0").stdout
    )
    js = out[("JobSet", "r")]
    assert not [k for k in out if k[0] == "ResourceClaimTemplate"]
    assert pod(js)["resourceClaims"] == [{"name": "compute-domain-channel", "resourceClaimTemplateName": "r"}]
    w = workload(js)
    assert w["resources"]["claims"] == [{"name": "compute-domain-channel"}]
    assert "capabilities" not in (w.get("securityContext") or {}) and "hostIPC" not in pod(js)
    assert "library-dir-host" not in {v["name"] for v in pod(js)["volumes"]}
    e = env(js)
    assert e["NCCL_PLUGIN_PATH"] == "/usr/local/gib/lib64" and "NODE_NAME" not in e and "LD_LIBRARY_PATH" not in e
    script = w["command"][2]
    for line in (
        "export NCCL_NVLS_ENABLE=0",
        'export GLOO_SOCKET_IFNAME="eth0"',
        "export NCCL_DEBUG=WARN",
        'export NCCL_DEBUG_SUBSYS="INIT,ENV,NET,GRAPH"',
        "source ${NCCL_INIT_SCRIPT}",
    ):
        assert line in script
    assert "set -eo pipefail" not in script
    if "network.generation=pre-dra" in select:
        assert "securityContext" not in w  # privileged only on request, as those copies
    # Named explicitly, the DRA generation wins over what the values set.
    dra = objects(
        helm.template(
            "r", chart("a4x-max"), *select, "--set", "network.generation=dra", "--kube-version", "1.34.0"
        ).stdout
    )
    assert ("ResourceClaimTemplate", "r-all-mrdma") in dra


def test_a4x_checkpointing_recipes_keep_their_exports(helm):
    """The A4X NeMo 26.02 checkpointing copies (the recipes with workload.runScript) re-export NCCL's debug env
    and gloo's interface after the NCCL init script; with runScript (or network.generation) so do ours."""
    exports = [
        'export NCCL_DEBUG_SUBSYS="INIT,ENV,NET,GRAPH"',
        "export NCCL_DEBUG=WARN",
        "export GLOO_SOCKET_IFNAME=eth0",
    ]
    script = workload(jobset(helm, "a4x", "--set", "workload.runScript=run_script.py"))["command"][2]
    assert all(line in script for line in exports)
    assert script.index("source ${NCCL_INIT_SCRIPT}") < script.index("export NCCL_DEBUG=WARN")
    named = workload(jobset(helm, "a4x", "--set", "network.generation=gib-debug-exports"))["command"][2]
    assert all(line in named for line in exports)
    plain = workload(jobset(helm, "a4x"))["command"][2]
    assert not any(line in plain for line in exports) and 'export NCCL_SOCKET_IFNAME="eth0,eth1"' in plain


def test_g4_profile(helm):
    js = jobset(
        helm, "g4", "--set", "volumes.gcsMounts[0].bucketName=bkt", "--set", "volumes.gcsMounts[0].mountPath=/l"
    )
    assert pod(js)["nodeSelector"] == {"cloud.google.com/gke-accelerator": "nvidia-rtx-pro-6000"}
    assert pod(js)["hostNetwork"] is True and not pod(js).get("initContainers")
    assert "NCCL_PLUGIN_PATH" not in env(js) and "NCCL_INIT_SCRIPT" not in env(js)
    script = workload(js)["command"][2]
    assert 'export NCCL_SOCKET_IFNAME="eth0,eth1"' in script and "TUNER" not in script
    assert annotations(js)["gke-gcsfuse/memory-limit"] == "5Gi"
    assert workload(js)["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert (
        not (ROOT / "charts" / "g4" / "nemo-training").exists()
        and not (ROOT / "charts" / "a4x-max" / "nemo-training").exists()
    )


def test_small_dialect_keys(helm, tmp_path):
    js = jobset(
        helm,
        "a4x-max",
        "--set",
        "workload.hfToken=t0k",
        "--set",
        "workload.masterPort=29501",
        "--set",
        "workload.arguments=trainer.max_steps=100",
    )
    assert env(js)["HF_TOKEN"] == "t0k" and env(js)["MASTER_PORT"] == "29501"
    assert workload(js)["args"] == ["workload", "trainer.max_steps=100"]  # a single string is one value
    launcher = tmp_path / "l.sh"
    for text in ("#!/bin/bash\necho hi\n\n\n", "  indented first\nline: x\n- y", "no newline"):
        launcher.write_text(text)
        out = objects(helm.template("r", chart("a4"), "--set-file", f"workload_launcher={launcher}").stdout)
        assert out[("ConfigMap", "r-launcher")]["data"]["launch-workload.sh"] == text  # exactly
