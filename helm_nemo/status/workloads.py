"""A release's workload object in words: `workload_state` reads a JobSet's or a Job's conditions
(Completed/Complete, Failed, Suspended), the JobSet's restarts and per replicated job ready/active/succeeded/
failed counts. (kueue.py: the Kueue Workload of that object; pods.py: its pods; events.py: Warning events.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from helm_nemo.status.conditions import conditions

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any


@dataclass
class ReplicatedJob:
    """One replicated job of a JobSet (a Job: itself), with its pod counts."""

    name: str
    replicas: int
    ready: int = 0
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    suspended: int = 0


@dataclass
class WorkloadState:
    """A JobSet's or Job's state: `state` is Completed, Failed, Suspended or Active."""

    kind: str
    name: str
    uid: str
    state: str
    reason: str = ""
    message: str = ""
    since: str = ""
    restarts: int = 0
    max_restarts: int | None = None
    pods_expected: int = 0  # pods the workload runs at once (parallelism x replicas)
    jobs: list[ReplicatedJob] = field(default_factory=list)
    created: str = ""
    queue: str = ""  # the kueue.x-k8s.io/queue-name label: Kueue should create a Workload

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "name": self.name,
            "state": self.state,
            "reason": self.reason,
            "message": self.message,
            "since": self.since,
            "restarts": self.restarts,
            "max_restarts": self.max_restarts,
            "pods_expected": self.pods_expected,
            "replicated_jobs": [vars(job) for job in self.jobs],
        }


def workload_state(obj: dict[str, Any]) -> WorkloadState:
    """The state of a JobSet (jobset.x-k8s.io) or a batch/v1 Job."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conds = conditions(obj)
    kind = obj.get("kind", "")
    out = WorkloadState(
        kind,
        meta.get("name", ""),
        meta.get("uid", ""),
        "Active",
        created=meta.get("creationTimestamp", ""),
        queue=(meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name", ""),
    )
    if kind == "JobSet":
        out.restarts = int(status.get("restarts") or 0)
        max_restarts = (spec.get("failurePolicy") or {}).get("maxRestarts")
        out.max_restarts = max_restarts if isinstance(max_restarts, int) else None
        counts = {item.get("name"): item for item in status.get("replicatedJobsStatus") or [] if isinstance(item, dict)}
        for rjob in spec.get("replicatedJobs") or []:
            replicas = int(rjob.get("replicas", 1) or 0)
            parallelism = int((((rjob.get("template") or {}).get("spec") or {}).get("parallelism", 1)) or 0)
            out.pods_expected += replicas * parallelism
            seen = counts.get(rjob.get("name"), {})
            out.jobs.append(
                ReplicatedJob(
                    rjob.get("name", ""),
                    replicas,
                    *(int(seen.get(k) or 0) for k in ("ready", "active", "succeeded", "failed", "suspended")),
                )
            )
        done, failed = conds.get("Completed"), conds.get("Failed")
    else:
        out.pods_expected = int(spec.get("parallelism", 1) or 0)
        out.jobs.append(
            ReplicatedJob(
                meta.get("name", ""),
                1,
                int(status.get("ready") or 0),
                int(status.get("active") or 0),
                int(status.get("succeeded") or 0),
                int(status.get("failed") or 0),
                0,
            )
        )
        done, failed = conds.get("Complete"), conds.get("Failed")
    suspended = conds.get("Suspended")
    if done and done.true:
        out.state, out.reason, out.message, out.since = "Completed", done.reason, done.message, done.time
    elif failed and failed.true:
        out.state, out.reason, out.message, out.since = "Failed", failed.reason, failed.message, failed.time
    elif (suspended and suspended.true) or (spec.get("suspend") is True and not (suspended and not suspended.true)):
        out.state = "Suspended"
        if suspended:
            out.reason, out.message, out.since = suspended.reason, suspended.message, suspended.time
    return out
