"""The data-prep chart kind on Helm 3 and 4 (docs/data-prep.md): a ConfigMap with the worker, the tokenizer script
and the shard lists, and an Indexed Job. The template expands the shard list by the rules of
helm_nemo.dataprep.shards (compared here spec by spec) and refuses what they refuse; the tokenizer's values reach
NeMo's preprocess_data_for_megatron.py as arguments, verbatim."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import assert_golden
from helm_nemo.dataprep import shards

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "data-prep"
GOLDEN = ROOT / "tests" / "golden" / "data-prep"
SUM_A = "a" * 64
SUM_B = "0123456789abcdef" * 4
FSX = {"pvcMounts": [{"claimName": "fsx-pvc", "mountPath": "/fsx"}]}

# seed 004: the Pile's first six shards and GPT-2's vocab and merges on FSx, over two workers
PILE = {
    "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/nemo-aws:24.01.framework",
    "workers": 2,
    "shards": {
        "urlPattern": "https://huggingface.co/datasets/monology/pile-uncopyrighted/resolve/main/train/{index}.jsonl.zst",
        "numbers": "0-5",
    },
    "downloads": [
        {"url": "https://huggingface.co/gpt2/raw/main/vocab.json", "path": "/fsx/data/bpe/vocab.json"},
        {"url": "https://huggingface.co/gpt2/raw/main/merges.txt", "path": "/fsx/data/bpe/merges.txt"},
    ],
    "tokenizer": {
        "type": "GPT2BPETokenizer",
        "vocabFile": "/fsx/data/bpe/vocab.json",
        "mergesFile": "/fsx/data/bpe/merges.txt",
    },
    "output": {"path": "/fsx/data/pile"},
    "volumes": FSX,
}


def render(helm, tmp_path: Path, values: dict, *args: str, release: str = "pile", check: bool = True):
    file = tmp_path / "values.json"
    file.write_text(json.dumps(values))
    return helm.template(release, CHART, "-n", "ml", "-f", str(file), *args, check=check)


def objects(text: str) -> dict[tuple[str, str], dict]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


def tsv(shard_list: list[shards.Shard]) -> str:
    return "".join(f"{s.name}\t{s.source}\t{s.sha256 or ''}\n" for s in shard_list)


def test_one_chart_for_every_accelerator_and_its_schema():
    assert 'version: "1.1.0"' in (CHART / "Chart.yaml").read_text()
    assert not list((ROOT / "charts").glob("*/data-prep"))  # not per accelerator
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert schema["x-helm-nemo-checks"] == {"kind": "data-prep"}  # helm nemo's cross-field rules apply
    assert (CHART / "files" / "prepare.sh").read_bytes() == (ROOT / "generator/data-prep/files/prepare.sh").read_bytes()


def test_nothing_to_prepare_renders_nothing(helm):
    assert objects(helm.template("pile", CHART).stdout) == {}


def test_the_configmap_and_the_indexed_job(helm, tmp_path):
    out = objects(render(helm, tmp_path, PILE).stdout)
    assert sorted(out) == [("ConfigMap", "pile-data-prep"), ("Job", "pile")]  # no Service
    data = out[("ConfigMap", "pile-data-prep")]["data"]
    assert sorted(data) == ["downloads.tsv", "prepare.sh", "shards.tsv", "tokenize.sh"]
    assert data["prepare.sh"] == (ROOT / "generator/data-prep/files/prepare.sh").read_text()  # byte for byte
    assert data["tokenize.sh"] == (ROOT / "generator/data-prep/files/tokenize.sh").read_text()
    assert data["shards.tsv"] == tsv(shards.expand(PILE))
    assert data["downloads.tsv"] == (
        "/fsx/data/bpe/vocab.json\thttps://huggingface.co/gpt2/raw/main/vocab.json\t\n"
        "/fsx/data/bpe/merges.txt\thttps://huggingface.co/gpt2/raw/main/merges.txt\t\n"
    )
    job = out[("Job", "pile")]
    spec = job["spec"]
    assert job["metadata"]["labels"]["helm-nemo.dev/data-prep"] == "pile"
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["backoffLimitPerIndex"] == 3 and "backoffLimit" not in spec and "activeDeadlineSeconds" not in spec
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert spec["template"]["metadata"]["labels"]["helm-nemo.dev/data-prep"] == "pile"
    assert "annotations" not in spec["template"]["metadata"]  # no GCS FUSE sidecar without buckets
    (container,) = pod["containers"]
    assert container["command"] == ["bash", "/opt/helm-nemo/data-prep/prepare.sh"]
    assert container["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"}}  # no GPU
    env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
    assert env["DATA_PREP_INDEX"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert {k: v for k, v in env.items() if k != "DATA_PREP_INDEX"} == {
        "DATA_PREP_WORKERS": "2",
        "DATA_PREP_SHARDS": "/opt/helm-nemo/data-prep/shards.tsv",
        "DATA_PREP_DOWNLOADS": "/opt/helm-nemo/data-prep/downloads.tsv",
        "DATA_PREP_OUTPUT": "/fsx/data/pile",
        "DATA_PREP_JSON_KEYS": "text",
        "DATA_PREP_TOKENIZE": "/opt/helm-nemo/data-prep/tokenize.sh",
        "DATA_PREP_RETRIES": "5",
        "DATA_PREP_RETRY_DELAY": "10",
        "DATA_PREP_KEEP_DOWNLOADS": "false",
        "DATA_PREP_TOKENIZER_LIBRARY": "megatron",
        "DATA_PREP_TOKENIZER_TYPE": "GPT2BPETokenizer",
        "DATA_PREP_TOKENIZER_VOCAB_FILE": "/fsx/data/bpe/vocab.json",
        "DATA_PREP_TOKENIZER_MERGE_FILE": "/fsx/data/bpe/merges.txt",
        "DATA_PREP_TOKENIZER_WORKERS": "4",
        "DATA_PREP_TOKENIZER_APPEND_EOD": "true",
    }
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"data-prep": "/opt/helm-nemo/data-prep", "pvc-0": "/fsx"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data-prep"]["configMap"] == {"name": "pile-data-prep", "defaultMode": 0o555}
    assert volumes["pvc-0"]["persistentVolumeClaim"] == {"claimName": "fsx-pvc"}


def test_values_of_the_job(helm, tmp_path):
    values = {
        **PILE,
        "workers": 3,
        "retries": {"download": 0, "delaySeconds": 1, "podRetries": 0},
        "keepDownloads": True,
        "activeDeadlineSeconds": 86400,
        "serviceAccountName": "data-sa",
        "nodeSelector": {"pool": "cpu"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "data", "effect": "NoSchedule"}],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf", "key": "token"}}}],
        "resources": {"limits": {"nvidia.com/gpu": 1}},
        "volumes": {"gcsMounts": [{"bucketName": "my-bucket", "mountPath": "/gcs", "mountOptions": "implicit-dirs"}]},
        "output": {"path": "/gcs/pile/"},
        "downloads": [],
    }
    job = objects(render(helm, tmp_path, values).stdout)[("Job", "pile")]
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimitPerIndex"]) == (3, 3, 0)
    assert spec["activeDeadlineSeconds"] == 86400
    assert spec["template"]["metadata"]["annotations"] == {"gke-gcsfuse/volumes": "true"}
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == "data-sa" and pod["nodeSelector"] == {"pool": "cpu"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["DATA_PREP_RETRIES"]["value"] == "0" and env["DATA_PREP_RETRY_DELAY"]["value"] == "1"
    assert env["DATA_PREP_KEEP_DOWNLOADS"]["value"] == "true" and env["DATA_PREP_OUTPUT"]["value"] == "/gcs/pile/"
    assert container["env"][-1] == values["env"][0]  # the values' env last
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 1}  # GPUs only when asked
    gcs = {v["name"]: v for v in pod["volumes"]}["gcs-0"]["csi"]
    assert gcs == {
        "driver": "gcsfuse.csi.storage.gke.io",
        "volumeAttributes": {"bucketName": "my-bucket", "mountOptions": "implicit-dirs"},
    }


@pytest.mark.parametrize(
    "spec",
    [
        {"urlPattern": "https://h/train/{index}.jsonl.zst", "numbers": "0-2,5,7-9"},
        {"urlPattern": "https://h/train/{index}.jsonl.zst", "numbers": " 3 - 4 , 10 ", "indexWidth": 0},
        {"urlPattern": "/fsx/raw/part-{index}-of-{index}.json.gz", "numbers": "8-11", "indexWidth": 5},
        {
            "urlPattern": "https://h/c4/en.{index}.jsonl.gz?download=true",
            "numbers": "0-1",
            "indexWidth": 3,
            "sha256": {"en.001": SUM_A},
            "files": [
                {"url": "https://h/wiki/wiki.json.gz.zst#frag"},
                {"url": "https://h/books/", "sha256": SUM_B},
                {"url": "/fsx/raw/.jsonl.zst", "name": "dotted.name_1-x"},
                {"url": "https://h/a.b.c.jsonl"},
            ],
        },
        {"files": [{"url": "https://h/x/shard.jsonl", "name": "first"}, {"url": "https://h/y/shard.jsonl"}]},
    ],
    ids=["ranges", "no-padding", "path-pattern", "files-and-checksums", "files-only"],
)
def test_the_shard_list_is_the_python_one(helm, tmp_path, spec):
    values = {"shards": spec, "output": {"path": "/fsx/out"}, "volumes": FSX}
    data = objects(render(helm, tmp_path, values).stdout)[("ConfigMap", "pile-data-prep")]["data"]
    expected = shards.expand(values)
    assert data["shards.tsv"] == tsv(expected)
    assert len(expected) >= 2


# Values both the chart and helm_nemo.dataprep.shards refuse (the template `fail`s; the Python raises ShardError
# with the values path helm nemo reports). Checked without the schema: some the schema refuses too.
BAD_SHARDS = [
    ({"urlPattern": "https://h/{index}.jsonl", "numbers": "5-3"}, ("shards", "numbers"), "runs backwards"),
    ({"urlPattern": "https://h/{index}.jsonl", "numbers": "1,2,1"}, ("shards", "numbers"), "listed twice"),
    ({"urlPattern": "https://h/{index}.jsonl", "numbers": "1-x"}, ("shards", "numbers"), "not a list of numbers"),
    ({"urlPattern": "https://h/all.jsonl", "numbers": "0-1"}, ("shards", "urlPattern"), "needs a urlPattern"),
    ({"urlPattern": "https://h/{index}/train.jsonl", "numbers": "0-1"}, ("shards",), "two shards are named"),
    (
        {"files": [{"url": "https://h/a/x.jsonl"}, {"url": "https://h/b/x.jsonl.gz"}]},
        ("shards",),
        "two shards are named",
    ),
    (
        {"files": [{"url": "https://h/a.jsonl"}, {"url": "https://h/b.jsonl", "name": "a"}]},
        ("shards",),
        "two shards are named",
    ),
    ({"files": [{"url": "https://h/.jsonl.gz"}]}, ("shards", "files", 0), "not a file name"),
    ({"files": [{"url": "https://h/a.jsonl", "name": "../up"}]}, ("shards", "files", 0), "not a file name"),
    (
        {"urlPattern": "https://h/{index}.jsonl", "numbers": "0", "sha256": {"01": SUM_A}},
        ("shards", "sha256", "01"),
        "no shard is named",
    ),
]


@pytest.mark.parametrize("spec, path, words", BAD_SHARDS, ids=[f"{w}-{i}" for i, (_, _, w) in enumerate(BAD_SHARDS)])
def test_the_template_refuses_what_the_rules_refuse(helm, tmp_path, spec, path, words):
    values = {"shards": spec, "output": {"path": "/fsx/out"}, "volumes": FSX}
    with pytest.raises(shards.ShardError) as refused:
        shards.expand(values)
    assert refused.value.path == path and words in refused.value.message
    result = render(helm, tmp_path, values, "--skip-schema-validation", check=False)
    assert result.returncode == 1 and "execution error" in result.stderr
    assert "data-prep shards: " in result.stderr and words in result.stderr, result.stderr


@pytest.mark.parametrize(
    "volumes, output, words",
    [
        (FSX, None, "data-prep output.path: set the folder"),
        ({}, "/fsx/out", "data-prep output.path /fsx/out is not under a mount (mounts: none)"),
        (FSX, "/fsxdata/out", "data-prep output.path /fsxdata/out is not under a mount (mounts: /fsx)"),
        (
            {"pvcMounts": [{"claimName": "c", "mountPath": "/fsx", "readOnly": True}]},
            "/fsx/out",
            "data-prep output.path /fsx/out is on the read-only mount /fsx",
        ),
    ],
    ids=["unset", "no-mounts", "prefix-is-not-a-folder", "read-only"],
)
def test_the_output_must_be_on_a_writable_mount(helm, tmp_path, volumes, output, words):
    values = {"shards": {"files": [{"url": "https://h/a.jsonl"}]}, "output": {"path": output}, "volumes": volumes}
    result = render(helm, tmp_path, values, check=False)
    assert result.returncode == 1 and words in result.stderr, result.stderr


@pytest.mark.parametrize(
    "output, volumes",
    [
        ("/fsx", FSX),
        ("/fsx/", {"pvcMounts": [{"claimName": "c", "mountPath": "/fsx/"}]}),
        (
            "/data/out/x",  # the deepest mount holding the folder decides: the writable one
            {
                "pvcMounts": [
                    {"claimName": "ro", "mountPath": "/data", "readOnly": True},
                    {"claimName": "rw", "mountPath": "/data/out"},
                ]
            },
        ),
        ("/anything", {"pvcMounts": [{"claimName": "root", "mountPath": "/"}]}),
    ],
)
def test_outputs_on_a_mount_are_accepted(helm, tmp_path, output, volumes):
    values = {"shards": {"files": [{"url": "https://h/a.jsonl"}]}, "output": {"path": output}, "volumes": volumes}
    assert ("Job", "pile") in objects(render(helm, tmp_path, values).stdout)


@pytest.mark.parametrize(
    "edit, words",
    [
        ({"workers": 0}, "workers"),
        ({"workers": 1001}, "workers"),
        ({"shards": {"urlPattern": "https://h/{index}.jsonl", "numbers": "0-a"}}, "numbers"),
        ({"shards": {"urlPattern": "https://h/x.jsonl", "numbers": "0"}}, "urlPattern"),
        ({"shards": {"files": [{"url": "https://h/a b.jsonl"}]}}, "url"),
        ({"shards": {"files": [{"url": "ftp://h/a.jsonl"}]}}, "url"),
        ({"shards": {"files": [{"url": "https://h/a.jsonl", "sha256": "abc"}]}}, "sha256"),
        ({"shards": {"files": [{"url": "https://h/a.jsonl", "size": 1}]}}, "size"),
        ({"shards": {"sha256": {"../x": SUM_A}}}, "../x"),
        ({"downloads": [{"url": "https://h/v.json", "path": "relative/v.json"}]}, "path"),
        ({"tokenizer": {"jsonKeys": ["a/b"]}}, "jsonKeys"),
        ({"tokenizer": {"library": "tiktoken"}}, "library"),
        ({"tokenizer": {"workers": 0}}, "workers"),
        ({"output": {"path": "relative"}}, "path"),
        ({"retries": {"podRetries": -1}}, "podRetries"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_the_schema_refuses_bad_values(helm, tmp_path, edit, words):
    values = {**PILE, **edit}
    result = render(helm, tmp_path, values, check=False)
    assert result.returncode == 1 and "schema" in result.stderr.lower() and words in result.stderr, result.stderr


def run_tokenize(tmp_path: Path, job: dict, script: str) -> list[str]:
    """Run the rendered tokenize.sh with the Job's env, NeMo's script replaced by one that prints its arguments."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {"PATH": os.environ["PATH"]}
    env.update({e["name"]: e["value"] for e in container["env"] if "value" in e})
    probe = tmp_path / "probe.sh"
    probe.write_text('#!/bin/bash\nprintf "<%s>\\n" "$@"\n')
    probe.chmod(0o755)
    env.update(DATA_PREP_PYTHON="bash", DATA_PREP_PREPROCESS=str(probe))
    (tmp_path / "tokenize.sh").write_text(script)
    out = subprocess.run(
        ["bash", str(tmp_path / "tokenize.sh"), "/w/in put.jsonl", "/w/00"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    return [piece[1:] for piece in out.split(">\n")[:-1]]


def test_the_tokenizer_values_reach_nemo_script_verbatim(helm, tmp_path):
    marker = tmp_path / "executed"
    hostile = [f"$(touch {marker})", f"`touch {marker}`; touch {marker}", "'a b'", "x\ny", "*", ""]
    values = {
        **PILE,
        "tokenizer": {
            "library": "huggingface",
            "type": "meta-llama/Llama-2-7b-hf",
            "model": "/fsx/tok/$(id)",
            "jsonKeys": ["text", "code"],
            "workers": 16,
            "appendEod": False,
            "extraArguments": ["--log-interval", "1000", *hostile],
        },
    }
    out = objects(render(helm, tmp_path, values).stdout)
    script = out[("ConfigMap", "pile-data-prep")]["data"]["tokenize.sh"]
    args = run_tokenize(tmp_path, out[("Job", "pile")], script)
    assert args == [
        "--input", "/w/in put.jsonl",
        "--output-prefix", "/w/00",
        "--json-keys", "text", "code",
        "--tokenizer-library", "huggingface",
        "--tokenizer-type", "meta-llama/Llama-2-7b-hf",
        "--tokenizer-model", "/fsx/tok/$(id)",
        "--dataset-impl", "mmap",
        "--workers", "16",
        "--log-interval", "1000", *hostile,
    ]  # fmt: skip
    assert not marker.exists()
    # the defaults: megatron GPT-2 BPE with vocab and merges, --append-eod
    out = objects(render(helm, tmp_path, PILE).stdout)
    args = run_tokenize(tmp_path, out[("Job", "pile")], script)
    assert args == [
        "--input", "/w/in put.jsonl",
        "--output-prefix", "/w/00",
        "--json-keys", "text",
        "--tokenizer-library", "megatron",
        "--tokenizer-type", "GPT2BPETokenizer",
        "--vocab-file", "/fsx/data/bpe/vocab.json",
        "--merge-file", "/fsx/data/bpe/merges.txt",
        "--dataset-impl", "mmap",
        "--workers", "4",
        "--append-eod",
    ]  # fmt: skip


def test_a_tokenizer_command_replaces_nemo_script(helm, tmp_path):
    values = {**PILE, "tokenizer": {"command": ["bash", "-c", 'printf "<%s>\\n" "$@"', "me", "$(id)"]}}
    out = objects(render(helm, tmp_path, values).stdout)
    env = {
        e["name"]: e["value"]
        for e in out[("Job", "pile")]["spec"]["template"]["spec"]["containers"][0]["env"]
        if "value" in e
    }
    assert env["DATA_PREP_TOKENIZE_COMMAND"] == "5" and env["DATA_PREP_TOKENIZE_COMMAND_4"] == "$(id)"
    args = run_tokenize(tmp_path, out[("Job", "pile")], out[("ConfigMap", "pile-data-prep")]["data"]["tokenize.sh"])
    assert args == ["$(id)", "/w/in put.jsonl", "/w/00"]


GOLDENS = {
    "pile-fsx": PILE,
    "gcs-bucket-three-workers": {
        "image": "us-central1-docker.pkg.dev/test-project/test-registry/nemo:24.07",
        "workers": 3,
        "shards": {
            "urlPattern": "https://huggingface.co/datasets/allenai/c4/resolve/main/en/c4-train.{index}-of-01024.json.gz",
            "numbers": "0-4",
            "indexWidth": 5,
            "sha256": {"c4-train.00000-of-01024": SUM_A},
        },
        "tokenizer": {"library": "sentencepiece", "type": None, "model": "/gcs/tokenizer/tokenizer.model"},
        "output": {"path": "/gcs/data/c4"},
        "volumes": {"gcsMounts": [{"bucketName": "test-bucket", "mountPath": "/gcs"}]},
        "activeDeadlineSeconds": 172800,
    },
}


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_golden(helm, tmp_path, name):
    rendered = render(helm, tmp_path, GOLDENS[name]).stdout
    assert_golden(GOLDEN / f"{name}.yaml", rendered, writer=helm.name == "helm3")


def test_helm_nemo_accepts_the_seed_values_and_reports_a_rule_at_its_line(tmp_path):
    from helm_nemo.user_errors import UserError
    from helm_nemo.values.plan import build_plans

    good = tmp_path / "pile.yaml"
    good.write_text(yaml.safe_dump({"chart": "data-prep", "release": "pile", **PILE}, sort_keys=False))
    (plan,) = build_plans(good, {})
    assert plan.release == "pile" and plan.values["workers"] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text(good.read_text().replace("path: /fsx/data/pile", "path: /data/pile"))
    with pytest.raises(UserError) as raised:
        build_plans(bad, {})
    (problem,) = raised.value.problems
    assert problem.json_path == "$.output.path" and problem.line is not None
    assert "not under a mount (/fsx)" in problem.message
