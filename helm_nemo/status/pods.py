"""A release's pods in words: pure functions over the API's pod dicts.

`pod_problem`: why one pod is unhealthy (FailedScheduling with the scheduler's message condensed,
SchedulingGated, ImagePullBackOff and the other waiting reasons that do not fix themselves, CrashLoopBackOff,
OOMKilled, exit codes with their signal, Evicted); `summarize_pods`: pods by phase and restarts, identical
reasons of many pods grouped (`ProblemGroup`), the most actionable first; `pod_rank` / `pod_job_index`: where a
pod stands in the run (the labels the Job and JobSet controllers put on it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from helm_nemo.status.conditions import conditions, one_line

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

# Kubernetes labels the workload controllers put on pods
JOB_INDEX_LABELS = ("batch.kubernetes.io/job-completion-index", "jobset.sigs.k8s.io/job-index")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"

# Waiting reasons that do not fix themselves (the pod will not start until someone acts)
WAITING_FAILURES = {
    "ImagePullBackOff": "cannot pull the image",
    "ErrImagePull": "cannot pull the image",
    "InvalidImageName": "the image name is invalid",
    "ErrImageNeverPull": "the image is not on the node and imagePullPolicy is Never",
    "CreateContainerConfigError": "the container's configuration is wrong (a missing Secret or ConfigMap?)",
    "CreateContainerError": "the container cannot be created",
    "RunContainerError": "the container cannot be started",
    "CrashLoopBackOff": "the container keeps crashing",
}
SIGNALS = {
    129: "SIGHUP",
    130: "SIGINT",
    134: "SIGABRT",
    135: "SIGBUS",
    136: "SIGFPE",
    137: "SIGKILL",
    139: "SIGSEGV",
    143: "SIGTERM",
}


@dataclass
class PodProblem:
    """Why one pod is unhealthy: `reason` is a short key (FailedScheduling, ImagePullBackOff, OOMKilled, …),
    `words` the explanation, `at` when (API time), `fatal` whether it stops the run by itself."""

    pod: str
    reason: str
    words: str
    container: str = ""
    exit_code: int | None = None
    at: str = ""
    fatal: bool = True
    rank: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "reason": self.reason,
            "message": self.words,
            "container": self.container,
            "exit_code": self.exit_code,
            "at": self.at,
            "rank": self.rank,
        }


_NODES_AVAILABLE = re.compile(r"^(\d+)/(\d+) nodes are available: (.*)$")


def condense_scheduling(message: str) -> str:
    """The scheduler's FailedScheduling message, short: `0/54 nodes available: 53 Insufficient nvidia.com/gpu,
    1 untolerated taint {nvidia.com/gpu: present}` (reasons by count, the preemption part dropped)."""
    text = one_line(message)
    text = re.split(r"\.?\s*preemption: ", text, maxsplit=1)[0].rstrip(".")
    match = _NODES_AVAILABLE.match(text)
    if not match:
        return text
    parts = []
    # the reasons end at the first sentence's end: what follows is the post-filters' own words (Kubernetes
    # 1.32+: `. no new claims to deallocate, preemption: …`)
    reasons = re.split(r"\.(?:\s|$)", match.group(3), maxsplit=1)[0]
    for part in re.split(r",\s*(?=\d+ )", reasons):
        count, _, what = part.strip().rstrip(".").partition(" ")
        if not count.isdigit():  # `pod has unbound immediate PersistentVolumeClaims`: no count, said as is
            parts.append((0, part.strip().rstrip(".")))
            continue
        what = (
            what.replace("node(s) had ", "")
            .replace("node(s) didn't match Pod's ", "didn't match ")
            .replace("node(s) didn't ", "didn't ")
            .replace("node(s) were ", "")
            .replace("node(s) ", "")
        )
        parts.append((int(count), what))
    parts.sort(key=lambda p: -p[0])
    return f"{match.group(1)}/{match.group(2)} nodes available: " + ", ".join(
        f"{n} {what}" if n else what for n, what in parts
    )


def pod_rank(pod: dict[str, Any]) -> int | None:
    """The pod's rank: its Job completion index (node rank of the training)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    value = labels.get(COMPLETION_INDEX) or (meta.get("annotations") or {}).get(COMPLETION_INDEX)
    return int(value) if value is not None and str(value).isdigit() else None


def pod_job_index(pod: dict[str, Any]) -> int:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    value = labels.get(JOBSET_JOB_INDEX, "0")
    return int(value) if str(value).isdigit() else 0


def _terminated_words(term: dict[str, Any]) -> tuple[str, int | None, str]:
    code = term.get("exitCode")
    reason = term.get("reason") or ""
    signal = SIGNALS.get(code) if isinstance(code, int) else None
    words = f"exit code {code}" + (f" ({signal})" if signal else "")
    if term.get("signal"):
        words += f", signal {term['signal']}"
    message = one_line(term.get("message") or "")
    if message:
        words += f": {message[:200]}"
    return words, code if isinstance(code, int) else None, reason


def pod_problem(pod: dict[str, Any], workload_container: str = "workload") -> PodProblem | None:
    """Why this pod is unhealthy, or None when it is not (running, succeeded, or starting normally)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    name = meta.get("name", "")
    rank = pod_rank(pod)
    phase = status.get("phase", "")
    if status.get("reason") == "Evicted":
        return PodProblem(
            name,
            "Evicted",
            f"evicted: {one_line(status.get('message') or '')}".rstrip(": "),
            at=_pod_time(status),
            rank=rank,
        )
    conds = conditions(pod)
    scheduled = conds.get("PodScheduled")
    if phase == "Pending" and scheduled and not scheduled.true:
        if scheduled.reason == "SchedulingGated":
            gates = ", ".join(g.get("name", "") for g in (pod.get("spec") or {}).get("schedulingGates") or [])
            return PodProblem(
                name,
                "SchedulingGated",
                f"waiting for scheduling gate(s) {gates or '?'}",
                at=scheduled.time,
                fatal=False,
                rank=rank,
            )
        return PodProblem(
            name,
            "FailedScheduling",
            condense_scheduling(scheduled.message) or scheduled.reason,
            at=scheduled.time,
            fatal=False,
            rank=rank,
        )
    statuses = [("init", s) for s in status.get("initContainerStatuses") or []] + [
        ("main", s) for s in status.get("containerStatuses") or []
    ]
    # the training container first: its trouble is the one that matters
    statuses.sort(key=lambda item: item[1].get("name") != workload_container)
    for _, cstatus in statuses:
        state = cstatus.get("state") or {}
        last = (cstatus.get("lastState") or {}).get("terminated") or {}
        container = cstatus.get("name", "")
        waiting = state.get("waiting") or {}
        if waiting.get("reason") in WAITING_FAILURES:
            reason = waiting["reason"]
            words = WAITING_FAILURES[reason]
            detail = one_line(waiting.get("message") or "")
            if reason == "CrashLoopBackOff" and last:
                term_words, code, term_reason = _terminated_words(last)
                reason_word = f"{term_reason}, " if term_reason and term_reason != "Error" else ""
                words += f" (restarted {cstatus.get('restartCount', 0)}x; last: {reason_word}{term_words})"
                if term_reason == "OOMKilled":
                    return PodProblem(
                        name,
                        "OOMKilled",
                        f"out of memory (OOMKilled), {words}",
                        container,
                        code,
                        last.get("finishedAt", ""),
                        rank=rank,
                    )
                return PodProblem(name, reason, words, container, code, last.get("finishedAt", ""), rank=rank)
            if detail:
                words += f": {detail[:300]}"
            return PodProblem(name, reason, words, container, at=_pod_time(status), rank=rank)
        term = state.get("terminated") or {}
        if term and term.get("exitCode", 0) != 0:
            words, code, reason = _terminated_words(term)
            if reason == "OOMKilled":
                return PodProblem(
                    name,
                    "OOMKilled",
                    f"out of memory (OOMKilled), {words}",
                    container,
                    code,
                    term.get("finishedAt", ""),
                    rank=rank,
                )
            return PodProblem(name, "Error", words, container, code, term.get("finishedAt", ""), rank=rank)
        if last.get("reason") == "OOMKilled" and phase == "Running":
            words, code, _ = _terminated_words(last)
            return PodProblem(
                name,
                "OOMKilled",
                f"was out of memory (OOMKilled) and restarted, {words}",
                container,
                code,
                last.get("finishedAt", ""),
                fatal=False,
                rank=rank,
            )
    if phase == "Failed":
        message = one_line(status.get("message") or "")
        return PodProblem(
            name, status.get("reason") or "Failed", message or "the pod failed", at=_pod_time(status), rank=rank
        )
    return None


def _pod_time(status: dict[str, Any]) -> str:
    times: list[str] = [
        c.get("lastTransitionTime") for c in status.get("conditions") or [] if c.get("lastTransitionTime")
    ]
    start: str = status.get("startTime", "")
    return max(times) if times else start


@dataclass
class ProblemGroup:
    """Pods with the same reason and message: one line for 400 pods that cannot be scheduled."""

    reason: str
    words: str
    pods: list[str]
    at: str = ""
    fatal: bool = True
    exit_code: int | None = None
    container: str = ""

    def detail(self) -> str:
        """`ErrImagePull (cannot pull the image: …)`, `exit code 1`, `OOMKilled`: the group's reason in words."""
        if self.reason in WAITING_FAILURES:
            return f"{self.reason} ({self.words})"
        return self.words if self.reason in ("Error", "Failed", "Evicted") else self.reason

    def as_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "message": self.words,
            "pods": self.pods,
            "count": len(self.pods),
            "at": self.at,
            "exit_code": self.exit_code,
            "container": self.container,
        }


@dataclass
class PodSummary:
    """The pods of a release: counts by phase, ready, restarts, and the unhealthy ones grouped."""

    total: int = 0
    phases: dict[str, int] = field(default_factory=dict)
    ready: int = 0
    restarts: int = 0
    problems: list[PodProblem] = field(default_factory=list)
    groups: list[ProblemGroup] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "phases": self.phases,
            "ready": self.ready,
            "restarts": self.restarts,
            "problems": [g.as_json() for g in self.groups],
        }

    def counts(self) -> str:
        order = ("Running", "Pending", "Succeeded", "Failed", "Unknown")
        parts = [f"{self.phases[p]} {p}" for p in order if self.phases.get(p)]
        parts += [f"{n} {p}" for p, n in sorted(self.phases.items()) if p not in order]
        return ", ".join(parts) or "none"


SCHEDULING = ("FailedScheduling", "SchedulingGated")


def not_scheduled(summary: PodSummary) -> list[ProblemGroup]:
    """The groups of pods the scheduler has not placed (no node fits, or a scheduling gate)."""
    return [g for g in summary.groups if g.reason in SCHEDULING]


def cannot_start(summary: PodSummary) -> list[ProblemGroup]:
    """The groups of pods placed on a node whose container cannot start (WAITING_FAILURES: an image that
    cannot be pulled, a missing Secret or ConfigMap key, ...): nothing runs until someone acts."""
    return [g for g in summary.groups if g.fatal and g.reason in WAITING_FAILURES]


# Which reason explains a group first (the most actionable at the top)
_ORDER = (
    "OOMKilled",
    "Error",
    "Evicted",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
    "Failed",
    "FailedScheduling",
    "SchedulingGated",
)


def summarize_pods(pods: list[dict[str, Any]], workload_container: str = "workload") -> PodSummary:
    out = PodSummary()
    for pod in pods:
        status = pod.get("status") or {}
        phase = status.get("phase") or "Unknown"
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            phase = "Terminating"
        out.total += 1
        out.phases[phase] = out.phases.get(phase, 0) + 1
        statuses = status.get("containerStatuses") or []
        out.restarts += sum(int(s.get("restartCount") or 0) for s in statuses)
        if statuses and all(s.get("ready") for s in statuses):
            out.ready += 1
        problem = pod_problem(pod, workload_container)
        if problem:
            out.problems.append(problem)
    groups: dict[tuple[str, str], ProblemGroup] = {}
    for problem in out.problems:
        key = (problem.reason, problem.words)
        group = groups.get(key)
        if group is None:
            group = groups[key] = ProblemGroup(
                problem.reason, problem.words, [], problem.at, problem.fatal, problem.exit_code, problem.container
            )
        group.pods.append(problem.pod)
        group.at = min(group.at, problem.at) if group.at and problem.at else group.at or problem.at
    rank = {reason: index for index, reason in enumerate(_ORDER)}
    # the earliest failure first: the pod that failed first usually caused the others
    out.groups = sorted(groups.values(), key=lambda g: (not g.fatal, rank.get(g.reason, len(rank)), g.at or "~"))
    return out
