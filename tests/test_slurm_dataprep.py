"""The data-prep stage on Slurm (docs/data-prep.md): a data-prep release is an sbatch array job running the
chart's own worker files, and the training release that waits for it (`dataFrom:` / `after:`) is submitted
with `--dependency=afterok:<array job id>`.

The render tests compare the script with the chart's manifest (the same bytes run on both targets); the
real-Slurm tests (tests/slurm_cluster.py, as tests/test_slurm_jobs.py) run the array job for real against
a loopback HTTP server serving gzip shards, with a stand-in tokenizer and a stand-in torchrun, and check
that training starts only after every task succeeded, and never when one failed.
"""

from __future__ import annotations

import gzip
import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from helm_nemo.dataprep import shards as shard_rules
from helm_nemo.targets import slurm_jobs
from helm_nemo.targets.slurm import SlurmJob

import slurm_cluster  # noqa: F401  (the `cluster` fixture's module)
from test_slurm_jobs import FAKE_TORCHRUN, cluster, helm_nemo  # noqa: F401  (session fixture reused)

pytestmark = pytest.mark.xdist_group("slurm")  # beside test_slurm_jobs.py, on its Slurm cluster

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "helm-nemo"
HELM = ROOT / ".tools" / "helm4" / "helm"

# A stand-in for preprocess_data_for_megatron.py: the documents' count and bytes as .bin/.idx, and a record
# of its call (which shard, when) beside the outputs.
FAKE_TOKENIZER = """#!/bin/bash
set -euo pipefail
input="$1" prefix="$2"
for key in ${DATA_PREP_JSON_KEYS:-text}; do
  cp -- "$input" "${prefix}_${key}_document.bin"
  wc -l < "$input" > "${prefix}_${key}_document.idx"
done
echo "$(basename "$prefix") $(date +%s.%N)" >> "$CALLS"
"""


class Shards(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass


@pytest.fixture()
def shard_server(tmp_path):
    folder = tmp_path / "served"
    folder.mkdir()
    sums = {}
    for number in range(4):
        body = "".join(json.dumps({"text": f"shard {number} doc {i}"}) + "\n" for i in range(3 + number))
        (folder / f"{number:02d}.jsonl.gz").write_bytes(gzip.compress(body.encode(), mtime=0))
        sums[f"{number:02d}"] = hashlib.sha256((folder / f"{number:02d}.jsonl.gz").read_bytes()).hexdigest()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Shards(*a, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", sums
    finally:
        server.shutdown()


def recipe(folder: Path, base_url: str, *, sha256: dict[str, str] | None = None, after: str = "dataFrom") -> Path:
    """storage-free recipe: data-prep (2 workers, shards 00-03) then a nemo-training that waits for it."""
    (folder / "config.yaml").write_text("name: megatron_gpt\ntrainer: {max_steps: 1}\n")
    tokenizer = folder / "tokenize.sh"
    tokenizer.write_text(FAKE_TOKENIZER)
    tokenizer.chmod(0o755)
    data = folder / "data"
    doc = {
        "recipe": "pile-on-slurm",
        "releases": [
            {
                "release": "pile",
                "chart": "data-prep",
                "values": {
                    "image": "nvcr.io/nvidia/nemo:24.07",
                    "workers": 2,
                    "shards": {
                        "urlPattern": base_url + "/{index}.jsonl.gz",
                        "numbers": "0-3",
                        **({"sha256": sha256} if sha256 else {}),
                    },
                    "tokenizer": {"command": [str(tokenizer)]},
                    "output": {"path": str(data / "pile")},
                    "volumes": {"pvcMounts": [{"claimName": "shared", "mountPath": str(data)}]},
                    "retries": {"delaySeconds": 1},
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                    "slurm": {
                        "container": False,
                        "partition": "debug",
                        "time": "00:05:00",
                        "claim_paths": {"shared": str(data)},
                    },
                },
            },
            {
                "release": "train",
                "chart": "nemo-training",
                "accelerator": "p4de",
                after: "pile" if after == "dataFrom" else ["pile"],
                "values": {
                    "files": {"nemo_config": "config.yaml"},
                    "volumes": {"pvcMounts": [{"claimName": "shared", "mountPath": str(data)}]},
                    "workload": {
                        "gpus": 8,
                        "image": "nvcr.io/nvidia/nemo:24.07",
                        "experimentRootDir": str(folder / "results"),
                        "experimentName": "exp",
                    },
                    "slurm": {
                        "container": False,
                        "gpus_per_node": None,
                        "partition": "debug",
                        "time": "00:05:00",
                        "claim_paths": {"shared": str(data)},
                    },
                },
            },
        ],
    }
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def chart_files(values_path: Path) -> dict[str, str]:
    """The data-prep release's ConfigMap files as helm renders them."""
    proc = subprocess.run(
        [str(CLI), "template", "--values", str(values_path)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "HELM_BIN": str(HELM)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for doc in yaml.safe_load_all(proc.stdout):
        if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"] == "pile-data-prep":
            return doc["data"]
    raise AssertionError("no pile-data-prep ConfigMap in the render")


def slurm_template(values_path: Path) -> str:
    proc = subprocess.run(
        [str(CLI), "template", "--target", "slurm", "--values", str(values_path)],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "HELM_BIN": str(HELM)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def heredoc_body(script: str, name: str) -> str:
    match = re.search(rf"cat > \"\$FILES/{re.escape(name)}\" <<'(\w+)'\n(.*?)\n\1\n", script, re.S)
    assert match, name
    return match.group(2) + "\n"


def test_array_job_carries_the_charts_files_byte_for_byte(tmp_path):
    path = recipe(tmp_path, "https://example.invalid/train")
    files = chart_files(path)
    script = slurm_template(path)
    prep = script.split("# ---- release train ----")[0]
    assert "#SBATCH --array=0-1" in prep and "#SBATCH --job-name=nemo-megatron-pile" in prep
    for name in ("prepare.sh", "tokenize.sh", "shards.tsv", "downloads.tsv"):
        if files[name]:
            assert heredoc_body(prep, name) == files[name], name
        else:
            assert f': > "$FILES/{name}"' in prep, name
    # the shard list is the rules' list, in order
    rows = [line.split("\t") for line in files["shards.tsv"].splitlines()]
    assert [r[0] for r in rows] == ["00", "01", "02", "03"]
    assert 'export DATA_PREP_INDEX="$SLURM_ARRAY_TASK_ID"' in prep
    # training gets the data prefix from the same shard list
    values = yaml.safe_load(path.read_text())["releases"][0]["values"]
    override = shard_rules.data_prefix_override(values)
    train = script.split("# ---- release train ----")[1]
    assert override in train


def test_dependency_flags_use_this_runs_job_ids():
    job = SlurmJob("train", "x", "", "/r", "/r/log", True, "", after=["pile"])
    assert slurm_jobs.dependency_flags(job, {"pile": "41"}) == ["--dependency=afterok:41"]
    job.dependency = "afterany:7"
    assert slurm_jobs.dependency_flags(job, {"pile": "41"}) == ["--dependency=afterok:41,afterany:7"]
    assert slurm_jobs.dependency_flags(SlurmJob("a", "x", "", "/r", "/r/l", True, ""), {"pile": "41"}) == []


def _ids(stdout: str) -> dict[str, str]:
    return dict(re.findall(r"submitted (\S+): job (\d+)", stdout))


@pytest.mark.parametrize("after", ["dataFrom", "after"])
def test_training_starts_only_after_every_task_succeeded(cluster, tmp_path, shard_server, after):  # noqa: F811
    base, sums = shard_server
    path = recipe(tmp_path, base, sha256=sums, after=after)
    env = cluster.env
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    env["CALLS"] = str(tmp_path / "calls")
    env["HELM_BIN"] = str(HELM)
    proc = helm_nemo("install", "--target", "slurm", "--values", str(path), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = _ids(proc.stdout)
    assert "array of 2 task(s)" in proc.stdout and "starts after pile succeeded" in proc.stdout
    assert cluster.job(ids["train"]).get("Dependency", "").startswith(f"afterok:{ids['pile']}")
    train = cluster.wait_state(ids["train"], {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}, timeout=120)
    assert train["JobState"] == "COMPLETED", train
    # every shard prepared once, outputs where training reads them, markers written
    markers = tmp_path / "data" / "pile" / shard_rules.MARKER_DIR
    assert sorted(p.name for p in markers.glob("*.done")) == ["00.done", "01.done", "02.done", "03.done"]
    calls = (tmp_path / "calls").read_text().split()
    assert sorted(calls[0::2]) == ["00", "01", "02", "03"]
    values = yaml.safe_load(path.read_text())["releases"][0]["values"]
    for prefix in shard_rules.output_prefixes(values):
        assert Path(prefix + ".bin").is_file() and Path(prefix + ".idx").is_file(), prefix
    last_shard = max(float(t) for t in calls[1::2])
    results = next((tmp_path / "results" / "exp").glob(f"nemo-megatron-train_{ids['train']}"))
    started = (results / "results" / "torchrun-node0.argv").stat().st_mtime
    assert started >= last_shard
    argv = (results / "results" / "torchrun-node0.argv").read_bytes().decode().split("\0")
    if after == "dataFrom":
        assert shard_rules.data_prefix_override(values) in argv
    # status: each task with its log and its share of the shards
    status = helm_nemo("status", "--target", "slurm", "--values", str(path), env=env)
    assert status.returncode == 0, status.stderr
    for task in (0, 1):
        assert re.search(
            rf"^pile: job {ids['pile']}_{task} COMPLETED .*log-nemo-megatron-pile_{ids['pile']}_{task}\.out$",
            status.stdout,
            re.M,
        ), status.stdout
    assert status.stdout.count("  data-prep: shards 2/2 done") == 2, status.stdout
    # each task logged its own shards: worker i took k % 2 == i
    logs = sorted((tmp_path / "data" / "pile" / ".helm-nemo" / "slurm").glob("log-*.out"))
    assert len(logs) == 2
    for log in logs:
        task = int(re.search(r"_(\d+)\.out$", log.name).group(1))
        done = re.findall(r"^helm-nemo data-prep: shard (\S+) done", log.read_text(), re.M)
        assert done == [f"{k:02d}" for k in range(4) if k % 2 == task], log.read_text()


def test_a_failed_task_keeps_training_from_ever_starting(cluster, tmp_path, shard_server):  # noqa: F811
    base, sums = shard_server
    sums = dict(sums, **{"03": "0" * 64})  # task 1's second shard does not match its checksum
    path = recipe(tmp_path, base, sha256=sums)
    env = cluster.env
    env["CALLS"] = str(tmp_path / "calls")
    env["HELM_BIN"] = str(HELM)
    proc = helm_nemo("install", "--target", "slurm", "--values", str(path), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ids = _ids(proc.stdout)
    deadline = time.monotonic() + 120
    info = cluster.job(ids["train"])
    while info.get("Reason") != "DependencyNeverSatisfied" and time.monotonic() < deadline:
        assert info.get("JobState") == "PENDING", info  # never started
        time.sleep(0.5)
        info = cluster.job(ids["train"])
    assert info.get("Reason") == "DependencyNeverSatisfied" and info.get("JobState") == "PENDING", info
    assert not list(tmp_path.rglob("torchrun-node*"))
    # the other shards were prepared; the mismatched one left nothing training could read
    data = tmp_path / "data" / "pile"
    assert (data / "02_text_document.bin").is_file()
    assert not (data / "03_text_document.bin").exists()
    status = helm_nemo("status", "--target", "slurm", "--values", str(path), env=env)
    assert re.search(rf"^pile: job {ids['pile']}_1 FAILED \(exit 1:0", status.stdout, re.M), status.stdout
    assert "data-prep: shards 1/2 done, 1 failed: shard 03 failed: sha256 mismatch" in status.stdout, status.stdout
    assert re.search(rf"^train: job {ids['train']} PENDING .*DependencyNeverSatisfied", status.stdout, re.M)
    cluster.run("scancel", ids["train"], check=False)
