"""What a release's pods say without their logs: OOMKilled, exit 137/139/134/135 (128 + the signal), Evicted.

These are events like a log line's (a pod, a time: the container's finishedAt), so the verdict orders them
with the logs' lines: a pod the kernel killed for memory leaves no line in its log, only this state.
"""

from __future__ import annotations

from helm_nemo.diagnose import lines as L
from helm_nemo.diagnose.events import Event

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from helm_nemo.status.pods import PodProblem

# container exit code 128+N: killed by signal N
END = 1 << 62
EXIT_CODES = {137: "sigkill", 139: "segfault", 134: "abort", 135: "bus-error"}


def events(problems: list[PodProblem]) -> list[Event]:
    """One event per failed pod whose state names a class."""
    by_id = L.by_id()
    out = []
    for problem in problems:
        if not problem.fatal:
            continue
        sig_id = ""
        if problem.reason == "OOMKilled":
            sig_id = "host-oom-killer"
        elif problem.reason in ("Evicted", "Preempted", "Preempting", "DeadlineExceeded"):
            sig_id = "k8s-stopped"  # stopped from outside: the kubelet (node pressure), the scheduler, a drain
        elif problem.exit_code in EXIT_CODES:
            sig_id = EXIT_CODES[problem.exit_code]
        sig = by_id.get(sig_id)
        if sig is None:
            continue
        at = L.stamp(problem.at + " ")[0] if problem.at else ""
        words = problem.words or ""
        text = words if words.lower().startswith(problem.reason.lower()) else f"{problem.reason}: {words}".rstrip(": ")
        out.append(
            Event(
                sig.id,
                sig.klass,
                sig.role,
                sig.title,
                sig.hint,
                problem.pod,
                0,
                text,
                at,
                str(problem.rank) if problem.rank is not None else "",
                pos=END,  # the state is the pod's end: no training step of its log comes after it
            )
        )
    return out


def is_state(event: Event) -> bool:
    """The event is a pod's state (this module's), not a line of its log."""
    return event.pos == END and event.line == 0
