"""The benchmarks still run: `bench/run.py --quick` (one cold round of every figure, targets not judged), so a
bench broken by a change fails `make test` instead of the next `make bench` (issue 36: a missing CHANGELOG.md
in bench_generate's copy stopped the whole bench and nothing noticed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Every figure `make bench` reports, by the name its line starts with; a figure dropped from the bench fails here.
FIGURES = (
    "template",
    "template_helm3",
    "plugin",
    "recipe",
    "scale",
    "generate",
    "check",
    "validate",
    "preflight",
    "status",
    "diagnose",
)


def test_every_benchmark_runs_once(tmp_path):
    output = tmp_path / "quick.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/run.py"), "--quick", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    printed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert set(FIGURES) <= printed, f"figures not printed: {set(FIGURES) - printed}\n{proc.stdout}"
    assert "failed" not in proc.stdout and "targets not judged (--quick)" in proc.stdout, proc.stdout
    result = json.loads(output.read_text())
    assert result["quick"] and result["failed"] == [] and result["rounds"] == 1
    for pair in ("template", "template_helm3", "plugin", "recipe", "scale"):
        assert result[pair]["ratio"] > 0 and result[pair]["a_stats"]["n"] == 1, pair
    assert result["generate"]["stats"]["median"] > 0 and result["check"]["stats"]["median"] > 0
    assert result["validate"]["documents"] == 1000 and result["validate"]["rounds"] == 1
    assert result["preflight"]["nodes"] == 1000 and result["preflight"]["rounds"] == 1
    assert result["status"]["pods"] == 512 and result["status"]["rounds"] == 1
    assert result["diagnose"]["seconds"] > 0


def test_quick_and_check_exclude_each_other():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/run.py"), "--quick", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "--quick measures one cold round" in proc.stderr


@pytest.mark.cluster
def test_real_cluster_bench_runs_at_a_tiny_size():
    """`make bench-real`'s setup and rounds (its own control plane in `large` mode, the preflight and status
    states, kwok running them, both clusters answering) at 10 nodes, 20 pods and a 2-pod JobSet."""
    if os.environ.get("HELM_NEMO_SKIP_CLUSTER") == "1":
        pytest.skip("HELM_NEMO_SKIP_CLUSTER=1: the real control plane was not started")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench/real_cluster_bench.py"), "--quick", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr[-4000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["nodes"], result["pods"], result["rounds"]) == (10, 20, 1)
    preflight, status = result["preflight"], result["status"]
    assert preflight["emulator"]["n"] == preflight["real"]["n"] == 1
    assert preflight["same_capacity_answer"], (preflight["emulator_verdicts"], preflight["real_verdicts"])
    assert status["pods"] == 2 and status["real"]["n"] == status["emulator"]["n"] == 1
    assert {"control plane start", "kwok: 20 pods Running"} <= set(result["setup_seconds"])
