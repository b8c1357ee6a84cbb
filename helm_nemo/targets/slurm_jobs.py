"""Submit, cancel and show Slurm jobs of rendered releases (`helm nemo install|uninstall|status --target slurm`).

install: the script is submitted held (`sbatch --parsable --hold`), its results directory created and the
script, the resolved values and launcher.log (job id, command) written into it, then the job released:
the files are in place before the job can start. Secrets reach sbatch through its environment only.
uninstall: `scancel` of the release's jobs (found by job name, the user's own). status: `squeue`, then
`sacct` for ended jobs when the cluster keeps accounting, else `scontrol show job` (recently ended jobs).
A recipe's jobs are submitted in order; a failure stops the sequence and says what was submitted.
"""

from __future__ import annotations

import getpass
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Mapping

from helm_nemo.targets.slurm import RESOLVED_VALUES_NAME, SlurmJob

Echo = Callable[[str], None]


class SlurmCommandError(Exception):
    """A Slurm command failed (exit 1, its message shown)."""


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def _binary(name: str) -> str:
    """SBATCH_BIN, SCANCEL_BIN … override where each Slurm command is (default: PATH)."""
    return os.environ.get(f"{name.upper()}_BIN", name)


def run(
    args: list[str], env: Mapping[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [_binary(args[0]), *args[1:]],
            env=dict(env) if env is not None else None,
            input=input,
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        raise SlurmCommandError(
            f"{args[0]} not found: the Slurm client commands must be on PATH (or set {args[0].upper()}_BIN)"
        ) from None


def _checked(args: list[str], env: Mapping[str, str] | None = None) -> str:
    proc = run(args, env)
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).strip() or f"exit code {proc.returncode}"
        raise SlurmCommandError(f"{' '.join(args[:2])}: {message}")
    return proc.stdout


@dataclass
class Submitted:
    """A job sbatch accepted: its id and where its results and log go."""

    release: str
    job_id: str
    results_dir: str
    log: str


def submission_env(job: SlurmJob, env: Mapping[str, str]) -> dict[str, str]:
    """sbatch's environment: the caller's, plus the secrets the script takes from it."""
    out = dict(env)
    missing = []
    for name, value in job.secret_env.items():
        if value is not None:
            out[name] = value
        elif not out.get(name):
            missing.append(name)
    if missing:
        raise SlurmCommandError("secret(s) the job takes from the environment are not set: " + ", ".join(missing))
    return out


def dependency_flags(job: SlurmJob, submitted: Mapping[str, str]) -> list[str]:
    """`--dependency=afterok:<ids>` for the releases the job waits for (their job ids, this run's), with the
    values' own slurm.dependency beside it: on the command line, sbatch would let one replace the other."""
    ids = [submitted[name] for name in job.after if name in submitted]
    if not ids:
        return []
    return ["--dependency=afterok:" + ":".join(ids) + (f",{job.dependency}" if job.dependency else "")]


def submit(
    job: SlurmJob,
    env: Mapping[str, str] | None = None,
    extra: list[str] | None = None,
    echo: Echo = _stderr,
    submitted: Mapping[str, str] | None = None,
) -> Submitted:
    env = dict(os.environ if env is None else env)
    sbatch_env = submission_env(job, env)
    log_dir = Path(job.log_file("0")).parent
    Path(job.experiment_dir).mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    # sbatch copies the script when it accepts the job; the staging copy goes right after.
    staging = Path(job.experiment_dir) / f".{job.job_name}.submitting.{os.getpid()}.sh"
    staging.write_text(job.script, encoding="utf-8")
    command = ["sbatch", "--parsable", "--hold", *dependency_flags(job, submitted or {}), *(extra or [])]
    try:
        out = _checked([*command, str(staging)], sbatch_env)
    finally:
        staging.unlink(missing_ok=True)
    job_id = out.strip().split(";")[0]
    if not job_id.isdigit():
        raise SlurmCommandError(f"sbatch --parsable printed {out.strip()!r}, not a job id")
    results = Path(job.results_dir(job_id))
    try:
        results.mkdir(parents=True, exist_ok=True)
        (results / "submission.sh").write_text(job.script, encoding="utf-8")
        (results / RESOLVED_VALUES_NAME).write_text(job.resolved_values, encoding="utf-8")
        with open(results / "launcher.log", "a", encoding="utf-8") as log:
            log.write(f"job {job_id}: {shlex.join(command)} {results / 'submission.sh'}\n")
    except OSError as err:
        run(["scancel", job_id])
        raise SlurmCommandError(
            f"job {job_id} cancelled: cannot write its results directory {results}: {err}"
        ) from None
    if "--hold" not in (extra or []) and "-H" not in (extra or []):
        _checked(["scontrol", "release", job_id])
    return Submitted(job.release, job_id, str(results), job.log_file(job_id))


def install(
    jobs: list[SlurmJob],
    env: Mapping[str, str] | None = None,
    extra: list[str] | None = None,
    echo: Echo = _stderr,
    out: Echo = print,
) -> int:
    done: list[Submitted] = []
    for job in jobs:
        for note in job.notes:
            echo(f"note: {note}")
        try:
            sub = submit(job, env, extra, echo, submitted={d.release: d.job_id for d in done})
        except SlurmCommandError as err:
            echo(f"helm nemo: {job.release}: {err}")
            if done:
                echo(
                    "submitted before the failure: "
                    + ", ".join(f"{d.release} (job {d.job_id})" for d in done)
                    + "; `helm nemo uninstall --target slurm` cancels them"
                )
            return 1
        done.append(sub)
        waits = f" (starts after {', '.join(job.after)} succeeded: afterok)" if job.after else ""
        tasks = f" (array of {job.array} task(s))" if job.array is not None else ""
        out(f"submitted {sub.release}: job {sub.job_id}{tasks}{waits}")
        out(f"  results: {sub.results_dir}")
        out(f"  log:     {sub.log}")
    return 0


def _me(env: Mapping[str, str]) -> str:
    return env.get("USER") or getpass.getuser()


def queued(job_name: str, env: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """The user's jobs of that name in the queue: id, state, reason, nodes."""
    env = os.environ if env is None else env
    text = _checked(
        ["squeue", "--noheader", "--name", job_name, "--user", _me(env), "--format", "%i|%T|%r|%D|%M|%N"], env
    )
    rows = []
    for line in text.splitlines():
        if line.strip():
            job_id, state, reason, nodes, elapsed, nodelist = (line.split("|") + [""] * 6)[:6]
            rows.append(
                {
                    "id": job_id,
                    "state": state,
                    "reason": reason,
                    "nodes": nodes,
                    "elapsed": elapsed,
                    "nodelist": nodelist,
                }
            )
    return rows


def ended(job_name: str, env: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """Ended jobs of that name: from sacct when the cluster keeps accounting, else from the controller's memory."""
    env = os.environ if env is None else env
    proc = run(
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "-X",
            "--name",
            job_name,
            "--user",
            _me(env),
            "--format",
            "JobID,State,ExitCode,Elapsed,NodeList",
        ],
        env,
    )
    if proc.returncode == 0:
        rows = []
        for line in proc.stdout.splitlines():
            if line.strip():
                job_id, state, code, elapsed, nodelist = (line.split("|") + [""] * 5)[:5]
                rows.append(
                    {
                        "id": job_id,
                        "state": state,
                        "exit": code,
                        "elapsed": elapsed,
                        "nodelist": nodelist,
                        "source": "sacct",
                    }
                )
        return rows
    proc = run(["scontrol", "--oneliner", "show", "job"], env)
    rows = []
    for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("JobName") == job_name:
            rows.append(
                {
                    # an array task is its own job to scontrol; the user knows it as <array id>_<task>
                    "id": f"{fields['ArrayJobId']}_{fields['ArrayTaskId']}"
                    if fields.get("ArrayJobId") and fields.get("ArrayTaskId", "").isdigit()
                    else fields.get("JobId", ""),
                    "state": fields.get("JobState", ""),
                    "exit": fields.get("ExitCode", ""),
                    "elapsed": fields.get("RunTime", ""),
                    "nodelist": fields.get("NodeList", ""),
                    "source": "scontrol",
                }
            )
    return rows


def uninstall(
    jobs: list[SlurmJob], env: Mapping[str, str] | None = None, echo: Echo = _stderr, out: Echo = print
) -> int:
    """scancel the queued and running jobs of each release, in reverse order."""
    env = os.environ if env is None else env
    cancelled = 0
    for job in reversed(jobs):
        try:
            rows = queued(job.job_name, env)
            if not rows:
                echo(f"{job.release}: no job named {job.job_name} in the queue (skipped)")
                continue
            ids = [row["id"] for row in rows]
            _checked(["scancel", *ids], env)
        except SlurmCommandError as err:
            echo(f"helm nemo: {job.release}: {err}")
            return 1
        cancelled += len(ids)
        out(f"cancelled {job.release}: job(s) {', '.join(ids)}")
    if not cancelled:
        echo("helm nemo: no job of these releases is queued or running")
        return 1
    return 0


LOG_TAIL_BYTES = 512 * 1024


def log_tail(path: str, size: int = LOG_TAIL_BYTES) -> str | None:
    """The last `size` bytes of a log file (from its first whole line), or None when it cannot be read here."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            handle.seek(max(0, end - size))
            data = handle.read()
    except OSError:
        return None
    if end > size:
        data = data.split(b"\n", 1)[-1]
    return data.decode("utf-8", "replace")


def _progress_line(path: str, out: Echo) -> None:
    """`  training: step 1234/5000, 4.1 s/step, ETA 4 h 22 m` from the tail of the job's log when this machine
    can read it (the shared filesystem), with the parsers of `helm nemo metrics`."""
    text = log_tail(path)
    if not text:
        return
    from helm_nemo.status.progress import duration, progress

    found = progress(text)
    if found is None:
        return
    parts = [f"step {found.steps_done}" + (f"/{found.max_steps}" if found.max_steps else "")]
    if found.step_time_s is not None:
        parts.append(f"{found.step_time_s:.4g} s/step (steps {found.first_step}–{found.last_step})")
    if found.eta_s is not None and found.max_steps and found.steps_done < found.max_steps:
        parts.append(f"ETA {duration(found.eta_s)}")
    out(f"  training: {', '.join(parts)} ({found.format} log)")


def _shards_line(path: str, out: Echo) -> None:
    """A data-prep task's shards from its log: the worker's share (its `worker i/N shards K` line) and the
    shards done, skipped and failed (docs/data-prep.md, progress lines)."""
    import re

    from helm_nemo.dataprep.progress import PodLines

    text = log_tail(path)
    if not text:
        return
    share = re.findall(r"^helm-nemo data-prep: worker \d+/\d+ shards (\d+)$", text, re.M)
    said = PodLines()  # the counting rules of the Kubernetes side: a shard done, then skipped, stays done
    said.read(text)
    finished, skipped = len(said.done | said.skipped), len(said.skipped - said.done)
    failed = {shard: line.split(": ", 1)[1] for shard, line in said.failed.items()}
    total = f"/{share[-1]}" if share else ""
    parts = [f"shards {finished}{total} done" + (f" ({skipped} skipped)" if skipped else "")]
    parts += [f"{len(failed)} failed: {'; '.join(failed.values())}"] if failed else []
    out(f"  data-prep: {', '.join(parts)}")


def status(jobs: list[SlurmJob], env: Mapping[str, str] | None = None, out: Echo = print, echo: Echo = _stderr) -> int:
    from helm_nemo.terminal_text import safe

    raw_out = out

    def safe_out(text: str) -> None:  # the jobs' log lines reach the terminal: never as escape sequences
        raw_out(safe(text))

    out = safe_out
    env = os.environ if env is None else env
    found = 0
    for job in jobs:
        try:
            live = queued(job.job_name, env)
            done = [row for row in ended(job.job_name, env) if row["id"] not in {r["id"] for r in live}]
        except SlurmCommandError as err:
            echo(f"helm nemo: {job.release}: {err}")
            return 1
        if not live and not done:
            out(f"{job.release}: no job named {job.job_name}")
            continue
        for row in live:
            where = row["nodelist"] or row["reason"]
            out(
                f"{job.release}: job {row['id']} {row['state']} ({row['nodes']} node(s), {row['elapsed']}, {where})"
                f"  log {job.log_file(row['id'])}"
            )
            (_shards_line if job.array is not None else _progress_line)(job.log_file(row["id"]), out)
        for row in done:
            out(
                f"{job.release}: job {row['id']} {row['state']} (exit {row['exit']}, {row['elapsed']})"
                f"  log {job.log_file(row['id'])}"
            )
            (_shards_line if job.array is not None else _progress_line)(job.log_file(row["id"]), out)
        found += len(live) + len(done)
    return 0 if found else 3
