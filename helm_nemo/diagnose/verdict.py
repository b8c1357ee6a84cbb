"""One verdict over the logs of a run: the first cause, what followed from it, and for a hang who is behind.

Order: the earliest fatal event across the logs by the kubelet's time when every log with a failure has it,
else by the order of the logs given and the line. Three tiers, each only when the one before is empty:
  1. causes: a specific failure (CUDA OOM, a signal, a missing file, a Python exception, a worker's exit);
  2. weak causes: what a peer's failure looks like from here (a collective timeout, a peer gone, the store
     lost) — the first cause only when nothing specific is anywhere (a hang);
  3. consequences: survivors' SIGTERM, torchrun's ChildFailedError, aborted communicators.
Without times, a specific class beats a generic one (a Python exception, a worker's exit) across logs.
A failure line followed by more training steps in the same log did not end the run (a retry that
succeeded) and is a warning; an abort in a run whose collective timed out is the watchdog's and a
consequence.
"""

from __future__ import annotations

from helm_nemo.diagnose.events import TIERS, Diagnosis, Event, Hang, SourceScan, Steps
from helm_nemo.diagnose.steps import went_on

# without times across logs, a specific class elsewhere is the first cause before these (a stop from outside is
# often the scheduler ending the others after one failed)
GENERIC = ("python-exception", "worker-exit", "stopped")
KILLED_IN_TEARDOWN = "killed after another pod failed: the set stops the others (SIGKILL after the grace period)"


def decide(scans: list[SourceScan], extra: list[Event] | None = None, *, kind: str = "file") -> Diagnosis:
    """The diagnosis of the logs `scans` (in the order given) and `extra` events (pod states)."""
    order = {scan.source: index for index, scan in enumerate(scans)}
    for event in extra or []:
        order.setdefault(event.source, len(order))
    events = [event for scan in scans for event in scan.events] + list(extra or [])
    marks = {scan.source: scan.marks for scan in scans}
    for event in events:
        if event.role in ("cause", "weak") and not _lasting(event) and went_on(marks.get(event.source, []), event.pos):
            event.role, event.why = "warning", "training went on after it"
    _after_the_error(scans)
    if any(scan.steps for scan in scans):
        for event in events:
            if event.klass == "rendezvous" and event.role == "cause" and _started_before(scans, event):
                event.role, event.why = "weak", "the store was lost after training started (its host stopped)"
    for event in events:
        if event.signature == "abort" and event.role == "cause" and _timed_out_before(events, event):
            event.role, event.why = "consequence", "the watchdog aborts the process after a collective timeout"
        if event.signature == "sigkill" and event.role == "cause" and _killed_after_another(events, event):
            event.role, event.why = "consequence", KILLED_IN_TEARDOWN
    fatal = [e for e in events if e.fatal]
    stamped = bool(fatal) and all(e.at for e in fatal)

    def key(event: Event) -> tuple[object, ...]:
        generic = event.klass in GENERIC or event.signature in GENERIC
        if stamped:
            return (TIERS[event.role], event.at, order[event.source], event.line)
        return (TIERS[event.role], generic, order[event.source], event.line)

    fatal.sort(key=key)
    cause = fatal[0] if fatal else None
    if cause is not None and cause.signature == "nccl-error":
        cause = _nccl_own_words(fatal, cause)
    consequences = []
    for event in sorted(fatal[1:], key=lambda e: (e.at, order[e.source], e.line)):
        if not event.why:
            event.why = "after the first cause"
        consequences.append(event)
    diagnosis = Diagnosis(cause, consequences, events, sources=len(order), kind=kind)
    if cause is not None and cause.klass == "nccl-timeout":
        diagnosis.hang = behind(scans)
    return diagnosis


NCCL_WARN_AFTER = 30  # lines: a launcher (Ray) may print a worker's NCCL WARN a little after the driver's exception


def _nccl_own_words(fatal: list[Event], wrapper: Event) -> Event:
    """torch's `NCCL error in: …` (DistBackendError, `unhandled cuda error`) after NCCL's own WARN in the same log:
    the WARN says what failed (`failed to open CUDA IPC handle : 217 peer access is not supported`), the wrapper is
    its consequence. A WARN a few lines after the wrapper counts too: launchers print workers' output late."""
    said = [
        e
        for e in fatal
        if "NCCL WARN" in e.text and e.source == wrapper.source and e.line <= wrapper.line + NCCL_WARN_AFTER
    ]
    if not said:
        return wrapper
    first = min(said, key=lambda e: e.pos)
    first.role, first.why = "cause", ""
    wrapper.role, wrapper.why = "consequence", "torch's report of the NCCL error NCCL warned of before it"
    fatal.remove(first)
    fatal.insert(0, first)
    return first


def _after_the_error(scans: list[SourceScan]) -> None:
    """torchrun's report that a worker exited (an exit code, ChildFailedError) after an error that worker's
    log already shows is that error's consequence."""
    for scan in scans:
        first = None
        for event in scan.events:
            if event.signature in ("worker-exit", "signal") and first is not None and event.role == "cause":
                event.role, event.why = "consequence", "the worker's exit after the error above"
            if first is not None and event.signature == first.signature and not first.rank and event.rank:
                # torchrun's log line (`failed (exitcode: -11) local_rank: 0`) names no global rank; its summary does
                first.rank, first.node = event.rank, first.node or event.node
            if event.fatal and event.role in ("cause", "weak") and first is None:
                first = event


def _timed_out_before(events: list[Event], abort: Event) -> bool:
    """A collective of the same log timed out before `abort`: the watchdog took its own process down. A timeout
    seen in another pod (a peer's watchdog, or its dump request) says nothing of this abort."""
    return any(
        e.klass == "nccl-timeout" and e.fatal and e.source == abort.source and (e.at, e.pos) <= (abort.at, abort.pos)
        for e in events
    )


def _killed_after_another(events: list[Event], killed: Event) -> bool:
    """A pod whose container was SIGKILLed (exit 137 without the kubelet's OOMKilled: no line of its own) after
    another pod had failed: the set stopping its other pods (SIGKILL once the grace period is over), not a cause.
    The rank that hangs in a collective exits so, last, while the others' watchdogs have fired before."""
    from helm_nemo.diagnose.pods import is_state

    return is_state(killed) and any(
        e.fatal and e.source != killed.source and e.at and e.at < killed.at for e in events if e is not killed
    )


def _started_before(scans: list[SourceScan], event: Event) -> bool:
    """Training had started (a step line) before `event`: in any log by the kubelet's time, else in its own."""
    if event.at:
        return any(s.at and s.at < event.at for scan in scans for s in scan.steps)
    mine = next((scan for scan in scans if scan.source == event.source), None)
    return bool(mine and any(pos < event.pos for pos, _ in mine.marks))


def _lasting(event: Event) -> bool:
    from helm_nemo.diagnose import lines as L

    sig = L.by_id().get(event.signature)
    return bool(sig and sig.lasting)


def behind(scans: list[SourceScan]) -> Hang:
    """The ranks (or logs) whose last training step is lower than the others'."""
    every: list[Steps] = [steps for scan in scans for steps in scan.steps]
    hang = Hang()
    if len(every) < 2:
        if scans and len(every) < len(scans):
            hang.notes.append("not every log has step lines: which rank is behind is not known from the logs")
        return hang
    top = max(s.step for s in every)
    hang.ahead_step = top
    hang.behind = sorted((s for s in every if s.step < top), key=lambda s: s.step)
    silent = [scan.source for scan in scans if not scan.steps]
    if silent:
        hang.notes.append(f"no step line in {', '.join(silent[:4])}")
    return hang
