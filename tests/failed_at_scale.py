"""A failed N-pod training run made of two real GPU runs (tests/logs/real/gpu/), for `helm nemo status` at scale
(issue 34 item 7: bench/real_cluster_bench.py on the real control plane, tests/test_status_at_scale.py on the
emulator).

Rank FIRST runs out of GPU memory; every other rank's NCCL watchdog fires 30 s later and its pod exits 1; rank
FIRST, hung in teardown, is SIGKILLed last (exit 137) when the set stops: container `finishedAt` puts it last, the
kubelet's line times put it first.

No line is written here. Each pod's log is one real file, transformed:
- rank FIRST: gpu/cuda-oom/node-1.log (rank 1's `torch.OutOfMemoryError` at step 25);
- every other rank R: gpu/hang/node-0.log (rank 0's watchdog: `Watchdog caught collective operation timeout`,
  the abort, torchrun's summary);
- the rank a line names is the pod's: `[rankN]`, `Rank N`, torchrun's `rank      : N`, the launcher's `job index
  of N` (one rank per pod, as in the GPU runs: one GPU per node);
- the kubelet's time of every line of a pod's file is moved by one constant for that pod: rank FIRST's OOM line at
  `start`, rank R's watchdog line at `start + 30 s + R ms` (the collective's 30 s timeout the line itself states;
  one millisecond per rank so no two pods are alike). What the programs printed inside the lines (glog's
  `E1126 20:46:26.678…`) is left as the source runs printed it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

GPU = Path(__file__).resolve().parent / "logs" / "real" / "gpu"
OOM = GPU / "cuda-oom" / "node-1.log"  # rank 1
WATCHDOG = GPU / "hang" / "node-0.log"  # rank 0
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory"
WATCHDOG_LINE = "Watchdog caught collective operation timeout"
TIMEOUT = timedelta(seconds=30)  # `Timeout(ms)=30000` in the watchdog's line
TEARDOWN = timedelta(seconds=40)  # after the last watchdog pod: the hung rank's SIGKILL (grace period over)
_RANKS = (
    (r"\[rank{src}\]", "[rank{dst}]"),
    (r"\bRank {src}\b", "Rank {dst}"),
    (r"(\brank      : ){src}\b", r"\g<1>{dst}"),
    (r"(\bjob index of ){src}\b", r"\g<1>{dst}"),
)


@dataclass
class PodRun:
    rank: int
    log: str  # as `kubectl logs --timestamps` prints it
    exit_code: int
    finished_at: str  # RFC 3339, to the second as the API keeps it
    started_at: str


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def _time(stamped_line: str) -> datetime:
    text = stamped_line.partition(" ")[0].rstrip("Z")
    whole, _, fraction = text.partition(".")
    return datetime.fromisoformat(f"{whole}.{fraction[:6]:0<6}+00:00")


def adapt(source: Path, src_rank: int, rank: int, anchor: str, at: datetime) -> list[tuple[datetime, str]]:
    """`source`'s lines for `rank`: the rank names replaced, every time moved so that the first line holding
    `anchor` is at `at`. (time, line without its time)."""
    lines = source.read_text(encoding="utf-8").splitlines()
    shift = at - _time(next(line for line in lines if anchor in line))
    out = []
    for line in lines:
        text = line.partition(" ")[2]
        for pattern, replacement in _RANKS:
            text = re.sub(pattern.format(src=src_rank), replacement.format(dst=rank), text)
        out.append((_time(line) + shift, text))
    return out


def failed_run(pods: int, first: int | None, start: datetime) -> list[PodRun]:
    """The N pods of the run (rank order); `first` None: every rank's watchdog fires (a hang whose hung rank
    says nothing)."""
    runs: list[PodRun] = []
    for rank in range(pods):
        if rank == first:
            lines = adapt(OOM, 1, rank, OOM_LINE, start)
        else:
            lines = adapt(WATCHDOG, 0, rank, WATCHDOG_LINE, start + TIMEOUT + timedelta(milliseconds=rank))
        log = "".join(f"{stamp(at)} {text}\n" for at, text in lines)
        runs.append(PodRun(rank, log, 1, _api(lines[-1][0] + timedelta(seconds=1)), _api(lines[0][0])))
    if first is None:
        return runs
    last = max(_time(run.log.rstrip("\n").rsplit("\n", 1)[-1]) for run in runs)
    runs[first].exit_code, runs[first].finished_at = 137, _api(last + TEARDOWN)
    return runs


def _api(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
