"""Stall, then stop: a run stopped from outside (a cancel, a deadline, a preemption) whose last training step came
long before the stop did not fail at the stop: it had stalled. Said so with status's own rule (status/stall_rule.py:
no step for more than max(10 x the step time, 5 min)), applied at the time of the stop, on the logs' own times (the
kubelet's, on the step lines).
"""

from __future__ import annotations

from datetime import datetime
from statistics import median

from helm_nemo.diagnose import lines as L
from helm_nemo.diagnose.events import SourceScan
from helm_nemo.diagnose.steps import read_steps
from helm_nemo.status.stall_rule import stall_after

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.diagnose.events import Diagnosis

WINDOW = 20  # step intervals the step time is the median of
HINT = (
    "the run had stopped making progress before it was stopped: find where it waited (py-spy dump on a rank, the "
    "flight recorder with workload.flightRecorder: true, a data loader or a checkpoint save on slow storage, one "
    "rank behind the others); helm nemo status says STALLED while it happens"
)


def _when(key: str) -> datetime | None:
    """A kubelet time as lines.stamp keys it (`2026-01-01T12:00:00.123456789`, UTC unless it says) -> datetime."""
    head, _, rest = key.partition(".")
    digits, zone = rest[:9], rest[9:] or "+00:00"
    try:
        return datetime.fromisoformat(f"{head}.{digits[:6].ljust(6, '0')}{zone}")
    except ValueError:
        return None


def last_steps(text: str) -> tuple[int, datetime, float] | None:
    """(the last step, when its line was written, the median time of a step) of a kubelet-stamped log."""
    scan = SourceScan("")
    read_steps(text, scan)
    stamped = []
    for pos, step in scan.marks[-(WINDOW + 1) :]:
        end = text.find("\n", pos)  # the whole line: a `kubectl logs --prefix` pod name may come before the time
        when = _when(L.stamp(text[pos : end if end >= 0 else len(text)])[0])
        if when is not None:
            stamped.append((step, when))
    if len(stamped) < 2:
        return None
    gaps = [
        (b[1] - a[1]).total_seconds() / (b[0] - a[0]) for a, b in zip(stamped, stamped[1:], strict=False) if b[0] > a[0]
    ]
    if not gaps:
        return None
    return stamped[-1][0], stamped[-1][1], median(gaps)


def explain(diagnosis: Diagnosis, texts: list[tuple[str, str]]) -> None:
    """Turn a `stopped` first cause into `stall` when the logs' last step came long before it."""
    cause = diagnosis.cause
    if cause is None or cause.klass != "stopped" or not cause.at:
        return
    stop = _when(cause.at)
    if stop is None:
        return
    latest: tuple[int, datetime, float] | None = None
    for _name, text in texts:
        found = last_steps(text)
        if found is not None and found[1] <= stop and (latest is None or found[1] > latest[1]):
            latest = found
    if latest is None:
        return
    step, at, step_time = latest
    silent = (stop - at).total_seconds()
    if silent <= stall_after(step_time):
        return
    cause.klass = "stall"
    cause.title = (
        f"stopped after {duration(silent)} without a step (last step {step:,}; steps took {step_time:.1f} s): "
        f"{cause.title}"
    )
    cause.hint = HINT


def duration(seconds: float) -> str:
    """`25 min`, `2 h 05 min`, `50 s`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"
