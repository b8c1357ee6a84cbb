"""A real one-machine Slurm cluster for the tests: munged, slurmctld and slurmd from Debian's packages.

Everything lives in a temporary folder: slurm.conf (non-default ports, state and spool dirs), a generated
munge key and socket, logs. The daemons run in the foreground as children of pytest with
PR_SET_PDEATHSIG, so they die with pytest even when it is killed; the fixture stops them by pid.

Partitions:
- `debug` (default): this machine as one node with its CPUs; jobs really run here.
- `p4de`, `p5`: two GPU nodes (8 GPUs each) that exist only in the controller's view. Their address is this
  slurmd's, which answers their pings, so the controller sees them up and `sbatch --test-only` can check the
  examples' multi-node, 8-GPU directives as written. No job is ever started there (the tests only ask
  --test-only); a job submitted to them would never run, it would stay pending.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "sacct")


def missing_binaries() -> list[str]:
    found = {
        name: shutil.which(name)
        or next((p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(p, os.X_OK)), None)
        for name in DAEMONS + CLIENTS
    }
    return [name for name, path in found.items() if not path]


def binary(name: str) -> str:
    return shutil.which(name) or (
        f"/usr/sbin/{name}" if os.access(f"/usr/sbin/{name}", os.X_OK) else f"/usr/bin/{name}"
    )


def _die_with_parent() -> None:
    """Linux: the daemon gets SIGTERM if pytest itself is killed (the fixture's finally never runs then)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass
class SlurmCluster:
    folder: Path
    conf: Path
    host: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """An environment whose Slurm commands talk to this cluster."""
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        for name in list(env):
            if name.startswith(("SBATCH_", "SLURM_")) and name != "SLURM_CONF":
                env.pop(name)  # a job's own variables must not leak into a nested sbatch
        return env

    def run(self, *args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [binary(args[0]), *args[1:]], env=env or self.env, capture_output=True, text=True, check=False, timeout=60
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}{proc.stderr}\n{self.logs()}"
            )
        return proc

    def job(self, job_id: str) -> dict[str, str]:
        out = self.run("scontrol", "--oneliner", "show", "job", job_id).stdout
        return dict(part.split("=", 1) for part in out.split() if "=" in part)

    def wait_state(self, job_id: str, states: set[str], timeout: float = 60) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("JobState") in states:
                return info
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"job {job_id} is {info.get('JobState')} after {timeout} s, not {states}\n{self.logs()}"
                )
            time.sleep(0.2)

    def logs(self) -> str:
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.folder / "log" / name
            if path.exists():
                out.append(
                    f"--- {name} (last lines)\n" + "\n".join(path.read_text(errors="replace").splitlines()[-15:])
                )
        return "\n".join(out)

    def stop(self) -> None:
        """Cancel what still runs (its slurmstepd would outlive slurmd), then stop the daemons by pid."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            user = os.environ.get("USER") or __import__("getpass").getuser()
            self.run("scancel", "--user", user, check=False)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                queue = self.run("squeue", "--noheader", "--format", "%i", check=False)
                if queue.returncode != 0 or not queue.stdout.strip():
                    break
                time.sleep(0.2)
        for name in reversed(DAEMONS):
            proc = self.procs.get(name)
            if proc is None:
                continue
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def write_config(folder: Path) -> tuple[Path, str]:
    host = subprocess.run(["hostname", "-s"], capture_output=True, text=True, check=True).stdout.strip()
    ctld_port, slurmd_port = _free_ports(2)
    for sub in ("state", "spool", "log"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    cpus = os.cpu_count() or 1
    conf = folder / "slurm.conf"
    conf.write_text(
        "\n".join(
            [
                "# helm-nemo test cluster (tests/slurm_cluster.py)",
                "ClusterName=helmnemo",
                f"SlurmctldHost={host}",
                f"SlurmctldPort={ctld_port}",
                f"SlurmdPort={slurmd_port}",
                "AuthType=auth/munge",
                "CredType=cred/munge",
                f"AuthInfo=socket={folder / 'munge.socket'}",
                "SlurmUser=root",
                "SlurmdUser=root",
                f"StateSaveLocation={folder / 'state'}",
                f"SlurmdSpoolDir={folder / 'spool'}",
                f"SlurmctldPidFile={folder / 'slurmctld.pid'}",
                f"SlurmdPidFile={folder / 'slurmd.pid'}",
                f"SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}",
                f"SlurmdLogFile={folder / 'log' / 'slurmd.log'}",
                "ProctrackType=proctrack/linuxproc",
                "TaskPlugin=task/none",
                "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core",
                "SchedulerType=sched/backfill",
                "MpiDefault=none",
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                "JobCompType=jobcomp/none",
                "ReturnToService=2",
                "SlurmctldTimeout=30",
                "SlurmdTimeout=30",
                "MinJobAge=600",
                "KillWait=5",
                "GresTypes=gpu",
                f"NodeName={host} CPUs={cpus} State=UNKNOWN",
                f"NodeName=gpu[1-2] NodeAddr=127.0.0.1 Port={slurmd_port} CPUs=96 RealMemory=1000000 Gres=gpu:8 State=UNKNOWN",
                f"PartitionName=debug Nodes={host} Default=YES MaxTime=INFINITE State=UP",
                "PartitionName=p4de Nodes=gpu[1-2] MaxTime=INFINITE State=UP",
                "PartitionName=p5 Nodes=gpu[1-2] MaxTime=INFINITE State=UP",
                "",
            ]
        )
    )
    return conf, host


def kill_strays() -> list[int]:
    """SIGKILL the job processes (slurmstepd and its tasks) an earlier test cluster left behind when its pytest
    was killed: they carry SLURM_CONF=/tmp/helm-nemo-slurm-<pid>/slurm.conf of a pytest that is gone.
    (The daemons die with their pytest through PR_SET_PDEATHSIG; slurmstepd is detached from slurmd.)"""
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        found = re.search(rb"\0?SLURM_CONF=/tmp/helm-nemo-slurm-(\d+)/slurm\.conf\0", environ)
        if not found or Path(f"/proc/{int(found.group(1))}").exists():
            continue
        try:
            os.kill(int(proc.name), signal.SIGKILL)
            killed.append(int(proc.name))
        except OSError:
            pass
    return killed


def start(folder: Path, timeout: float = 45) -> SlurmCluster:
    kill_strays()
    conf, host = write_config(folder)
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    cluster = SlurmCluster(folder=folder, conf=conf, host=host)
    env = cluster.env
    commands = {
        "munged": [
            binary("munged"),
            "--foreground",
            "--force",
            f"--key-file={key}",
            f"--socket={folder / 'munge.socket'}",
            f"--pid-file={folder / 'munged.pid'}",
            f"--log-file={folder / 'log' / 'munged.log'}",
            f"--seed-file={folder / 'munged.seed'}",
        ],
        "slurmctld": [binary("slurmctld"), "-D", "-i"],
        "slurmd": [binary("slurmd"), "-D"],
    }
    try:
        for name in DAEMONS:
            log = open(folder / "log" / f"{name}.out", "wb")
            cluster.procs[name] = subprocess.Popen(
                commands[name],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
            if name == "munged":
                _wait(lambda: (folder / "munge.socket").exists(), timeout, cluster, "munged socket")
            if name == "slurmctld":
                _wait(
                    lambda: cluster.run("scontrol", "ping", check=False).returncode == 0, timeout, cluster, "slurmctld"
                )
        # The real node idle, and the controller-only GPU nodes answered (see the module docstring).
        _wait(lambda: _states(cluster, "debug") == {"idle"}, timeout, cluster, "node idle")
        cluster.run("scontrol", "update", "NodeName=gpu[1-2]", "State=RESUME", check=False)
        _wait(
            lambda: _states(cluster, "p4de") <= {"idle"} and _states(cluster, "p4de"),
            timeout,
            cluster,
            "gpu nodes idle",
        )
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _states(cluster: SlurmCluster, partition: str) -> set[str]:
    proc = cluster.run("sinfo", "--noheader", "--partition", partition, "--Node", "--format", "%t", check=False)
    return {line.strip().rstrip("*~#") for line in proc.stdout.splitlines() if line.strip()}


def _wait(condition, timeout: float, cluster: SlurmCluster, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for name, proc in cluster.procs.items():
            if proc.poll() is not None:
                out = (cluster.folder / "log" / f"{name}.out").read_text(errors="replace")
                raise AssertionError(f"{name} exited ({proc.returncode}) waiting for {what}:\n{out}\n{cluster.logs()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"Slurm test cluster: no {what} after {timeout} s\n{cluster.logs()}")
        time.sleep(0.2)
