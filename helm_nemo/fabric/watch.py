"""Where the temporary nccl-test release stands, from its Job, its pods and its Kueue Workload: the same
words as `helm nemo status` (helm_nemo/status/: pod reasons, the scheduler's message condensed, Kueue's
pending reason), so a test whose pods never start ends with why, not with a timeout alone.

States: `done` (rank 0 ended: its log holds the result), `failed` (nothing will run until someone acts: an
image that cannot be pulled, a missing Secret, the Job failed before rank 0 ended), `pending` (not placed
yet: Kueue has not admitted it, or the scheduler finds no node; the caller gives it a patience), `running`.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

DONE, FAILED, PENDING, RUNNING = "done", "failed", "pending", "running"


@dataclass
class Seen:
    """One look at the test: its state, the status words, rank 0's pod and whether it succeeded (`done`),
    and the nodes the pods were placed on."""

    state: str
    words: str
    rank0: str | None = None
    rank0_ok: bool = False
    nodes: tuple[str, ...] = ()
    finished_at: str = ""  # rank 0's test container ended (API time), when done


def look(job: dict[str, Any] | None, pods: list[dict[str, Any]], workload: dict[str, Any] | None) -> Seen:
    from helm_nemo.status import pods as pod_states
    from helm_nemo.status.kueue import kueue_state
    from helm_nemo.status.workloads import workload_state

    nodes = tuple(sorted({n for p in pods if (n := (p.get("spec") or {}).get("nodeName"))}))
    rank0 = next(
        (p for p in pods if pod_states.pod_rank(p) == 0 and not (p.get("metadata") or {}).get("deletionTimestamp")),
        None,
    )
    phase = ((rank0 or {}).get("status") or {}).get("phase")
    if rank0 is not None and phase in ("Succeeded", "Failed"):
        name = rank0["metadata"]["name"]
        problem = pod_states.pod_problem(rank0)
        words = f"rank 0 ({name}) {phase.lower()}" + (f": {problem.words}" if problem and phase == "Failed" else "")
        ended = [
            ((s.get("state") or {}).get("terminated") or {}).get("finishedAt") or ""
            for s in (rank0.get("status") or {}).get("containerStatuses") or []
            if s.get("name") == "workload"
        ]
        return Seen(DONE, words, name, phase == "Succeeded", nodes, ended[0] if ended else "")
    summary = pod_states.summarize_pods(pods)
    stuck = pod_states.cannot_start(summary)
    if stuck:
        group = stuck[0]
        return Seen(FAILED, f"{len(group.pods)} pod(s) cannot start: {group.detail()}", nodes=nodes)
    state = workload_state(job) if job else None
    if state is not None and state.state == "Failed":
        fatal = [g for g in summary.groups if g.fatal]
        why = f"; {fatal[0].detail()} ({', '.join(fatal[0].pods[:3])})" if fatal else ""
        return Seen(FAILED, f"the Job failed before rank 0 ended: {state.reason} {state.message}".strip() + why)
    if state is not None and state.state == "Suspended":
        if workload is None:
            return Seen(PENDING, f"Job suspended, waiting for Kueue (queue {state.queue or '?'})")
        return Seen(PENDING, kueue_state(workload).words())
    unplaced = pod_states.not_scheduled(summary)
    if unplaced:
        group = unplaced[0]
        return Seen(PENDING, f"{len(group.pods)} pod(s) not scheduled: {group.words}", nodes=nodes)
    if not pods:
        return Seen(PENDING, "no pod yet")
    return Seen(RUNNING, f"pods: {summary.counts()}", nodes=nodes)
