"""Which failed pods' logs status reads, and how many: enough to find the first cause, never every pod's tail.

A 1,024-pod run that fails leaves 1,024 failed pods; one of them raised first, the others followed (their NCCL
watchdogs fired, torchrun stopped them). Reading every tail costs a request each; reading the first few by
container `finishedAt` misses the pod that raised first when it hung in teardown and was killed last. So:

- pods whose state names a cause (OOMKilled; a crash signal: 139, 134, 135) come first;
- then the others, taken alternately from both ends of their end times: the pod that failed first by its own
  lines ended first, or, hung while the others' watchdogs fired, last (on the GPU runs it is killed last);
- in batches (`BATCHES`: 4, then 12 more, then 48): after each batch, one diagnosis over what was read; the
  next batch only while no specific cause is found (only what a peer's failure looks like: collective timeouts,
  a peer gone, or consequences), so at most 64 tails per refresh.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.diagnose.events import Diagnosis
    from helm_nemo.status.pods import PodProblem

READ_REASONS = ("OOMKilled", "Error", "Failed", "CrashLoopBackOff", "RunContainerError")
CRASH_CODES = (139, 134, 135)  # 128 + SIGSEGV, SIGABRT, SIGBUS: the pod's own crash, not a stop from outside
BATCHES = (4, 12, 48)


def read_order(problems: list[PodProblem]) -> list[PodProblem]:
    """The failed pods whose logs may hold the cause, in the order to read them."""
    fatal = [p for p in problems if p.fatal and p.reason in READ_REASONS]
    telling = [p for p in fatal if p.reason == "OOMKilled" or p.exit_code in CRASH_CODES]
    rest = sorted((p for p in fatal if p not in telling), key=lambda p: (p.at or "~", p.rank or 0, p.pod))
    telling.sort(key=lambda p: (p.at or "~", p.pod))
    both_ends = []
    low, high = 0, len(rest) - 1
    while low <= high:
        both_ends.append(rest[low])
        if high != low:
            both_ends.append(rest[high])
        low, high = low + 1, high - 1
    return telling + both_ends


def batches(order: list[PodProblem]) -> list[list[PodProblem]]:
    out, start = [], 0
    for size in BATCHES:
        if start >= len(order):
            break
        out.append(order[start : start + size])
        start += size
    return out


def found(diagnosis: Diagnosis) -> bool:
    """A specific cause is named (not only a peer's failure seen from here, nor only consequences)."""
    return diagnosis.cause is not None and diagnosis.cause.role == "cause"
