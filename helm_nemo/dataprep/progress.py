"""Shard progress of a data-prep Job, from the Job's status, its pods and their log tails: the one count that
`helm nemo install`'s recipe wait (dataprep/wait.py) and `helm nemo status` (status/cluster.py) both show
(docs/data-prep.md, "Progress lines").

- `PodLines.read(text)`: what a pod's log tail says: the distinct shards it called `done`, `skipped`,
  `failed` (with that line), and its last lines (a kubelet timestamp in front of a line is dropped);
- `count(job, shares, pods)`: per worker (the Job's completion index) the shards of its share
  (`shares`: worker -> its shard names, shards.assignment) that any of its pods called done or skipped; an
  index in the Job's `completedIndexes` has done all of its share. A shard done by one pod and skipped by
  a retry of the index counts as done; a `failed` shard no pod of the index completed since is failed.

Pure: the callers read the objects and the logs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Iterable
    from typing import Any

PROGRESS = re.compile(r"^helm-nemo data-prep: shard (\S+) (done|skipped|failed)\b")
INDEX_KEY = "batch.kubernetes.io/job-completion-index"
LAST_LINES = 5  # a failed pod's last lines, when it printed no `failed` line
_STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d) ")


def parse_indexes(text: str | None) -> set[int]:
    """A Job's completedIndexes / failedIndexes ("0-2,5") -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in (text or "").split(","):
        low, _, high = part.strip().partition("-")
        if low.isdigit():
            out.update(range(int(low), int(high) + 1 if high.isdigit() else int(low) + 1))
    return out


def pod_index(pod: dict[str, Any]) -> int | None:
    """An Indexed Job's pod's completion index (annotation, and label since Kubernetes 1.28)."""
    meta = pod.get("metadata") or {}
    for source in (meta.get("annotations") or {}, meta.get("labels") or {}):
        value = source.get(INDEX_KEY)
        if isinstance(value, str) and value.isdigit():
            return int(value)
    return None


def shares_of(names: list[str], workers: int) -> dict[int, list[str]]:
    """Worker -> the shard names it prepares (round robin, as shards.assignment)."""
    workers = max(1, workers)
    return {worker: [name for k, name in enumerate(names) if k % workers == worker] for worker in range(workers)}


def names_of_tsv(text: str) -> list[str]:
    """The shard names of a shards.tsv (`name<TAB>source<TAB>sha256` per line), in order."""
    return [line.split("\t", 1)[0] for line in text.split("\n") if line.strip()]


@dataclass
class PodLines:
    """What the log tails of one pod said so far."""

    name: str = ""
    index: int | None = None
    phase: str = ""
    done: set[str] = field(default_factory=set)
    skipped: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)  # shard -> its `failed` line
    last_lines: list[str] = field(default_factory=list)

    def read(self, text: str) -> None:
        """Add what a log tail says (read again later: the sets grow, a shard done after failing is done)."""
        lines = [_clean(line) for line in text.rstrip("\n").split("\n")]
        lines = [line for line in lines if line]
        self.last_lines = lines[-LAST_LINES:]
        for line in lines:
            match = PROGRESS.match(line)
            if match is None:
                continue
            shard, what = match.groups()
            if what == "failed":
                self.failed[shard] = line
            else:
                (self.done if what == "done" else self.skipped).add(shard)
                self.failed.pop(shard, None)


def _clean(line: str) -> str:
    return _STAMP.sub("", line, count=1).rsplit("\r", 1)[-1]


@dataclass
class Worker:
    """One worker (completion index): its share, how much of it is complete, what failed."""

    index: int
    total: int
    complete: int  # shards done or skipped (all of them once the index completed)
    skipped: int  # shards found complete already (not prepared by this Job's pods)
    failed: dict[str, str]  # shard -> its `failed` line, for shards not complete since
    state: str  # complete | failed (out of retries) | running | waiting

    def as_json(self) -> dict[str, Any]:
        return {
            "worker": self.index,
            "state": self.state,
            "done": self.complete,
            "skipped": self.skipped,
            "failed": len(self.failed),
            "total": self.total,
            "failed_shards": [{"shard": s, "line": line} for s, line in self.failed.items()],
        }


@dataclass
class ShardProgress:
    """The shard count of one data-prep Job."""

    workers: list[Worker]
    failed_indexes: list[int] = field(default_factory=list)  # the Job's failedIndexes (out of retries)

    @property
    def done(self) -> int:
        return sum(w.complete for w in self.workers)

    @property
    def total(self) -> int:
        return sum(w.total for w in self.workers)

    @property
    def skipped(self) -> int:
        return sum(w.skipped for w in self.workers)

    @property
    def failed(self) -> list[tuple[int, str, str]]:
        """(worker, shard, its `failed` line) of the shards failed and not complete since."""
        return [(w.index, shard, line) for w in self.workers for shard, line in w.failed.items()]

    def counts(self) -> tuple[int, ...]:
        return tuple(w.complete for w in self.workers)

    def per_worker(self) -> str:
        """`worker 0: 2/3, worker 1: 2/3`."""
        return ", ".join(f"worker {w.index}: {w.complete}/{w.total}" for w in self.workers)

    def line(self) -> str:
        """`4/6 shards (worker 0: 2/3, worker 1: 2/3)` (the recipe wait's words)."""
        return f"{self.done}/{self.total} shards ({self.per_worker()})"

    def as_json(self) -> dict[str, Any]:
        return {
            "done": self.done,
            "skipped": self.skipped,
            "failed": len(self.failed),
            "total": self.total,
            "failed_indexes": self.failed_indexes,
            "failed_shards": [{"worker": w, "shard": s, "line": line} for w, s, line in self.failed],
            "workers": [w.as_json() for w in self.workers],
        }


def count(job: dict[str, Any], shares: dict[int, list[str]], pods: Iterable[PodLines]) -> ShardProgress:
    """The progress of `job` (a batch/v1 Job dict) whose worker i prepares `shares[i]`, from what its pods'
    logs said (`pods`: every pod of the Job read so far, retries of an index included)."""
    status = job.get("status") or {}
    completed = parse_indexes(status.get("completedIndexes"))
    out_of_retries = parse_indexes(status.get("failedIndexes"))
    by_index: dict[int, list[PodLines]] = {}
    for pod in pods:
        if pod.index is not None:
            by_index.setdefault(pod.index, []).append(pod)
    workers = []
    for index, names in sorted(shares.items()):
        mine = set(names)
        seen = by_index.get(index, [])
        done = mine & set().union(*(p.done for p in seen))
        skipped = (mine & set().union(*(p.skipped for p in seen))) - done
        complete = done | skipped
        said = {shard: line for p in seen for shard, line in p.failed.items()}
        failed = {s: said[s] for s in names if s in said and s not in complete}
        if index in completed:
            state, failed = "complete", {}
        elif index in out_of_retries:
            state = "failed"
        elif any(p.phase == "Running" for p in seen):
            state = "running"
        else:
            state = "waiting"
        workers.append(
            Worker(index, len(names), len(mine) if index in completed else len(complete), len(skipped), failed, state)
        )
    return ShardProgress(workers, sorted(out_of_retries))
