"""`helm nemo install|status|uninstall --target slurm` against a real Slurm: Debian's slurmctld, slurmd and
munged started for the session (tests/slurm_cluster.py; `WITH_SLURM=1 scripts/setup.sh` installs them, and
`make test` does). No mock: jobs are submitted with sbatch, run by slurmd, cancelled with scancel.

The jobs run the generated script in its container-less mode (`slurm.container: false`: no Pyxis or GPUs
here) with a stand-in `torchrun` on PATH that writes its arguments and environment into the job's results
directory (and sleeps when asked, for scancel)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import slurm_cluster

ROOT = Path(__file__).resolve().parent.parent
CLI = Path(sys.executable).parent / "helm-nemo"
HOSTILE = [
    "a; touch PWNED",
    "$(touch PWNED)",
    "`touch PWNED`",
    'it\'s "quoted" \\',
    "two\nlines",
    "${NOT_SET} $HOME",
    "* ~ [x]",
    "",
    "--looks=like-a-flag",
    "é ✓",
]
FAKE_TORCHRUN = """#!/bin/bash
# stand-in for torchrun: record argv and env (NUL-separated) in the job's results directory
out="$RESULTS_DIR/results/torchrun-node$NODE_RANK"
printf '%s\\0' "$@" > "$out.argv"
env -0 > "$out.env"
echo $$ > "$out.pid"
echo "torchrun stand-in: $# argument(s) on $(hostname -s)"
if [ -n "${FAKE_TORCHRUN_SLEEP:-}" ]; then sleep "$FAKE_TORCHRUN_SLEEP"; echo finished > "$out.finished"; fi
"""
TIMINGS: dict[str, float] = {}
# One worker for the tests on the session's Slurm cluster (this module and test_slurm_dataprep.py) under pytest-xdist:
# one cluster, as in a serial run.
pytestmark = pytest.mark.xdist_group("slurm")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    missing = slurm_cluster.missing_binaries()
    if missing:
        pytest.fail(
            f"Slurm is not installed (missing {', '.join(missing)}): run `WITH_SLURM=1 scripts/setup.sh` "
            "(make test and .ci/run do)"
        )
    folder = Path(f"/tmp/helm-nemo-slurm-{os.getpid()}")  # short: munge's socket path has a length limit
    started = time.monotonic()
    cluster = slurm_cluster.start(folder)
    TIMINGS["cluster start"] = time.monotonic() - started
    try:
        yield cluster
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(folder)], check=False)
        if TIMINGS:
            print("\nSlurm timings: " + ", ".join(f"{k} {v:.2f} s" for k, v in TIMINGS.items()), file=sys.stderr)


@pytest.fixture()
def job_env(cluster, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "torchrun").write_text(FAKE_TORCHRUN)
    (bin_dir / "torchrun").chmod(0o755)
    env = cluster.env
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    return env


def values_file(
    folder: Path, *, release: str = "smoke", args: list[str] = (), envs: dict[str, str] | None = None, slurm: str = ""
) -> Path:
    (folder / "config.yaml").write_text("name: megatron_gpt\ntrainer: {max_steps: 1}\n")
    lines = [
        f"release: {release}",
        "chart: nemo-training",
        "accelerator: p4de",
        "files: {nemo_config: config.yaml}",
        "workload:",
        "  gpus: 8",
        "  image: nvcr.io/nvidia/nemo:24.07",
        f"  experimentRootDir: {folder / 'results'}",
        "  experimentName: exp",
        "  arguments:",
        *[f"    - {json.dumps(a.replace('$', '$$'))}" for a in args],
        "  envs:",
        *[f"    - {{name: {k}, value: {json.dumps(v.replace('$', '$$'))}}}" for k, v in (envs or {}).items()],
        "slurm:",
        "  container: false",
        "  gpus_per_node: null",
        "  partition: debug",
        "  time: '00:05:00'",
        *[f"  {line}" for line in slurm.splitlines()],
    ]
    path = folder / "values.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def helm_nemo(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], env=env, capture_output=True, text=True, timeout=120)


def submitted(proc: subprocess.CompletedProcess) -> tuple[str, Path, Path]:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job_id = re.search(r"submitted \S+: job (\d+)", proc.stdout).group(1)
    results = Path(re.search(r"results: (\S+)", proc.stdout).group(1))
    log = Path(re.search(r"log: +(\S+)", proc.stdout).group(1))
    return job_id, results, log


def read0(path: Path) -> list[str]:
    return path.read_bytes().decode().split("\0")[:-1]


def test_install_runs_the_job_with_env_and_arguments_intact(cluster, job_env, tmp_path):
    envs = {f"HOSTILE_{i}": h for i, h in enumerate(HOSTILE)}
    envs["HF_TOKEN"] = "${HF_TOKEN}"
    values = values_file(
        tmp_path,
        args=HOSTILE + ["trainer.num_nodes=${NNODES}"],
        envs=envs,
        slurm="env: {WANDB_API_KEY: '${MY_WANDB_KEY}'}",
    )
    job_env.update(HF_TOKEN="hf-secret-1", MY_WANDB_KEY="wandb-secret-2")
    started = time.monotonic()
    proc = helm_nemo("install", "--target", "slurm", "--values", str(values), env=job_env)
    job_id, results, log = submitted(proc)
    TIMINGS["install (sbatch, write, release)"] = time.monotonic() - started
    info = cluster.wait_state(job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"})
    TIMINGS["submit to completed (1 node)"] = time.monotonic() - started
    assert info["JobState"] == "COMPLETED", log.read_text() if log.exists() else info

    # the unique results directory of this job, with what NeMo-Launcher keeps next to the results
    assert results == tmp_path / "results" / "exp" / f"nemo-megatron-smoke_{job_id}"
    assert log == tmp_path / "results" / "exp" / f"log-nemo-megatron-smoke_{job_id}.out" and log.exists()
    assert "torchrun stand-in" in log.read_text()
    for name in ("submission.sh", "resolved-values.yaml", "nemo-config.yaml", "launcher.log", "cmd-args.log"):
        assert (results / name).is_file(), name
    assert f"job {job_id}: sbatch --parsable --hold" in (results / "launcher.log").read_text()

    argv = read0(results / "results" / "torchrun-node0.argv")
    assert argv[-len(HOSTILE) - 1 :] == HOSTILE + ["trainer.num_nodes=1"]
    assert f"--config-path={results}" in argv and f"++exp_manager.explicit_log_dir={results}/results" in argv
    env = dict(item.split("=", 1) for item in read0(results / "results" / "torchrun-node0.env"))
    for key, value in envs.items():
        if key.startswith("HOSTILE_"):
            assert env[key] == value, key
    assert env["HF_TOKEN"] == "hf-secret-1" and env["WANDB_API_KEY"] == "wandb-secret-2"
    assert (
        env["FI_PROVIDER"] == "efa"
        and env["NNODES"] == "1"
        and env["JOB_IDENTIFIER"] == f"nemo-megatron-smoke_{job_id}"
    )
    assert not list(tmp_path.rglob("PWNED")) and not list(Path.cwd().glob("PWNED"))

    # secrets reached the job through the environment, never a file
    for path in results.rglob("*"):
        if path.is_file() and not path.name.endswith(".env"):
            text = path.read_bytes()
            assert b"hf-secret-1" not in text and b"wandb-secret-2" not in text, path

    status = helm_nemo("status", "--target", "slurm", "--values", str(values), env=job_env)
    assert status.returncode == 0, status.stderr
    assert f"smoke: job {job_id} COMPLETED (exit 0:0" in status.stdout


def test_every_job_gets_its_own_results_directory(cluster, job_env, tmp_path):
    values = values_file(tmp_path, release="twice")
    first = submitted(helm_nemo("install", "--target", "slurm", "--values", str(values), env=job_env))
    second = submitted(helm_nemo("install", "--target", "slurm", "--values", str(values), env=job_env))
    assert first[1] != second[1]
    for job_id, results, _ in (first, second):
        assert cluster.wait_state(job_id, {"COMPLETED", "FAILED"})["JobState"] == "COMPLETED"
        assert (results / "results" / "torchrun-node0.argv").exists()
    shared = values_file(tmp_path, release="shared", slurm="unique_output_dir: false")
    job_id, results, _ = submitted(helm_nemo("install", "--target", "slurm", "--values", str(shared), env=job_env))
    assert results == tmp_path / "results" / "exp"
    assert cluster.wait_state(job_id, {"COMPLETED", "FAILED"})["JobState"] == "COMPLETED"


def test_uninstall_cancels_a_long_job(cluster, job_env, tmp_path):
    values = values_file(tmp_path, release="long", envs={"FAKE_TORCHRUN_SLEEP": "300"})
    job_id, results, _ = submitted(helm_nemo("install", "--target", "slurm", "--values", str(values), env=job_env))
    cluster.wait_state(job_id, {"RUNNING"})
    pid_file = results / "results" / "torchrun-node0.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    status = helm_nemo("status", "--target", "slurm", "--values", str(values), env=job_env)
    assert f"long: job {job_id} RUNNING" in status.stdout

    started = time.monotonic()
    proc = helm_nemo("uninstall", "--target", "slurm", "--values", str(values), env=job_env)
    assert proc.returncode == 0, proc.stderr
    assert f"cancelled long: job(s) {job_id}" in proc.stdout
    assert cluster.wait_state(job_id, {"CANCELLED", "COMPLETED", "FAILED"})["JobState"] == "CANCELLED"
    while _alive(pid) and time.monotonic() - started < 30:
        time.sleep(0.1)
    TIMINGS["scancel to processes gone"] = time.monotonic() - started
    assert not _alive(pid), "the job's process survived scancel"
    assert not (results / "results" / "torchrun-node0.finished").exists()

    again = helm_nemo("uninstall", "--target", "slurm", "--values", str(values), env=job_env)
    assert again.returncode == 1 and "no job named nemo-megatron-long in the queue" in again.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def test_status_of_a_release_without_jobs(cluster, job_env, tmp_path):
    values = values_file(tmp_path, release="never")
    proc = helm_nemo("status", "--target", "slurm", "--values", str(values), env=job_env)
    assert proc.returncode == 3 and "never: no job named nemo-megatron-never" in proc.stdout


@pytest.mark.parametrize("example", ["p4de-gpt3-126m-slurm", "p5-gpt3-5b-slurm"])
def test_sbatch_test_only_accepts_the_examples_multi_node_directives(cluster, job_env, tmp_path, example):
    env = {**job_env, "ECR_REGISTRY": "123456789012.dkr.ecr.us-west-2.amazonaws.com"}
    rendered = helm_nemo(
        "template", "--target", "slurm", "--values", str(ROOT / "values" / "examples" / f"{example}.yaml"), env=env
    )
    assert rendered.returncode == 0, rendered.stderr
    if "--reservation=p5-capacity-block" in rendered.stdout:  # the p5 example's capacity block, as a reservation here
        cluster.run(
            "scontrol",
            "create",
            "reservation",
            "ReservationName=p5-capacity-block",
            "Nodes=gpu[1-2]",
            "StartTime=now",
            "Duration=60",
            "Users=root",
            check=False,
        )
    path = tmp_path / "job.sh"
    path.write_text(rendered.stdout)
    proc = cluster.run("sbatch", "--test-only", str(path), check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    assert re.search(
        r"Job \d+ to start at \S+ using \d+ processors on nodes gpu\[1-2\] in partition p(4de|5)", proc.stderr
    ), proc.stderr
