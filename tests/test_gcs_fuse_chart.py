"""The gcs-fuse storage chart on Helm 3 and 4: PV + PVC per bucket, mount options per type, the anchor's bugs fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_golden, render_fixture
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "gcs-fuse"
BASE_OPTIONS = [
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:-1",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
]


# `--set list[i].x` edits the list of a -f file but replaces a chart default list, so every test passes a
# values file, as the gpu-recipes commands do (their values-gcs.yaml lists the volumes).
DEFAULTS = ["-f", str(CHART / "values.yaml")]


def objects(text: str) -> dict:
    return {(d["kind"], d["metadata"]["name"]): d for d in YAML(typ="safe", pure=True).load_all(text) if d}


def test_items_without_bucket_are_skipped(helm):
    assert objects(helm.template("st", CHART).stdout) == {}
    out = objects(helm.template("st", CHART, *DEFAULTS, "--set", "gcsVolumes[1].bucketName=ckpt-bucket").stdout)
    assert sorted(out) == [
        ("PersistentVolume", "st-gcs-checkpoints-pv"),
        ("PersistentVolumeClaim", "gcs-checkpoints-pvc"),
    ]


@pytest.mark.parametrize("index, kind", [(0, "data"), (1, "checkpoints"), (2, "serving-model")])
def test_dir_path_works_for_every_type(helm, index, kind):
    out = objects(
        helm.template(
            "st",
            CHART,
            "-n",
            "ml",
            *DEFAULTS,
            "--set",
            f"gcsVolumes[{index}].bucketName=my-bucket",
            "--set",
            f"gcsVolumes[{index}].dirPath=sub/dir",
        ).stdout
    )
    name = ["gcs-data", "gcs-checkpoints", "gcs-serving-model"][index]
    pv = out[("PersistentVolume", f"st-{name}-pv")]
    options = pv["spec"]["mountOptions"]
    assert options[:5] == BASE_OPTIONS and options[-1] == "only-dir:sub/dir"
    assert pv["spec"]["csi"]["driver"] == "gcsfuse.csi.storage.gke.io"
    assert pv["spec"]["csi"]["volumeHandle"] == "my-bucket"
    assert pv["spec"]["claimRef"] == {"name": f"{name}-pvc", "namespace": "ml"}
    pvc = out[("PersistentVolumeClaim", f"{name}-pvc")]
    assert pvc["metadata"]["namespace"] == "ml" and pvc["spec"]["volumeName"] == f"st-{name}-pv"
    assert pv["metadata"]["labels"]["helm-nemo.dev/gcs-volume-type"] == kind


def test_mount_option_profiles_are_values(helm, tmp_path):
    values = tmp_path / "v.yaml"
    values.write_text(
        "gcsVolumes:\n  - {name: logs, type: data, bucketName: logs-bucket, extraMountOptions: [uid=1000]}\n"
        "mountOptionProfiles:\n  data: [implicit-dirs]\n  checkpoints: []\n  serving-model: []\n"
    )
    pv = objects(helm.template("st", CHART, "-f", str(values)).stdout)[("PersistentVolume", "st-logs-pv")]
    assert pv["spec"]["mountOptions"] == ["implicit-dirs", "uid=1000"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--set", "gcsVolumes[0].type=foo", "--set", "gcsVolumes[0].bucketName=my-bucket"], "type"),
        (["--set", "gcsVolumes[0].bucketName="], "bucketName"),
        (["--set", "gcsVolumes[0].bucketName=Bad_Bucket!"], "bucketName"),
        (["--set", "gcsVolumes[0].name=Bad_Name", "--set", "gcsVolumes[0].bucketName=my-bucket"], "name"),
        (["--set", "gcsVolumes[0].capacity=big", "--set", "gcsVolumes[0].bucketName=my-bucket"], "capacity"),
        (["--set", "gcsVolumes[0].mountPath=/x"], "mountPath"),
    ],
)
def test_schema_rejects(helm, args, needle):
    result = helm.template("st", CHART, *DEFAULTS, *args, check=False)
    assert result.returncode != 0 and needle in result.stderr


def test_pvc_name_is_what_the_workload_mounts(helm):
    """The recipe couples the charts by name: gcs-fuse's <name>-pvc is the jobset's volumes.pvcMounts[].claimName."""
    out = objects(helm.template("st", CHART, *DEFAULTS, "--set", "gcsVolumes[1].bucketName=ckpt-bucket").stdout)
    claim = out[("PersistentVolumeClaim", "gcs-checkpoints-pvc")]["metadata"]["name"]
    jobset = helm.template(
        "run",
        ROOT / "charts/a3ultra/jobset",
        "--set",
        f"volumes.pvcMounts[0].claimName={claim}",
        "--set",
        "volumes.pvcMounts[0].mountPath=/ckpt",
    ).stdout
    assert f'claimName: "{claim}"' in jobset


# Golden snapshots: the three parity fixtures with their own commands, plus every type with a dirPath in
# another namespace, rendered by both helms (identical bytes) and compared with tests/golden/gcs-fuse/.
# To accept a change: UPDATE_GOLDEN=1 pytest tests/test_gcs_fuse_chart.py, then review git diff tests/golden.
GOLDEN = ROOT / "tests" / "golden" / "gcs-fuse"
PARITY = ROOT / "tests" / "fixtures" / "parity"
GOLDEN_CASES = {
    "parity-a3ultra-resiliency": ("a3ultra-resiliency-llama31-405b/gcs-fuse", []),
    "parity-default-data-checkpoints": ("gcs-fuse-default/data-checkpoints", []),
    "parity-default-serving-model": ("gcs-fuse-default/serving-model", []),
    "all-types-dir-path": (
        "gcs-fuse-default/data-checkpoints",
        [
            "-n",
            "ml",
            "--set",
            "gcsVolumes[0].dirPath=datasets/c4",
            "--set",
            "gcsVolumes[1].dirPath=ckpt/run-1",
            "--set",
            "gcsVolumes[2].bucketName=model-bucket",
            "--set",
            "gcsVolumes[2].dirPath=llama",
            "--set",
            "gcsVolumes[2].capacity=64Ti",
        ],
    ),
}


def render_golden(helm, case: str) -> str:
    folder, extra = GOLDEN_CASES[case]
    return render_fixture(helm, PARITY / folder, CHART, *extra)


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(helm, case):
    out = render_golden(helm, case)
    golden = GOLDEN / f"{case}.yaml"
    assert_golden(golden, out, writer=helm.name == "helm3")
