"""Env values and the flight recorder, rendered by the real helm binaries (Helm 3.17.2 and 4.1.4).

An EnvVar value in the values may be any scalar, as Helm reads it (gpu-recipes' A4X Lustre README passes
`--set workload.envs[11].value=10`): the charts write it as the text Helm's toYaml prints for it, as a string
(Kubernetes' EnvVar.value is a string), and the Slurm target writes the same text. `workload.flightRecorder`
turns on PyTorch's flight recorder with its dumps on the run's storage; off by default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import JOB_TIMESTAMP
from helm_nemo.values.helm_yaml import helm_scalar, helm_text

ROOT = Path(__file__).resolve().parent.parent
RUN = f"train-{JOB_TIMESTAMP}"

# name -> the plain YAML scalar written in a values file
PLAIN = {
    "INT": "10",
    "FLOAT": "1.10",
    "WHOLE_FLOAT": "1e6",
    "BIG_FLOAT": "1234567.5",
    "SMALL_FLOAT": "0.000001",
    "NEG": "-2.5e-5",
    "BOOL": "true",
    "AFFIRM": "yes",
    "HEX": "0x1F",
}
# name -> what the pod must get: the text Helm's toYaml prints for the value (checked above on both helms)
EXPECTED = {
    "INT": "10",
    "FLOAT": "1.1",
    "WHOLE_FLOAT": "1000000",
    "BIG_FLOAT": "1.2345675e+06",
    "SMALL_FLOAT": "1e-06",
    "NEG": "-2.5e-05",
    "BOOL": "true",
    "AFFIRM": "true",
    "HEX": "31",
}


def values_file(tmp_path: Path, key: str) -> Path:
    """`key` (e.g. workload.envs) holding every PLAIN scalar, a quoted "1.10" and a null, as YAML text."""
    outer, inner = key.split(".")
    items = [f"    - name: {name}\n      value: {text}\n" for name, text in PLAIN.items()]
    items.append('    - name: QUOTED\n      value: "1.10"\n    - name: EMPTY\n      value: null\n')
    path = tmp_path / "values.yaml"
    path.write_text(f"{outer}:\n  {inner}:\n" + "".join(items))
    return path


def containers(text: str) -> list[dict]:
    out = []
    for doc in yaml.safe_load_all(text):
        if not doc:
            continue
        spec = doc.get("spec") or {}
        pods = [r["template"]["spec"]["template"]["spec"] for r in spec.get("replicatedJobs") or []]
        if doc["kind"] == "Job":
            pods.append(spec["template"]["spec"])
        for pod in pods:
            out += pod["containers"]
    return out


def env(container: dict) -> dict:
    return {e["name"]: e for e in container.get("env") or []}


CHARTS = {
    "jobset": (ROOT / "charts/a4x/jobset", "workload.envs", []),
    "jobset-nccl": (ROOT / "charts/a3ultra/jobset", "network.ncclSettings", []),
    "nemo-training": (ROOT / "charts/a3mega/nemo-training", "workload.envs", ["--set", "nemo_config=x: 1"]),
    "nccl-test": (ROOT / "charts/a4/nccl-test", "workload.envs", []),
}


@pytest.mark.parametrize("case", sorted(CHARTS))
def test_any_scalar_env_value_is_written_as_helm_prints_it(helm, tmp_path, case):
    chart, key, extra = CHARTS[case]
    path = values_file(tmp_path, key)
    at = len(PLAIN) + 2
    out = helm.template(
        "train",
        chart,
        "-f",
        str(path),
        "--set",
        f"{key}[{at}].name=SET_INT,{key}[{at}].value=10",
        "--set",
        f"{key}[{at + 1}].name=SET_DECIMAL,{key}[{at + 1}].value=1.10",
        "--set",
        f"workload.jobTimestamp={JOB_TIMESTAMP}",
        *extra,
    ).stdout
    (workload,) = [c for c in containers(out) if c["name"] == "workload"]
    got = env(workload)
    for name, text in EXPECTED.items():
        assert got[name]["value"] == text, name  # a string (yaml.safe_load keeps quoted text a str)
        assert helm_text(helm_scalar(PLAIN[name])) == text, name  # the Slurm target writes the same text
    assert got["QUOTED"]["value"] == "1.10"  # a string stays exactly as written
    assert got["EMPTY"].get("value") is None
    assert got["SET_INT"]["value"] == "10"  # --set types 10 as an integer
    assert got["SET_DECIMAL"]["value"] == "1.10"  # and keeps 1.10 a string
    assert all(isinstance(e.get("value"), (str, type(None))) for e in workload["env"])


def test_data_prep_env_values_too(helm, tmp_path):
    values = {
        "image": "nvcr.io/nvidia/nemo:24.07",
        "shards": {"files": [{"url": "https://example.com/a.jsonl"}]},
        "tokenizer": {"type": "GPT2BPETokenizer", "vocabFile": "/d/v.json", "mergesFile": "/d/m.txt"},
        "output": {"path": "/fsx/out"},
        "volumes": {"pvcMounts": [{"claimName": "fsx-pvc", "mountPath": "/fsx"}]},
        "env": [{"name": "WORKERS", "value": 4}, {"name": "RATIO", "value": 0.5}, {"name": "ON", "value": True}],
    }
    file = tmp_path / "values.json"
    file.write_text(json.dumps(values))
    out = helm.template("pile", ROOT / "charts/data-prep", "-f", str(file)).stdout
    (container,) = containers(out)
    got = env(container)
    assert (got["WORKERS"]["value"], got["RATIO"]["value"], got["ON"]["value"]) == ("4", "0.5", "true")


def test_the_schema_takes_any_scalar_and_nothing_else(helm, tmp_path):
    chart = ROOT / "charts/a4x/jobset"
    ok = helm.template("train", chart, "--set", "workload.envs[0].name=A,workload.envs[0].value=10")
    assert ok.returncode == 0
    bad = helm.template("train", chart, "--set-json", 'workload.envs=[{"name":"A","value":[1]}]', check=False)
    assert bad.returncode != 0 and "workload" in bad.stderr and "envs" in bad.stderr
    # A number past 2**53 - 1: Helm would print other digits (12345678901234567890 as 12345678901234567000)
    huge = tmp_path / "huge.yaml"
    huge.write_text("workload:\n  envs:\n    - name: A\n      value: 12345678901234567890\n")
    refused = helm.template("train", chart, "-f", str(huge), check=False)
    assert refused.returncode != 0 and "envs" in refused.stderr, refused.stderr


# --- the flight recorder ------------------------------------------------------------------------------

TORCH = {
    "TORCH_NCCL_TRACE_BUFFER_SIZE",
    "TORCH_NCCL_DUMP_ON_TIMEOUT",
    "TORCH_FR_DUMP_TEMP_FILE",
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
}
FR_CHARTS = {
    "jobset": (ROOT / "charts/a3ultra/jobset", []),
    "nemo-training": (ROOT / "charts/a3mega/nemo-training", ["--set", "nemo_config=x: 1"]),
}
LOGS = ["--set", "volumes.gcsMounts[0].bucketName=data,volumes.gcsMounts[0].mountPath=/data"]
LOGS += ["--set", "volumes.gcsMounts[1].bucketName=logs,volumes.gcsMounts[1].mountPath=/job-logs"]


def workload_of(helm, chart: Path, *args: str) -> dict:
    out = helm.template("train", chart, "--set", f"workload.jobTimestamp={JOB_TIMESTAMP}", *args).stdout
    (workload,) = [c for c in containers(out) if c["name"] == "workload"]
    return workload


@pytest.mark.parametrize("kind", sorted(FR_CHARTS))
def test_flight_recorder_is_off_by_default(helm, kind):
    chart, extra = FR_CHARTS[kind]
    workload = workload_of(helm, chart, *extra, *LOGS)
    assert not TORCH & set(env(workload))
    assert "TORCH_FR_DUMP_TEMP_FILE" not in workload["command"][-1]


@pytest.mark.parametrize("kind", sorted(FR_CHARTS))
def test_flight_recorder_dumps_go_to_the_runs_log_folder(helm, kind):
    chart, extra = FR_CHARTS[kind]
    workload = workload_of(helm, chart, *extra, *LOGS, "--set", "workload.flightRecorder=true")
    got = {name: e["value"] for name, e in env(workload).items() if name in TORCH}
    folder = (
        f"/job-logs/flight-recorder/{RUN}"  # jobset: the mount that holds logs, one folder per run
        if kind == "jobset"
        else f"/tmp/nemo-experiments/{RUN}/flight-recorder"  # nemo-training: exp_manager's explicit_log_dir
    )
    assert got == {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": f"{folder}/nccl_trace_rank_",
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": f"{folder}/nccl_trace_rank_",
    }
    # torch writes the file, not the folder: the pod makes it before the launcher starts
    script = workload["command"][-1]
    start = "/workload/launcher/launch-workload.sh" if kind == "jobset" else "torchrun"
    assert script.index('mkdir -p "$(dirname "$TORCH_FR_DUMP_TEMP_FILE")"') < script.index(start)


@pytest.mark.parametrize("kind", sorted(FR_CHARTS))
def test_flight_recorder_folder_and_buffer_as_values(helm, kind, tmp_path):
    chart, extra = FR_CHARTS[kind]
    values = tmp_path / "fr.yaml"
    values.write_text("workload:\n  flightRecorder:\n    dir: /ckpt/fr/\n    traceBufferSize: 500\n")
    workload = workload_of(helm, chart, *extra, "-f", str(values))
    got = env(workload)
    assert got["TORCH_FR_DUMP_TEMP_FILE"]["value"] == f"/ckpt/fr/{RUN}/nccl_trace_rank_"
    assert got["TORCH_NCCL_TRACE_BUFFER_SIZE"]["value"] == "500"
    bad = helm.template("train", chart, *extra, "--set", "workload.flightRecorder.dir=relative", check=False)
    assert bad.returncode != 0 and "flightRecorder" in bad.stderr


def test_the_users_env_overrides_the_recorder(helm):
    chart, extra = FR_CHARTS["jobset"]
    workload = workload_of(
        helm,
        chart,
        "--set",
        "workload.flightRecorder=true",
        "--set",
        "workload.envs[0].name=TORCH_NCCL_TRACE_BUFFER_SIZE,workload.envs[0].value=100",
    )
    sizes = [e["value"] for e in workload["env"] if e["name"] == "TORCH_NCCL_TRACE_BUFFER_SIZE"]
    assert sizes == ["2000", "100"]  # Kubernetes: the last of duplicate names wins


# --- the same through helm nemo: the plugin's schema check, the Slurm target ----------------------------

SLURM_BASE = """\
release: smoke
chart: nemo-training
accelerator: p4de
files: {nemo_config: config.yaml}
workload:
  gpus: 8
  image: nvcr.io/nvidia/nemo:24.07
  experimentRootDir: /results
  experimentName: exp
  envs:
  - {name: STEPS, value: 10}
  - {name: RATIO, value: 1.10}
  - {name: BIG, value: 1e6}
  - {name: KEEP, value: "1.10"}
"""


def plugin(tmp_path: Path, text: str, *args: str):
    from click.testing import CliRunner

    from helm_nemo.cli import main

    (tmp_path / "config.yaml").write_text("name: test\ntrainer: {max_steps: 1}\n")
    (tmp_path / "values.yaml").write_text(text)
    return CliRunner().invoke(main, ["template", "-f", str(tmp_path / "values.yaml"), *args], catch_exceptions=False)


def test_helm_nemo_takes_scalar_env_values(tmp_path, helm):
    import io

    from helm_nemo.actions import releases
    from helm_nemo.actions.helm import helm_binary
    from helm_nemo.values.plan import build_plans

    (tmp_path / "config.yaml").write_text("name: test\ntrainer: {max_steps: 1}\n")
    (tmp_path / "values.yaml").write_text(SLURM_BASE)
    out, messages = io.StringIO(), []
    plans = build_plans(tmp_path / "values.yaml", {})  # the plugin's own schema check runs here
    assert releases.template(plans, helm_binary(str(helm.binary)), [], out=out, echo=messages.append) == 0, messages
    (workload,) = [c for c in containers(out.getvalue()) if c["name"] == "workload"]
    got = {name: e.get("value") for name, e in env(workload).items()}
    assert (got["STEPS"], got["RATIO"], got["BIG"], got["KEEP"]) == ("10", "1.1", "1000000", "1.10")


def test_slurm_writes_the_same_text_and_the_recorder(tmp_path):
    result = plugin(tmp_path, SLURM_BASE + "  flightRecorder: true\n", "--target", "slurm")
    assert result.exit_code == 0, result.output
    script = result.stdout
    for line in ("export STEPS=10 ", "export RATIO=1.1 ", "export BIG=1000000 ", "export KEEP=1.10 "):
        assert line in script, line
    prefix = '"$RESULTS_DIR/results/flight-recorder/nccl_trace_rank_"'
    assert f"export TORCH_FR_DUMP_TEMP_FILE={prefix}" in script
    assert f"export TORCH_NCCL_DEBUG_INFO_TEMP_FILE={prefix}" in script
    assert "export TORCH_NCCL_DUMP_ON_TIMEOUT=1 " in script and "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 " in script
    assert script.index('mkdir -p "$(dirname "$TORCH_FR_DUMP_TEMP_FILE")"') > script.index("RESULTS_DIR=")
    off = plugin(tmp_path, SLURM_BASE, "--target", "slurm").stdout
    assert "TORCH_FR_DUMP_TEMP_FILE" not in off and "TORCH_NCCL" not in off
