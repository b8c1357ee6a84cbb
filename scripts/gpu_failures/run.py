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
"""

from __future__ import annotations

import json
import os
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
    env = {k: os.environ[k] for k in ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CUDA_HOME") if k in os.environ}
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

    def __init__(self, index: int, argv: list[str], env: dict[str, str], log: Path, shm: bool):
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
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.log.open("wb") as out:
            for line in iter(self.proc.stdout.readline, b""):
                out.write(stamp().encode() + b" " + line.rstrip(b"\n") + b"\n")
                out.flush()

    def kill(self) -> None:
        """SIGKILL to every process of the pod (its session, and any descendant that left it)."""
        pids = descendants(self.proc.pid) | {self.proc.pid}
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def exit_code(self) -> int | None:
        code = self.proc.poll()
        if code is None:
            return None
        return 128 - code if code < 0 else code


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
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "ckpt", ckpt], check=True)
    started = time.time()
    pods = [
        Pod(
            i,
            pod["command"] + pod["args"],
            node_env(pod, case, i, nodes, port_offset),
            case_dir / f"node-{i}.log",
            i in case.get("shm", []),
        )
        for i in start
    ]
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
    (case_dir / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def versions() -> dict:
    import torch

    info = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    }
    import lightning

    info["lightning"] = lightning.__version__
    info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    info["driver"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True
    ).stdout.split()[:1]
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

    def one(name: str) -> None:
        offset = slots.get()
        try:
            print(json.dumps(run_case(name, cases[name], out, offset)), flush=True)
        finally:
            slots.put(offset)

    with ThreadPoolExecutor(PARALLEL) as pool:
        for future in [pool.submit(one, name) for name in names]:
            future.result()


if __name__ == "__main__":
    main()
