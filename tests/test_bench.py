"""The benchmarks still run: `bench/run.py --quick` (one cold round of every figure, targets not judged), so a
bench broken by a change fails `make test` instead of the next `make bench` (issue 36: a missing CHANGELOG.md
in bench_generate's copy stopped the whole bench and nothing noticed).

The targets are ratios to a reference measured in the same rounds (bench/reference.py, issue 41): how a row is
judged is tested here with fixed numbers, never with timings (no test here asserts how fast anything is)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def load(name: str):
    """A bench module by its file (bench/ is no package)."""
    sys.path.insert(0, str(ROOT / "bench"))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    "report",
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
    assert result["report"]["cluster"] == "emulator" and result["report"]["pods"] == 16  # --quick: its code paths
    # Every target of the list measured beside its reference, in the table and the JSON.
    targets = load("reference").TARGETS
    assert [row["key"] for row in result["targets"]] == [t.key for t in targets]
    for row in result["targets"]:
        assert row["rounds"] == 1 and row["seconds"] > 0 and row["reference_seconds"] > 0, row
        assert row["ratio"] == pytest.approx(row["seconds"] / row["reference_seconds"]), row
    assert "targets against a reference measured in the same rounds" in proc.stdout
    table = {line.split()[0]: line for line in proc.stdout.splitlines() if "(not judged: --quick)" in line}
    assert {t.key for t in targets} <= set(table), proc.stdout


def test_a_machine_twice_as_slow_misses_the_seconds_not_the_ratio():
    """The same code measured on a machine where everything (figure and reference) takes twice as long: the old
    target in seconds is missed, the ratio is the same and still met."""
    reference = load("reference")
    entry = reference.Target("status", "status", "json.loads", limit=5.0, absolute=1.0)
    here = reference.judge(entry, [0.62, 0.55, 0.58], [0.125, 0.120, 0.130])
    slower = reference.judge(entry, [1.24, 1.10, 1.16], [0.250, 0.240, 0.260])
    assert (here["seconds"], here["absolute_ok"], here["ok"]) == (0.58, True, True)
    assert (slower["seconds"], slower["absolute_ok"], slower["ok"]) == (1.16, False, True)
    assert here["ratio"] == pytest.approx(slower["ratio"]) == pytest.approx(0.55 / 0.120)
    assert here["reference_seconds"] == 0.125 and slower["reference_seconds"] == 0.25


def test_the_ratio_is_the_median_of_each_rounds_own_ratio():
    """A load spike that hits one round slows both halves of it: the round's ratio stays; the median of the
    rounds' ratios ignores the rest of the spike where a ratio of the medians would not."""
    reference = load("reference")
    entry = reference.Target("diagnose", "d", "r", limit=2.0, absolute=1.0)
    row = reference.judge(entry, [1.0, 1.0, 3.0, 3.0, 3.2], [0.6, 0.6, 1.9, 2.0, 2.0])
    # rounds' ratios 1.67, 1.67, 1.58, 1.5, 1.6 -> median 1.6; the ratio of the medians would be 3.0 / 1.9 = 1.58
    assert row["ratio"] == pytest.approx(1.6) and row["ok"]
    assert row["seconds"] == 3.0 and row["reference_seconds"] == 1.9 and not row["absolute_ok"]
    over = reference.judge(entry._replace(limit=1.59), [1.0, 1.0, 3.0, 3.0, 3.2], [0.6, 0.6, 1.9, 2.0, 2.0])
    assert not over["ok"]
    with pytest.raises(ValueError, match="3 samples beside 2"):
        reference.judge(entry, [1.0, 1.0, 1.0], [1.0, 1.0])
    with pytest.raises(ValueError):
        reference.judge(entry, [], [])


def test_the_table_prints_both_times_the_ratio_and_the_seconds_as_information():
    reference = load("reference")
    entry = reference.Target("preflight", "p", "r", limit=2.0, absolute=1.5)
    rows = [reference.judge(entry, [1.78], [0.8]), reference.judge(entry._replace(key="status"), [3.0], [1.0])]
    header, met, missed = reference.table(rows)
    assert header.split()[:5] == ["target", "measured", "reference", "ratio", "limit"]
    assert met.split() == ["preflight", "1.780s", "0.800s", "2.23", "2.00", "1.780", "s", ">", "1.5", "s", "MISSED"]
    assert missed.split()[-1] == "MISSED" and "3.000 s > 1.5 s" in missed
    ok = reference.table([reference.judge(entry, [1.0], [0.8])])[1]
    assert ok.split()[3:] == ["1.25", "2.00", "1.000", "s", "<=", "1.5", "s", "ok"]
    quick = reference.table(rows, judged=False)[1]
    assert quick.endswith("(not judged: --quick)") and "MISSED" not in quick


def test_the_targets_are_data_that_run_py_judges():
    """Every target is a figure run.py measures; a measured one becomes a row, a failed one does not (it is
    reported as failed), and --check's verdict follows the ratio, never the seconds."""
    reference, run = load("reference"), load("run")
    keys = [t.key for t in reference.TARGETS]
    assert len(keys) == len(set(keys)) and set(keys) <= set(FIGURES)
    assert all(t.limit > 0 and t.absolute > 0 and t.figure and t.reference for t in reference.TARGETS)
    result = {
        "status": {"samples": [2.0, 2.2], "reference_samples": [1.0, 1.0]},  # 2.1 s > 1.0 s, ratio 2.1
        "diagnose": {"error": "wrong answer"},
        "generate": {"samples": [9.0], "reference_samples": [1.0]},  # ratio 9
    }
    rows = run.judged_rows(result, failed=["diagnose"])
    assert [r["key"] for r in rows] == [k for k in keys if k in ("status", "generate")]
    by_key = {r["key"]: r for r in rows}
    assert by_key["status"]["ratio"] == pytest.approx(2.1) and not by_key["status"]["absolute_ok"]
    assert by_key["status"]["ok"] == (2.1 <= reference.target("status").limit)
    assert not by_key["generate"]["ok"]


def test_the_reference_workloads_run_and_refuse_an_unknown_kind(tmp_path):
    """Each reference reads what it is given (the timing is the bench's business, not the test's)."""
    import http.server
    import threading
    from functools import partial

    reference = load("reference")
    (tmp_path / "pods.json").write_text(json.dumps({"items": [{"kind": "Pod"}] * 3}))
    (tmp_path / "log.txt").write_text("step 1\nRuntimeError: CUDA out of memory\n")
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "a.yaml").write_text("a: 1\n---\nb: 2\n")
    (tmp_path / "tree" / "b.json").write_text("{}")
    (tmp_path / "tree" / "c.yaml").write_text("x: {{ .Values.x }}\n")  # a template: stops at the same place
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{server.server_address[1]}"
        import gc

        try:  # _get pauses the collector for the rest of its process (the bench's fresh one); not this one's
            assert reference._get([f"{base}/pods.json", f"{base}/log.txt"], 2) == 2 * (3 + 2)
        finally:
            gc.enable()
        proc = subprocess.run(reference.command("get", f"{base}/pods.json"), capture_output=True, text=True)
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert reference._scan(str(tmp_path / "log.txt")) == 2 + 1
    assert reference.main(["yaml", str(tmp_path / "tree"), "--copy", str(tmp_path / "tree"), str(tmp_path / "c")]) == 0
    assert not (tmp_path / "c").exists()
    assert reference._tree([str(tmp_path / "tree")]) == 3
    (tmp_path / "empty").mkdir()
    assert reference.main(["tree", str(tmp_path / "empty")]) == 1  # nothing read: no reference at all
    assert reference.main(["nonsense"]) == 2


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
