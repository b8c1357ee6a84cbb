"""The Kueue Workload of a job, in words: admitted (by which ClusterQueue), finished, evicted, or pending
and why: quota, topology or other, with Kueue's message (its `couldn't assign flavors to pod set …:` prefix
dropped)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from helm_nemo.status.conditions import conditions

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

KUEUE_JOB_UID = "kueue.x-k8s.io/job-uid"


@dataclass
class KueueState:
    """The Kueue Workload of a job: `state` admitted | pending | finished | evicted; `why` quota | topology |
    other for a pending one (with Kueue's message)."""

    name: str
    state: str
    why: str = ""
    message: str = ""
    since: str = ""
    cluster_queue: str = ""
    queue: str = ""

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state,
            "why": self.why,
            "message": self.message,
            "since": self.since,
            "cluster_queue": self.cluster_queue,
            "queue": self.queue,
        }

    def words(self) -> str:
        if self.state == "pending":
            what = {"quota": "pending on quota", "topology": "pending on topology"}.get(self.why, "pending")
            return f"Kueue: {what}" + (f": {self.message}" if self.message else "")
        if self.state == "admitted":
            return "Kueue: admitted" + (f" by {self.cluster_queue}" if self.cluster_queue else "")
        return f"Kueue: {self.state}" + (f": {self.message}" if self.message else "")


_TOPOLOGY = re.compile(
    r'topology "[^"]*" (doesn\'t allow to fit|allows to fit only)|supports only TopologyAwareScheduling'
    r"|podset-(required|preferred|slice-required)-topology",
    re.I,
)
_QUOTA = re.compile(
    r"insufficient (unused )?quota|borrowing limit|exceeds? .*quota|resource \S+ unavailable in "
    r"ClusterQueue|maximum capacity|not found in ClusterQueue|no flavor",
    re.I,
)
_FLAVORS = re.compile(r"^couldn't assign flavors to pod set [^:]+: ")


def kueue_state(workload: dict[str, Any]) -> KueueState:
    meta = workload.get("metadata") or {}
    status = workload.get("status") or {}
    conds = conditions(workload)
    out = KueueState(
        meta.get("name", ""),
        "pending",
        queue=(workload.get("spec") or {}).get("queueName", ""),
        cluster_queue=(status.get("admission") or {}).get("clusterQueue", ""),
    )
    finished, evicted = conds.get("Finished"), conds.get("Evicted")
    admitted, reserved = conds.get("Admitted"), conds.get("QuotaReserved")
    if finished and finished.true:
        out.state, out.message, out.since = "finished", finished.message, finished.time
    elif evicted and evicted.true:
        out.state, out.message, out.since = "evicted", f"{evicted.reason}: {evicted.message}".strip(": "), evicted.time
    elif admitted and admitted.true:
        out.state, out.since = "admitted", admitted.time
    elif admitted is None and reserved and reserved.true and not status.get("admissionChecks"):
        out.state, out.since = "admitted", reserved.time  # Kueue before the Admitted condition
    else:
        pending = reserved if reserved and not reserved.true else None
        message = pending.message if pending else ""
        if not message and reserved and reserved.true:
            checks = [c for c in status.get("admissionChecks") or [] if c.get("state") != "Ready"]
            message = (
                "; ".join(
                    f"admission check {c.get('name')}: {c.get('state')} {c.get('message', '')}".strip() for c in checks
                )
                or "quota reserved, waiting for admission checks"
            )
        out.message = _FLAVORS.sub("", message)
        out.since = pending.time if pending else ""
        reason = pending.reason if pending else ""
        if _TOPOLOGY.search(message) or "Topology" in reason:
            out.why = "topology"
        elif _QUOTA.search(message) or reason in ("QuotaExhausted", "Inadmissible"):
            out.why = "quota"
        else:
            out.why = "other"
        if not message:
            out.message = "not admitted yet (no message from Kueue: is the LocalQueue there?)"
    return out
