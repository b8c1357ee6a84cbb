"""`template` and `lint` start `helm template` before validating (actions/early.py): helm gets the values
only when they are valid and the started command is exactly the one the plan needs; otherwise it is killed
having read nothing, and is never left running. install never starts helm before validation.

HELM_BIN here is a shell stand-in that logs its start (pid, time, argv), then reads stdin (`-f -`) and logs
that it did, then prints one ConfigMap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helm_nemo.actions import early, process

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "values/examples/a4-llama31-405b.yaml"
FAKE = """#!/bin/sh
echo "start $$ $(date +%s%N) $*" >> "$FAKE_LOG"
case " $* " in *" - "*) cat > "$FAKE_LOG.values"; echo "read $$" >> "$FAKE_LOG";; esac
printf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: fake\\n'
"""


@pytest.fixture
def fake(tmp_path):
    helm = tmp_path / "fake-helm"
    helm.write_text(FAKE)
    helm.chmod(0o755)
    log = tmp_path / "helm.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "HELM_BIN": str(helm),
        "FAKE_LOG": str(log),
        "GCS_BUCKET": "early-bucket",
        "KUEUE_NAME": "q",
        "PROJECT_ID": "early-project",
        "SOURCE_DATE_EPOCH": "1700000000",
        "HELM_NEMO_CACHE_DIR": "",
    }
    return helm, log, env


def cli(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(Path(sys.executable).parent / "helm-nemo"), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
    )


def entries(log: Path) -> list[list[str]]:
    return [line.split() for line in log.read_text().splitlines()] if log.exists() else []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_invalid_values_helm_started_early_never_reads_them_and_is_gone(fake, tmp_path):
    helm, log, env = fake
    values = tmp_path / "bad.yaml"
    values.write_text("accelerator: a4\nchart: jobset\nrelease: early-test\nworkload:\n  gpus: lots\n")
    for command in ("template", "lint"):
        log.unlink(missing_ok=True)
        marks = tmp_path / f"marks-{command}.json"
        proc = cli([command, "--values", str(values)], {**env, "HELM_NEMO_TIMINGS": str(marks)}, tmp_path)
        assert proc.returncode == 2, proc.stderr
        assert f"{values}:5:3: $.workload.gpus" in proc.stderr and "Nothing was sent to helm." in proc.stderr
        assert "ConfigMap" not in proc.stdout + proc.stderr  # nothing helm printed is shown
        assert "helm started (before validation)" in [name for name, _ in json.loads(marks.read_text())]
        started = [e for e in entries(log) if e[0] == "start"]  # (when it got as far as logging)
        assert all(e[3:] == ["template", "early-test", str(ROOT / "charts/a4/jobset"), "-f", "-"] for e in started)
        assert len(started) <= 1
        assert [e for e in entries(log) if e[0] == "read"] == []  # killed while waiting: no value reached it
        assert not any(alive(int(e[1])) for e in started)
        assert not (tmp_path / "helm.log.values").exists() or (tmp_path / "helm.log.values").read_text() == ""


def test_valid_values_go_to_the_helm_started_before_validation(fake, tmp_path):
    helm, log, env = fake
    marks = tmp_path / "marks.json"
    proc = cli(
        ["template", "--values", str(EXAMPLE), "--skip-manifest-validation"],
        {**env, "HELM_NEMO_TIMINGS": str(marks)},
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fake\n"
    (start, read) = entries(log)
    assert start[0] == "start" and read == ["read", start[1]]  # one helm, the one started first, got the values
    stages = [name for name, _ in json.loads(marks.read_text())]
    # started (our own record, in order) before validation ended, and no second helm after it
    assert stages.index("helm started (before validation)") < stages.index("values: load, substitute, schema")
    sent = json.loads((tmp_path / "helm.log.values").read_text())
    assert sent["release"] == "llama31-405b-a4" and sent["workload"]["gpus"] == 128
    assert sent["volumes"]["gcsMounts"][0]["bucketName"] == "early-bucket"


def test_install_never_starts_helm_before_validation(fake, tmp_path):
    helm, log, env = fake
    values = tmp_path / "bad.yaml"
    values.write_text("accelerator: a4\nchart: jobset\nrelease: early-test\nworkload:\n  gpus: lots\n")
    for command in ("install", "upgrade"):
        proc = cli([command, "--values", str(values)], env, tmp_path)
        assert proc.returncode == 2, proc.stderr
    assert entries(log) == []


def test_no_guess_no_early_start(fake, tmp_path):
    """A file whose chart or name is not a plain top-level line (a variable, quotes, a recipe) starts nothing
    early: helm runs once, after validation, as before."""
    helm, log, env = fake
    text = EXAMPLE.read_text().replace("release: llama31-405b-a4", "release: ${RUN_NAME}")
    values = EXAMPLE.parent / ".early-test-values.yaml"  # next to the example: its files: paths resolve
    values.write_text(text)
    marks = tmp_path / "marks.json"
    try:
        proc = cli(
            ["template", "--values", str(values), "--skip-manifest-validation"],
            {**env, "RUN_NAME": "named-later", "HELM_NEMO_TIMINGS": str(marks)},
            tmp_path,
        )
    finally:
        values.unlink()
    assert proc.returncode == 0, proc.stderr
    (start, read) = entries(log)
    assert start[3:5] == ["template", "named-later"] and read[0] == "read"
    assert "helm started (before validation)" not in [name for name, _ in json.loads(marks.read_text())]


@pytest.mark.parametrize(
    "text, release, expected",
    [
        ("accelerator: a4\nchart: jobset\nrelease: run-1\n", None, ("run-1", "charts/a4/jobset")),
        (
            "# a comment\nchart: jobset   # the workload\nrelease: run-1\naccelerator: a4\n",
            None,
            ("run-1", "charts/a4/jobset"),
        ),
        ("chart: supervisor\nrelease: sup\n", None, ("sup", "charts/supervisor")),
        ("accelerator: a4\nchart: jobset\nrelease: run-1\n", "from-cli", ("from-cli", "charts/a4/jobset")),
        ("accelerator: a4\nchart: jobset\n", "from-cli", ("from-cli", "charts/a4/jobset")),
        ("accelerator: a4\nchart: jobset\n", None, None),  # no name
        ("accelerator: a4\nchart: jobset\nrelease: ${NAME}\n", None, None),  # a variable
        ('accelerator: a4\nchart: jobset\nrelease: "run-1"\n', None, None),  # quoted
        ("accelerator: a4\nchart: jobset\nrelease: run-1\nrelease: run-2\n", None, None),  # twice
        ("releases:\n  - chart: jobset\n    release: a\n", "from-cli", None),  # a recipe names its own releases
        ("releases: [{chart: jobset, release: a}]\n", None, None),  # flow style
        ("accelerator: nope\nchart: jobset\nrelease: run-1\n", None, None),  # no such chart folder
        ("chart: ./my-chart\nrelease: run-1\n", None, None),  # a folder of the user's
        ("accelerator: a4\nchart: jobset\nrelease: Run_1\n", None, None),  # not a plain name: validation says why
        ("accelerator: a4\nchart: jobset\nrelease: run-1\n", "Bad Name", None),  # nor from the command line
        ("accelerator: ../a4\nchart: jobset\nrelease: run-1\n", None, None),  # never a path
        ("chart: ../../etc\nrelease: run-1\n", None, None),
    ],
)
def test_guess_release(tmp_path, text, release, expected):
    values = tmp_path / "v.yaml"
    values.write_text(text)
    guess = early.guess_releases(str(values), release)
    assert guess == (None if expected is None else [(expected[0], str(ROOT / expected[1]))])


def test_a_started_helm_is_used_for_exactly_its_command_and_killed_otherwise():
    proc = early.StartedHelm(["/bin/sh", "-c", "cat > /dev/null; echo used; echo note >&2"])
    other = early.StartedHelm(["/bin/sh", "-c", "cat > /dev/null; echo used"])
    early._started.extend([(["helm", "template", "a"], proc), (["helm", "template", "b"], other)])
    try:
        assert early.take(["helm", "template", "c"]) is None
        assert early.take(["helm", "template", "a"]) is proc
        assert proc.communicate("{}") == ("used\n", "note\n") and proc.returncode == 0
        started = time.monotonic()
        early.discard()
        assert other.returncode == -9 and time.monotonic() - started < 5
        assert early._started == []
    finally:
        for p in (proc, other):
            if p.poll() is None:
                process.kill(p)


def test_started_helm_moves_large_streams_both_ways_and_reports_exit_codes():
    text = "".join(f"line {i} \u00e9\n" for i in range(120_000))  # > 1 MB: more than any pipe holds
    echo = early.StartedHelm(["/bin/sh", "-c", "cat; echo done >&2; exit 3"])
    assert echo.communicate(text) == (text, "done\n") and echo.returncode == 3
    stopped = early.StartedHelm(["/bin/sh", "-c", "exec sleep 30"])
    assert stopped.poll() is None
    stopped.send_signal(15)
    assert stopped.wait() == -15 and stopped.poll() == -15
    os.close(os.dup(0))  # the pipes were closed: nothing leaked into this process's descriptors
    with pytest.raises(OSError):
        early.StartedHelm(["/nonexistent/helm", "template"])


def test_a_helm_that_cannot_start_early_is_left_to_the_usual_path(fake, tmp_path):
    helm, log, env = fake
    proc = cli(["template", "--values", str(EXAMPLE)], {**env, "HELM_BIN": str(tmp_path / "no-such-helm")}, tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "no-such-helm" in proc.stderr


def test_a_values_file_that_is_a_pipe_is_not_read_for_the_guess(fake, tmp_path):
    """`--values <(…)` or a FIFO: the guess must not take the text away from the real read (nor block)."""
    import threading

    helm, log, env = fake
    fifo = tmp_path / "values.fifo"
    os.mkfifo(fifo)
    text = "chart: supervisor\nrelease: sup\naccelerator: a3ultra\nproject: early-project\n"

    def write():
        with open(fifo, "w") as handle:
            handle.write(text)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    proc = cli(["template", "--values", str(fifo), "--skip-manifest-validation"], env, tmp_path)
    writer.join(5)
    assert proc.returncode == 0, proc.stderr
    (start, read) = entries(log)
    assert start[3:5] == ["template", "sup"] and read[0] == "read"
    assert json.loads((tmp_path / "helm.log.values").read_text())["project"] == "early-project"
    assert early.guess_releases(str(fifo), None) is None


def test_a_signal_during_validation_means_the_started_helm_never_gets_the_values():
    import signal

    from helm_nemo.actions import releases
    from helm_nemo.actions.helm import HelmBinary
    from helm_nemo.values.release_plan import ReleasePlan

    plan = ReleasePlan(
        release="r",
        chart_kind="jobset",
        accelerator="a4",
        chart="/charts/a4/jobset",
        chart_version=None,
        values={"a": 1},
        source=Path("v.yaml"),
        json_prefix=(),
    )
    helm = HelmBinary("/fake/helm")
    proc = early.StartedHelm(["/bin/sh", "-c", "cat > /dev/null; echo rendered"])
    early._started.append((releases._helm_args(helm, ["template"], plan, "-", []), proc))
    try:
        with process.forwarding_signals():
            process._State.received = signal.SIGTERM
            with pytest.raises(process.Interrupted):
                releases.render_all([plan], helm, [])
        assert proc.poll() is None  # never handed anything: still waiting for its values
    finally:
        early.discard()  # what the CLI does on its way out
    assert proc.returncode == -9


RECIPE_TEXT = """recipe: r
releases:
  # the supervisor
  - release: sup
    chart: supervisor
    values:
      accelerator: a3ultra
      watchdogs: [ecc, xid]
  - chart: gcs-fuse   # keys in any order
    release: store
    values:
      gcsVolumes:
        - name: ckpt
          release: not-this-one
          bucketName: b
  - release: train
    chart: jobset
    values:
      accelerator: a4
      release: train-from-values
      workload:
        gpus: 8
other: 1
"""


@pytest.mark.parametrize(
    "edit, expected",
    [
        (
            lambda t: t,
            [("sup", "charts/supervisor"), ("store", "charts/gcs-fuse"), ("train-from-values", "charts/a4/jobset")],
        ),
        (lambda t: t.replace("      accelerator: a4\n", ""), None),  # a per-accelerator chart with no accelerator
        (lambda t: t.replace("    chart: supervisor\n", "    chart: supervisor\n    version: 1.0.0\n"), None),
        (lambda t: t.replace("  - release: sup\n", "  -   release: sup\n"), None),
        (
            lambda t: t.replace(
                "    values:\n      accelerator: a3ultra\n      watchdogs: [ecc, xid]\n",
                "    values: {accelerator: a3ultra}\n",
            ),
            None,
        ),
        (
            lambda t: t.replace("  - release: train\n", "  - release: ${NAME}\n").replace(
                "      release: train-from-values\n", ""
            ),
            None,
        ),
    ],
)
def test_guess_recipe_releases(tmp_path, edit, expected):
    values = tmp_path / "recipe.yaml"
    values.write_text(edit(RECIPE_TEXT))
    guess = early.guess_releases(str(values), None)
    assert guess == (None if expected is None else [(name, str(ROOT / chart)) for name, chart in expected])


def test_the_guess_for_every_example_is_what_validation_plans():
    """Every shipped example (values files and recipes): the guess is exactly the validated plans' (release,
    chart)."""
    from helm_nemo.values.plan import build_plans
    from test_examples_golden import ENV, EXAMPLES  # the examples' golden tests' stand-ins for the variables

    for example in EXAMPLES:
        guess = early.guess_releases(str(example), None)
        assert guess == [(plan.release, plan.chart) for plan in build_plans(example, {**os.environ, **ENV})], (
            example.name
        )
