"""Run the cases of cases.yaml on a GPU machine, as JobSet and the kubelet would run the rendered pods.

Each "node" is one GPU of this machine running the workload container's own command (rendered/<case>.json, made
by render.py from the jobset chart) with what the cluster would give it: the env (fieldRefs resolved:
JOB_COMPLETION_INDEX, the JobSet's name and uid), the ConfigMap files at their mount paths, the rank-0 host name
resolving to 127.0.0.1. Differences from a real cluster, on purpose: one
GPU per node (GPUS_PER_NODE=1 and WORLD_SIZE=nodes replace the chart's 8 and 16); the nodes talk over NCCL's socket
transport (NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1), as two nodes without RDMA NICs, never over NVLink; NVLink
multicast stays off (NCCL_NVLS_ENABLE=0, the GPU machine's rule).

Every line a pod prints is kept as `kubectl logs --timestamps` prints it: the time it was read (RFC 3339 with
nanoseconds, as the kubelet stamps a container's output), a space, the line. When a pod fails, the others are
stopped as JobSet does when a child Job fails: about a second later they are deleted, which for the chart's
command (bash as PID 1, no SIGTERM handler) means SIGKILL to every process after terminationGracePeriodSeconds.
Written to OUT/<case>/: node-<i>.log, result.json (exit codes as the kubelet reports them: 128+signal when
killed), and the flight-recorder dumps a case made.

What a case may add (cases.yaml): `prepare`, a shell command run before the pods (an earlier attempt that left a
checkpoint, a dataset as a clone left it); `signal`, a signal sent from outside to one pod's torchrun agent (or to
all its processes) once a line shows up in a log (a node drain, a spot reclaim, a user's Ctrl-C); `term_all`, the
pods' deletion reaching every process with SIGTERM (a container whose init forwards signals, as tini -g does)
rather than the chart's bash alone; `ckpt_ro`, CKPT_DIR a read-only mount; `memory_max`, a pod's memory limit
(its cgroup's memory.max: the kernel's OOM killer acts inside it); `alone`, a case run after the others, by
itself (it takes all of a GPU's memory).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
APP = Path("/opt/gpu-failures")  # where the image would hold the training program
JOBSET_REACTION_S = 1.0
PARALLEL = int(os.environ.get("GPU_FAILURES_PARALLEL", "2"))  # cases at a time (each uses both GPUs, lightly)


def stamp() -> str:
    ns = time.time_ns()
    secs, frac = divmod(ns, 1_000_000_000)
    text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
    digits = f"{frac:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


def install_app(wheels: Path) -> None:
    """The image's content: train.py and NeMo's ProgressPrinter, the one file of the nemo_toolkit wheel it needs."""
    APP.mkdir(parents=True, exist_ok=True)
    shutil.copy(HERE / "train.py", APP / "train.py")
    wheel = next(wheels.glob("nemo_toolkit-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("nemo/lightning/pytorch/callbacks/progress_printer.py")
    (APP / "progress_printer.py").write_bytes(source)


def install_files(pod: dict) -> None:
    for path, text in pod["files"].items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)


def resolve_hosts(pod: dict) -> None:
    env = {e["name"]: e.get("value") for e in pod["env"]}
    hosts = Path("/etc/hosts")
    lines = hosts.read_text().splitlines()
    for name in {env.get("MASTER_ADDR"), env.get("RANK_0_FQDN")} - {None}:
        if not any(name in line.split() for line in lines):
            lines.append(f"127.0.0.1 {name}")
    hosts.write_text("\n".join(lines) + "\n")


def node_env(pod: dict, case: dict, index: int, nodes: int, port_offset: int) -> dict[str, str]:
    field = {
        "metadata.annotations['batch.kubernetes.io/job-completion-index']": str(index),
        "metadata.annotations['jobset.sigs.k8s.io/replicatedjob-name']": pod["replicated_job"],
        "metadata.annotations['jobset.sigs.k8s.io/jobset-name']": pod["jobset"],
        "metadata.labels['jobset.sigs.k8s.io/jobset-uid']": "6c1e2a8e-0d3b-4f59-9d55-3a1f0c2b7e41",
    }
    passed = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME", "CPU_ONLY")  # CPU_ONLY: a try without GPUs
    env = {k: os.environ[k] for k in passed if k in os.environ}
    env["HOME"] = "/root"
    env["HOSTNAME"] = f"{pod['jobset']}-{pod['replicated_job']}-0-{index}"
    for item in pod["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            env[item["name"]] = field[item["valueFrom"]["fieldRef"]["fieldPath"]]
    if int(env.get("NNODES", "1")) > 1:
        env["GPUS_PER_NODE"] = "1"
        env["WORLD_SIZE"] = str(nodes)
    env["CUDA_VISIBLE_DEVICES"] = str(index)
    if port_offset:  # two cases at a time on this one machine: the second one's rendezvous on another port
        env["MASTER_PORT"] = str(int(env["MASTER_PORT"]) + port_offset)
    env.update(
        NCCL_P2P_DISABLE="1",
        NCCL_SHM_DISABLE="1",
        NCCL_NVLS_ENABLE="0",
        TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
        NVSHMEM_DISABLE_NVLS="1",
    )
    return env


class Pod:
    """One pod's container: the command in its own session, its output stamped line by line."""

    def __init__(
        self, index: int, argv: list[str], env: dict[str, str], log: Path, shm: bool, cgroup: Path | None = None
    ):
        self.index = index
        self.log = log
        if shm:  # a private /dev/shm of 1 MiB: the pod has no shared-memory volume
            argv = [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "bash",
                "-c",
                'mount -t tmpfs -o size=1m shm /dev/shm && exec "$@"',
                "pod",
                *argv,
            ]
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        if cgroup is not None:  # before the pod command's `sleep 10` is over: every process it starts is inside
            (cgroup / "cgroup.procs").write_text(str(self.proc.pid))
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("wb") as out:
            for line in iter(self.proc.stdout.readline, b""):
                out.write(stamp().encode() + b" " + line.rstrip(b"\n") + b"\n")
                out.flush()

    def kill(self, sig: int = signal.SIGKILL, only: str | None = None) -> list[int]:
        """A signal to every process of the pod (its session, and any descendant that left it), or to those whose
        command line has `only` (torchrun: the agent). Returns the pids signalled."""
        pids = descendants(self.proc.pid) | {self.proc.pid}
        if only:
            pids = {pid for pid in pids if only in cmdline(pid)}
        for pid in sorted(pids):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        return sorted(pids)

    def exit_code(self) -> int | None:
        code = self.proc.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def memory_cgroup(name: str, limit: str) -> Path:
    """A memory cgroup whose limit is `limit`, no swap: the pod's memory limit, as the kubelet sets it (v2 or v1)."""
    root = Path("/sys/fs/cgroup")
    if (root / "cgroup.controllers").exists():  # cgroup v2
        group = root / f"gpu-failures-{name}"
        group.mkdir(exist_ok=True)
        if "memory" not in (root / "cgroup.subtree_control").read_text().split():
            (root / "cgroup.subtree_control").write_text("+memory")
        (group / "memory.max").write_text(limit)
        if (group / "memory.swap.max").exists():
            (group / "memory.swap.max").write_text("0")
        return group
    group = root / "memory" / f"gpu-failures-{name}"  # cgroup v1
    group.mkdir(exist_ok=True)
    (group / "memory.limit_in_bytes").write_text(limit)
    if (group / "memory.memsw.limit_in_bytes").exists():
        (group / "memory.memsw.limit_in_bytes").write_text(limit)
    return group


def prepare(command: str, case_dir: Path) -> dict:
    """The case's `prepare` command, run on the host before the pods: what an earlier attempt left behind."""
    env = {k: os.environ[k] for k in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME", "HOME") if k in os.environ}
    env.update(APP=str(APP), CUDA_VISIBLE_DEVICES="0", NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")
    env.update(NVSHMEM_DISABLE_NVLS="1", PYTHONUNBUFFERED="1")
    if os.environ.get("CPU_ONLY"):
        env["CPU_ONLY"] = os.environ["CPU_ONLY"]
    proc = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True, check=False)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
    return {"command": command, "exit_code": proc.returncode, "output_tail": tail}


def descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def run_case(name: str, case: dict, out: Path, port_offset: int = 0) -> dict:
    pod = json.loads((HERE / "rendered" / f"{name}.json").read_text())
    nodes = pod["parallelism"]
    start = case.get("start", list(range(nodes)))
    case_dir = out / name
    shutil.rmtree(case_dir, ignore_errors=True)
    case_dir.mkdir(parents=True)
    dump_prefix = case.get("envs", {}).get("TORCH_FR_DUMP_TEMP_FILE")
    if dump_prefix:
        shutil.rmtree(Path(dump_prefix).parent, ignore_errors=True)
        Path(dump_prefix).parent.mkdir()
    ckpt = case.get("envs", {}).get("CKPT_DIR")
    if ckpt:
        Path(ckpt).mkdir(exist_ok=True)
        options = "ro,size=1m" if case.get("ckpt_ro") else "size=1m"
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "ckpt", ckpt], check=True)
    prepared = prepare(case["prepare"], case_dir) if case.get("prepare") else None
    limits = case.get("memory_max", {})
    try:
        cgroups = {int(i): memory_cgroup(f"{name}-{i}", limit) for i, limit in limits.items()}
    except OSError as error:  # no cgroup v2 memory controller here: the case cannot be made, say so
        result = {"case": name, "skipped": f"no memory cgroup: {error}"}
        (case_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
        return result
    started = time.time()
    pods = [
        Pod(
            i,
            pod["command"] + pod["args"],
            node_env(pod, case, i, nodes, port_offset),
            case_dir / f"node-{i}.log",
            i in case.get("shm", []),
            cgroups.get(i),
        )
        for i in start
    ]
    send = case.get("signal")
    send_at: float | None = None
    deadline = started + case.get("deadline", 180)
    grace = pod["terminationGracePeriodSeconds"]
    stopping_at: float | None = None
    events = []
    while True:
        codes = {p.index: p.exit_code() for p in pods}
        running = [p for p in pods if codes[p.index] is None]
        if not running:
            break
        now = time.time()
        if (
            send
            and send_at is None
            and any(re.search(send["when"], p.log.read_text(errors="replace")) for p in pods if p.log.exists())
        ):
            send_at = now + send.get("delay", 0)
        if send and send_at is not None and now >= send_at:
            sig = signal.Signals[send["name"]]
            target = next(p for p in pods if p.index == send["node"])
            only = None if send.get("process") == "all" else send.get("process", "torchrun")
            pids = target.kill(sig, only)
            what = f"{sig.name} to node-{target.index}'s {only or 'processes'} (pids {pids})"
            events.append({"at": stamp(), "what": what + f": {send['why']}"})
            send = None
        failed = [i for i, c in codes.items() if c not in (None, 0)]
        if stopping_at is None and (failed or now > deadline):
            why = f"node {failed[0]} failed" if failed else "deadline"
            stopping_at = now + (JOBSET_REACTION_S if failed else 0)
            events.append({"at": stamp(), "what": f"{why}: stopping the other pods"})
        if stopping_at is not None and now >= stopping_at:
            # The pods are deleted: the kubelet sends SIGTERM to each container's PID 1, the chart's `bash -c`, which
            # has no handler for it and so ignores it (a container's PID 1 gets only the signals it handles), then
            # SIGKILL after the grace period. Sending nothing until then is the same.
            names = ", ".join(f"node-{p.index}" for p in running)
            if case.get("term_all"):  # the container's init forwards SIGTERM to every process
                for p in running:
                    p.kill(signal.SIGTERM)
                events.append({"at": stamp(), "what": f"deleted {names}: SIGTERM to every process of the pod"})
            else:
                events.append({"at": stamp(), "what": f"deleted {names}: SIGTERM to PID 1 (bash, no handler: ignored)"})
            kill_at = now + grace
            while time.time() < kill_at and any(p.exit_code() is None for p in running):
                time.sleep(0.1)
            for p in running:
                if p.exit_code() is None:
                    p.kill()
                    events.append({"at": stamp(), "what": f"SIGKILL node-{p.index} after {grace} s"})
            stopping_at = float("inf")
        time.sleep(0.1)
    for p in pods:
        p.reader.join(timeout=10)
    if ckpt:
        subprocess.run(["umount", ckpt], check=False)
    for group in cgroups.values():
        events.append({"at": stamp(), "what": f"{group.name}: memory.events {memory_events(group)}"})
        try:
            group.rmdir()
        except OSError:
            pass
    dumps = sorted(Path(dump_prefix).parent.glob("*")) if dump_prefix else []
    for dump in dumps:
        shutil.copy(dump, case_dir / dump.name)
    result = {
        "case": name,
        "exit_codes": {f"node-{p.index}.log": p.exit_code() for p in pods},
        "seconds": round(time.time() - started, 1),
        "events": events,
        "flight_recorder_dumps": [d.name for d in dumps],
    }
    if prepared:
        result["prepare"] = prepared
    (case_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def memory_events(group: Path) -> dict[str, int]:
    """What the kernel counted in the pod's memory cgroup (oom_kill: the processes its OOM killer took)."""
    for file in ("memory.events", "memory.oom_control"):
        try:
            lines = (group / file).read_text().splitlines()
        except OSError:
            continue
        return {k: int(v) for k, v in (line.split() for line in lines)}
    return {}


def versions() -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.cuda.is_available():
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    import lightning

    info["lightning"] = lightning.__version__
    for module in ("megatron.core", "transformers", "huggingface_hub"):
        try:
            info[module.split(".")[0] + ("_core" if "." in module else "")] = __import__(
                module, fromlist=["__version__"]
            ).__version__
        except Exception:  # not every machine has them; a case that needs one fails on its own
            pass
    info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    info["driver"] = (
        subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
        ).stdout.split()[:1]
        if shutil.which("nvidia-smi")
        else []
    )
    return info


def main() -> None:
    out = Path(sys.argv[1])
    wheels = Path(sys.argv[2])
    wanted = sys.argv[3:]
    cases = yaml.safe_load((HERE / "cases.yaml").read_text())["cases"]
    install_app(wheels)
    out.mkdir(parents=True, exist_ok=True)
    (out / "versions.json").write_text(json.dumps(versions(), indent=1) + "\n")
    names = wanted or list(cases)
    for name in names:  # the same files and host names for every case: written once, before any pod starts
        pod = json.loads((HERE / "rendered" / f"{name}.json").read_text())
        install_files(pod)
        resolve_hosts(pod)
    import queue
    from concurrent.futures import ThreadPoolExecutor

    slots: queue.Queue[int] = queue.Queue()
    for offset in range(PARALLEL):
        slots.put(offset * 10)

    def one(name: str, offset: int = 0) -> None:
        """One case; a case that breaks the harness is reported and the others go on."""
        try:
            print(json.dumps(run_case(name, cases[name], out, offset)), flush=True)
        except Exception as error:  # a case that breaks the harness: reported, the others go on
            print(json.dumps({"case": name, "harness_error": repr(error)}), flush=True)

    def in_slot(name: str) -> None:
        offset = slots.get()
        try:
            one(name, offset)
        finally:
            slots.put(offset)

    together = [name for name in names if not cases[name].get("alone")]
    with ThreadPoolExecutor(PARALLEL) as pool:
        for future in [pool.submit(in_slot, name) for name in together]:
            future.result()
    for name in names:
        if cases[name].get("alone"):
            one(name)


if __name__ == "__main__":
    main()
