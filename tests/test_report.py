"""`helm nemo report` without a browser (tests/test_report_browser.py opens the pages in Chromium): the steps read
from the real GPU and public logs, the stall of the real hang, the page's size for a 10,000-step 2-pod run, the
command's exits, the sparklines of `status`, and that no other command imports the chart library."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "tests/logs/real/gpu"
PUBLIC = ROOT / "tests/logs/real/public"
NEMO = [sys.executable, "-m", "helm_nemo"]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def grown(source: Path, steps: int) -> str:
    """A `steps`-step run made of the real run's step lines, cycled: step k is the real line of step k mod N with
    its numbers set to k (`iteration k/steps-1`, `global_step: k`) and the kubelet's time moved so the steps come
    as far apart as the real ones did. The lines before the first step and after the last are kept as they are."""
    from helm_nemo.status.progress import parse_stamp

    lines = read(source).splitlines()
    index = [n for n, line in enumerate(lines) if "Training epoch" in line]
    head, body, tail = lines[: index[0]], [lines[n] for n in index], lines[index[-1] + 1 :]
    times = [parse_stamp(line.partition(" ")[0]) for line in body]
    gaps = [b - a for a, b in zip(times, times[1:])] + [times[1] - times[0]]
    out = list(head)
    at = times[0]
    for k in range(steps):
        real = body[k % len(body)].partition(" ")[2]
        real = re.sub(r"iteration \d+/\d+", f"iteration {k}/{steps - 1}", real)
        real = re.sub(r"global_step: \d+", f"global_step: {k}", real)
        out.append(f"{at.strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {real}")
        at += gaps[k % len(gaps)]
    shift = at - parse_stamp(tail[0].partition(" ")[0]) if tail else timedelta(0)
    for line in tail:
        stamp, _, rest = line.partition(" ")
        when = parse_stamp(stamp)
        out.append(f"{(when + shift).strftime('%Y-%m-%dT%H:%M:%S.%f')}000Z {rest}" if when else line)
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------
# The steps of real logs


def test_nemo2_steps_of_the_real_hang_and_the_step_time_from_the_kubelets_times():
    from helm_nemo.report.gather import from_text

    series = from_text("node-0.log", read(GPU / "hang/node-0.log"))
    assert series.format == "nemo2" and series.total == 60
    assert [p.step for p in series.points] == list(range(31))
    assert series.points[0].loss == 1.042 and series.points[-1].loss == 1.018
    # NeMo 2's printer states no step time: the time between two steps' lines is the step's
    assert not any(p.stated_time for p in series.points)
    assert series.points[0].step_time_s is None
    assert round(series.points[30].step_time_s, 3) == 90.102  # rank 1 hung: step 30 came 90 s after step 29
    assert 0.01 < series.points[5].step_time_s < 0.05


def test_megatron_lines_state_their_step_time_tflops_and_learning_rate():
    from helm_nemo.report.gather import from_text

    series = from_text("log.txt", read(PUBLIC / "megatron-lm-756-healthy-mixtral-h100/log.txt"))
    assert series.format == "megatron" and series.total == 100
    first = series.points[0]
    assert (first.step, first.loss, first.lr, first.step_time_s, first.tflops) == (42, 1.825991, 8.6e-06, 5.4449, 239.8)
    assert first.stated_time and first.at is not None and first.at.isoformat().startswith("2024-04-06T02:59:36")


def test_the_hang_report_holds_one_stall_the_cause_and_its_consequences_in_time_order():
    from helm_nemo.report.gather import from_files

    report = from_files([str(GPU / "hang")])
    assert [(s.step, s.after, round(s.seconds)) for s in report.stalls] == [(29, 30, 90)]
    cause = report.diagnosis.cause
    assert (cause.klass, Path(cause.source).name, cause.rank) == ("nccl-timeout", "node-0.log", "0")
    excerpt = report.excerpts[id(cause)]
    assert report.anchor(cause) == "ev0" and excerpt.hits[cause.line] == "ev0"
    assert excerpt.first <= cause.line < excerpt.first + len(excerpt.lines)
    # node-0's events 64, 68, 72–74 are close: one excerpt holds them, each line with its own anchor
    node0 = [b for b in report.blocks if b.source.endswith("node-0.log")]
    assert len(node0) < len([e for e in report.diagnosis.consequences if e.source.endswith("node-0.log")]) + 1
    assert all(b.first + len(b.lines) < c.first for b, c in zip(node0, node0[1:]))
    assert "Watchdog caught collective operation timeout" in excerpt.lines[cause.line - excerpt.first]
    roles = {Path(row.name).name: row.role for row in report.pods}
    assert roles == {"node-0.log": "first cause", "node-1.log": "consequence"}


def test_a_healthy_run_with_values_draws_tokens_tflops_and_mfu():
    from helm_nemo.report.charts import build
    from helm_nemo.report.gather import from_files
    from helm_nemo.status.progress import run_inputs

    run = run_inputs(str(ROOT / "values/examples/a3mega-gpt3-175b.yaml"))
    report = from_files([str(GPU / "healthy-2node")], run=run)
    assert report.diagnosis.cause is None and report.stalls == []
    keys = {c.key for c in build(report)}
    assert keys == {f"{k}-{a}" for k in ("loss", "step-time", "tokens", "tflops", "mfu") for a in ("step", "time")}
    median = report.step_median
    tokens = run.inputs["batch_size"].value * run.names["seq_len"]
    assert report.tokens_per_step == tokens and 0.015 < median < 0.025


def test_downsampling_keeps_each_slices_extremes():
    from helm_nemo.report.charts import downsample

    points = [(float(x), float(x % 7)) for x in range(10_000)]
    points[5000] = (5000.0, 1000.0)  # a spike survives
    kept = downsample(points, buckets=100)
    assert len(kept) <= 200 and (5000.0, 1000.0) in kept and kept == sorted(kept)
    assert {y for _, y in kept} >= {0.0, 6.0, 1000.0}


# --------------------------------------------------------------------------------------------------
# Size


def test_a_two_pod_run_of_10000_steps_is_under_one_megabyte(tmp_path):
    """The issue's bound: a page small enough to attach to an issue."""
    big = tmp_path / "run"
    big.mkdir()
    (big / "node-0.log").write_text(grown(GPU / "healthy-2node/node-0.log", 10_000))
    (big / "node-1.log").write_text(read(GPU / "healthy-2node/node-1.log"))
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [
            *NEMO,
            "report",
            "--file",
            str(big),
            "-o",
            str(out),
            "-f",
            str(ROOT / "values/examples/a3mega-gpt3-175b.yaml"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    size = out.stat().st_size
    print(f"2 pods, 10,000 steps: {size / 1024:.0f} KiB")
    assert size <= 1_000_000
    page = out.read_text()
    assert "steps 0–9999 of 10000" in page
    assert page.count('data-chart="') == 10


# --------------------------------------------------------------------------------------------------
# The command


def test_nemo_progress_lines_carry_the_last_validation_loss_once_and_the_page_draws_it(tmp_path):
    """A real NeMo log (bionemo-recipes PR 740): Lightning's progress line repeats the last `val_loss` on every
    step; the series holds it once, at the first step that states it, and the loss chart draws it as a dot."""
    from helm_nemo.report.gather import from_text

    source = ROOT / "tests/logs/real/heldout/bionemo-recipes-740-healthy-esm2-iterations"
    series = from_text("log.txt", read(source / "log.txt"))
    assert [p.step for p in series.points] == list(range(120, 126))
    assert series.points[0].loss == 1.233 and series.points[-1].loss == 1.34
    assert series.val == [(120, None, 4.106)]
    out = tmp_path / "r.html"
    proc = subprocess.run(
        [*NEMO, "report", "--file", str(source), "-o", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert 'data-series="val-loss"' in page and "validation loss" in page


def test_report_command_writes_the_page_and_says_the_verdict(tmp_path):
    out = tmp_path / "sub" / "r.html"
    proc = subprocess.run(
        [*NEMO, "report", "--file", str(GPU / "cuda-oom"), "-o", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(f"wrote {out} (") and "FAILED: cuda-oom" in proc.stderr
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert re.findall(r'(?:src|href)="(?!#)[^"]*"', page) == []  # no reference but the page's own anchors


@pytest.mark.parametrize(
    "args, words",
    [
        (["--file", "no-such.log"], "no-such.log: no such file or folder"),
        (["--file", str(GPU / "hang"), "--preflight", "BAD"], "BAD:2:3: $: not JSON: Expecting property name"),
        (["--file", str(GPU / "hang"), "--preflight", "NOCHECKS"], "NOCHECKS: $.checks: no list of checks"),
    ],
)
def test_bad_input_is_one_message_and_exit_2(tmp_path, args, words):
    (tmp_path / "BAD").write_text("{\n  nope\n}\n")
    (tmp_path / "NOCHECKS").write_text(json.dumps({"ok": True}))
    proc = subprocess.run(
        [*NEMO, "report", *args, "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "hint:" in proc.stderr
    assert proc.stderr.startswith(words), proc.stderr
    assert not (tmp_path / "r.html").exists()


def test_preflight_results_are_shown(tmp_path):
    from helm_nemo.report.gather import from_files
    from helm_nemo.report.render import html

    saved = tmp_path / "preflight.json"
    saved.write_text(
        json.dumps({"checks": [{"id": "capacity.gpus", "verdict": "fail", "message": "16 GPUs asked, 8 free"}]})
    )
    page = html(from_files([str(GPU / "hang")], preflight=[str(saved)]))
    assert "capacity.gpus" in page and "16 GPUs asked, 8 free" in page


# --------------------------------------------------------------------------------------------------
# status's sparklines


def test_sparkline_levels_and_the_ascii_fallback():
    from helm_nemo.status.sparkline import line, sparkline

    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8]) == "▁▂▃▄▅▆▇█"
    assert sparkline([1, 2, 3, 4, 5, 6, 7, 8], unicode=False) == "_.,-~=*#"
    assert sparkline([2.0, 2.0]) == "▄▄" and sparkline([1.0, float("nan"), 3.0]) == "▁ █"
    drawn = line("loss", [3.0, 2.0, 1.0], unicode=False)
    assert drawn.isascii() and "#~_" in drawn and "3 -> 1" in drawn


@pytest.mark.parametrize("encoding, unicode", [("utf-8", True), ("UTF8", True), ("ascii", False), ("cp1252", False)])
def test_the_terminals_encoding_decides(encoding, unicode):
    import io

    from helm_nemo.status.sparkline import utf8_terminal

    assert utf8_terminal(io.TextIOWrapper(io.BytesIO(), encoding=encoding)) is unicode


def test_status_text_shows_the_last_steps_loss_and_step_time():
    """A real Megatron log (the last rank's lines) read as status reads a tail."""
    from helm_nemo.status.cluster import ReleaseStatus
    from helm_nemo.status.progress import progress
    from helm_nemo.status.render import text
    from helm_nemo.status.workloads import workload_state

    log = read(PUBLIC / "megatron-llm-11-healthy-iterations/log.txt")
    status = ReleaseStatus("run", "ml", workload=workload_state({"kind": "JobSet", "metadata": {"name": "run"}}))
    status.progress = progress(log)
    status.rank0 = "run-workload-0-0"
    assert status.progress.recent_loss == [2.50422, 2.493043, 2.559583, 2.477393]
    assert [round(s, 4) for s in status.progress.recent_step_s] == [86.5452, 87.8716, 89.4748, 89.0752]
    shown = text([status], unicode=True)
    assert "    loss      ▃▂█▁  2.504 → 2.477" in shown, shown
    assert "    step time ▁▄█▇  86.55 s → 89.08 s" in shown, shown
    plain = text([status], unicode=False)
    assert "    loss      ,.#_  2.504 -> 2.477" in plain, plain
    assert all(line.isascii() for line in plain.splitlines() if line.endswith("last 4 steps)")), plain


def test_no_other_command_imports_the_chart_library():
    """status (its sparklines included), logs --errors and metrics never import leather or the report's page."""
    code = (
        "import sys\n"
        "import helm_nemo.cli.group, helm_nemo.cli.observe, helm_nemo.actions.status\n"
        "from helm_nemo.status.progress import progress\n"
        "from helm_nemo.status import render\n"
        f"p = progress(open({str(PUBLIC / 'megatron-llm-11-healthy-iterations/log.txt')!r}).read())\n"
        "from helm_nemo.diagnose import diagnose_paths\n"
        f"diagnose_paths([{str(GPU / 'hang')!r}])\n"
        "print(p.recent_loss != [], sorted(m for m in sys.modules if m.startswith(('leather', 'jinja2',"
        " 'helm_nemo.report.'))))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert proc.stdout.strip() == "True ['helm_nemo.report.series']", proc.stdout


def test_a_long_log_read_in_windows_finds_the_same_stall_and_median_as_every_line(monkeypatch):
    """bench/report_bench.py's rank-0 log (real healthy steps, then the real hang's rank 0), 8 MB: the windows
    find the 90 s pause at the very step every-line reading finds it, and about the same median and p95."""
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    from datetime import UTC, datetime

    from failed_at_scale import failed_run
    from report_bench import rank0_log

    from helm_nemo.report import reading
    from helm_nemo.report.model import percentile, stalls

    log, steps = rank0_log(failed_run(2, 1, datetime(2026, 11, 26, 21, 0, tzinfo=UTC))[0].log, 8)
    sampled = reading.from_text("rank0", log)
    monkeypatch.setattr(reading, "FULL_BYTES", len(log) + 1)
    exact = reading.from_text("rank0", log)
    assert sampled.sampled and not exact.sampled
    assert len(exact.points) == steps and sampled.read_steps < steps / 10
    assert (sampled.points[0].step, sampled.points[-1].step) == (0, steps - 1)

    def figures(series):
        times = [p.step_time_s for p in series.points if p.step_time_s is not None]
        median = percentile(times, 0.5)
        return (
            median,
            percentile(times, 0.95),
            [(s.step, s.after, round(s.seconds)) for s in stalls(series, median, None)],
        )

    (m1, p1, s1), (m2, p2, s2) = figures(sampled), figures(exact)
    assert s1 == s2 == [(steps - 2, steps - 1, 90)]
    assert abs(m1 - m2) / m2 < 0.02 and abs(p1 - p2) / p2 < 0.05


def test_report_of_a_failed_16_pod_jobset_on_the_emulator(tmp_path):
    """tests/failed_at_scale.py's run (real GPU logs: rank 13's CUDA OOM, every other rank's watchdog 30 s later) on
    the loopback emulator, through `helm nemo report RELEASE` as a user runs it: the page names rank 13's pod, links
    its line to an excerpt holding it, and has a timeline row per pod with its exit code."""
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    from datetime import UTC, datetime, timedelta

    from failed_at_scale import OOM_LINE, failed_run
    from kube_emulator import KubeEmulator
    from real_cluster_bench import ENV, FAILED_RELEASE, NAMESPACE, failed_emulator

    runs = failed_run(16, 13, datetime.now(UTC) - timedelta(minutes=30))
    with KubeEmulator(ready=False) as kube:
        names = failed_emulator(kube, runs, tmp_path)
        env = {**ENV, "HOME": str(tmp_path), "KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc", namespace=NAMESPACE))}
        out = tmp_path / "r.html"
        proc = subprocess.run(
            [*NEMO, "report", FAILED_RELEASE, "-n", NAMESPACE, "-o", str(out)], env=env, capture_output=True, text=True
        )
    assert proc.returncode == 0, proc.stderr
    assert f"FAILED: cuda-oom in {names[13]}" in proc.stderr
    page = out.read_text()
    assert f'first cause: <a href="#ev0">{names[13]} line ' in page
    assert OOM_LINE in page.split('<span class="hit" id="ev0">', 1)[1].split("</span>", 1)[0]
    assert page.count('class="lane"') == 16 and all(f'data-pod="{name}"' in page for name in names.values())
    assert page.count("exit 137") == 1 and page.count("exit 1 ") + page.count("exit 1<") >= 15


def test_the_emulator_serves_the_windows_by_tail_lines(tmp_path):
    """The loopback emulator answers `tailLines` and `limitBytes` as the kubelet does (not `sinceTime`): the report
    asks for rank 0's windows by their place from the end, never by time, fetches a small part of the log, and
    still spans every step (fetch.py; tests/test_report_fetch.py for the placement and the fallbacks)."""
    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "tests"))
    from datetime import UTC, datetime, timedelta

    from failed_at_scale import failed_run
    from kube_emulator import KubeEmulator
    from real_cluster_bench import ENV, FAILED_RELEASE, NAMESPACE, failed_emulator
    from report_bench import rank0_log

    from helm_nemo.report import fetch

    runs = failed_run(4, 1, datetime.now(UTC) - timedelta(minutes=30))
    runs[0].log, steps = rank0_log(runs[0].log, 3)
    assert len(runs[0].log) > fetch.HEAD_BYTES
    with KubeEmulator(ready=False) as kube:
        failed_emulator(kube, runs, tmp_path)
        env = {**ENV, "HOME": str(tmp_path), "KUBECONFIG": str(kube.kubeconfig(tmp_path / "kc", namespace=NAMESPACE))}
        out = tmp_path / "r.html"
        proc = subprocess.run(
            [*NEMO, "report", FAILED_RELEASE, "-n", NAMESPACE, "-o", str(out)], env=env, capture_output=True, text=True
        )
        logs = [r.query for r in kube.requests if r.path.endswith("/log")]
    assert proc.returncode == 0, proc.stderr
    windows = [q for q in logs if q.get("limitBytes") == str(fetch.WINDOW_BYTES)]
    assert len(windows) >= fetch.WINDOWS and all("tailLines" in q for q in windows)
    assert not any("sinceTime" in q for q in logs) and all("limitBytes" in q or "tailLines" in q for q in logs)
    page = out.read_text()
    assert f"steps 0–{steps - 1} of {steps}" in page and "windows placed near evenly spaced times" in page
