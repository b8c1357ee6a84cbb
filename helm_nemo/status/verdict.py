"""One line per release, and the exit code: 0 healthy or completed, 1 failed or stalled, 3 not found.

States, in the order they are decided:

    NotFound   nothing of the release in the namespace (no JobSet/Job, pod or claim)     exit 3
    Completed  the JobSet/Job completed                                                  exit 0
    Failed     the JobSet/Job failed, or a pod failed for good (OOMKilled, exit code,
               evicted, image pull failure, crash loop, bad container config)          exit 1
    Stalled    training runs but no step for longer than the stall limit               exit 1
    Queued     suspended: Kueue has not admitted it (pending on quota / topology / …)  exit 0
    Suspended  suspended, no Kueue Workload                                            exit 0
    Pending    pods waiting to be scheduled (FailedScheduling) or to start             exit 0
    Running    pods running (with the progress when the log shows steps)               exit 0
    Ready      a release without a job (storage, supervisor) whose pods/claims are up  exit 0

A data-prep release (its Job labelled helm-nemo.dev/data-prep) says its shards instead of training steps:
Completed with `6/6 shards (2 skipped)`, Running with `shards 4/6 done (worker 0: 2/3, worker 1: 2/3)`,
Failed when the Job failed or an index ran out of retries (`failedIndexes`: the Job can no longer
complete), naming the index and the shard's `failed` line. A pod that exited non-zero is not a failure by
itself there: the Job retries its index (backoffLimitPerIndex) and the retry skips the shards done.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from helm_nemo.status.cluster import ReleaseStatus
from helm_nemo.status.conditions import clock
from helm_nemo.status.pods import cannot_start, not_scheduled
from helm_nemo.status.progress import duration

EXIT_OK, EXIT_FAILED, EXIT_NOT_FOUND = 0, 1, 3
FAILED_STATES = ("Failed", "Stalled")


@dataclass
class Verdict:
    """The state of a release and its one-line verdict."""

    state: str
    line: str

    @property
    def exit_code(self) -> int:
        if self.state in FAILED_STATES:
            return EXIT_FAILED
        return EXIT_NOT_FOUND if self.state == "NotFound" else EXIT_OK


def figures(status: ReleaseStatus) -> str:
    """`1234/5000 steps, 4.1 s/step, 402 TFLOPS/GPU, MFU 41 %, 1.2 M tokens/s, ETA 4 h 22 m`."""
    p = status.progress
    if p is None:
        return ""
    parts = [f"{p.steps_done}/{p.max_steps} steps" if p.max_steps else f"step {p.steps_done}"]
    if p.step_time_s is not None:
        parts.append(f"{_num(p.step_time_s)} s/step")
    if p.tflops_per_gpu is not None:
        parts.append(f"{p.tflops_per_gpu:.0f} TFLOPS/GPU")
    if p.mfu is not None:
        parts.append(f"MFU {p.mfu * 100:.1f} %")
    if p.tokens_per_s is not None:
        parts.append(f"{_si(p.tokens_per_s)} tokens/s")
    if p.eta_s is not None and p.max_steps and p.steps_done < p.max_steps:
        parts.append(f"ETA {duration(p.eta_s)}")
    return ", ".join(parts)


def _num(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _si(value: float) -> str:
    for limit, suffix in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if value >= limit:
            return f"{value / limit:.3g}{suffix}"
    return f"{value:.3g}"


def _first_failure(status: ReleaseStatus) -> str:
    """`pod r-workload-0-1 (rank 1) cuda-oom at 12:04: torch.OutOfMemoryError: CUDA out of memory…`: the first
    cause over the pods' logs and states (helm_nemo.diagnose); else the first failed pod's state."""
    diagnosis = status.diagnosis
    if diagnosis is not None and diagnosis.cause is not None:
        cause = diagnosis.cause
        rank = f" (rank {cause.rank})" if cause.rank else ""
        at = f" at {clock(_api_time(cause.at))}" if clock(_api_time(cause.at)) else ""
        hang = diagnosis.hang.words() if diagnosis.hang is not None else ""
        return f"pod {cause.source}{rank} {cause.klass or cause.signature}{at}: {core(cause.text)}" + (
            f" ({hang})" if hang else ""
        )
    fatal = [g for g in status.pods.groups if g.fatal]
    if not fatal:
        return ""
    group = fatal[0]
    who = f"pod {group.pods[0]}" + (f" (+{len(group.pods) - 1} more)" if len(group.pods) > 1 else "")
    at = f" at {clock(group.at)}" if clock(group.at) else ""
    return f"{who} {group.detail()}{at}"


def _api_time(at: str) -> str:
    """The diagnosis' sortable time (`2026-01-05T10:00:01.123456789`) as an API time clock() reads."""
    return at[:19] + "Z" if at else ""


_LINE_PREFIX = re.compile(r"^(\s*\[[^\]]*\]:?)+\s*|^\S+:\d+:\d+ \[\d+\] ")


def core(line: str, width: int = 100) -> str:
    """A log line without its launcher/logger prefixes (`[default3]:[rank27]:[E1125 12:04:11 X.cpp:616]`),
    cut to `width` characters."""
    text = _LINE_PREFIX.sub("", line).strip() or line.strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def shard_words(status: ReleaseStatus) -> str:
    """`6/6 shards (2 skipped)` of a data-prep release, or empty."""
    shards = status.shards
    if shards is None:
        return ""
    extra = [f"{shards.skipped} skipped"] if shards.skipped else []
    extra += [f"{len(shards.failed)} failed"] if shards.failed else []
    return f"{shards.done}/{shards.total} shards" + (f" ({', '.join(extra)})" if extra else "")


def _shard_failure(status: ReleaseStatus) -> str:
    """`index 1: shard 03 failed: sha256 mismatch (…)` of a failed data-prep Job, or empty."""
    shards = status.shards
    if shards is None:
        return ""
    failed = shards.failed
    indexes = shards.failed_indexes or sorted({worker for worker, _, _ in failed})
    if not indexes:
        return ""
    out = f"index {', '.join(map(str, indexes))}" if len(indexes) == 1 else f"indexes {', '.join(map(str, indexes))}"
    if shards.failed_indexes and not (status.workload and status.workload.state == "Failed"):
        out += " out of retries (the Job can no longer complete)"
    mine = [line for worker, _, line in failed if worker in indexes]
    if mine:
        out += f": {core(mine[0].removeprefix(DATA_PREP_PREFIX), 160)}"
        out += f" (+{len(mine) - 1} more failed shard(s))" if len(mine) > 1 else ""
    return out


DATA_PREP_PREFIX = "helm-nemo data-prep: "


def verdict(status: ReleaseStatus) -> Verdict:
    work, pods, kueue, p = status.workload, status.pods, status.kueue, status.progress
    if not status.found:
        return Verdict("NotFound", f"not found in namespace {status.namespace}")
    if status.data_prep:
        found = _data_prep_verdict(status)
        if found is not None:
            return found
    if work is not None and work.state == "Completed":
        done = f"{p.steps_done} steps" if p else shard_words(status)
        return Verdict(
            "Completed",
            "Completed" + (f" at {clock(work.since)}" if clock(work.since) else "") + (f": {done}" if done else ""),
        )
    fatal = [g for g in pods.groups if g.fatal]
    if status.diagnosis is not None and status.diagnosis.failed:  # never healthy when a log ends in a failure
        return Verdict("Failed", f"Failed: {_first_failure(status)}")
    if work is not None and work.state == "Failed":
        why = _first_failure(status) or f"{work.reason}: {work.message}".strip(": ")
        return Verdict("Failed", f"Failed: {why}")
    if fatal:
        return Verdict("Failed", f"Failed: {_first_failure(status)}")
    if p is not None and p.stalled:
        last = (
            f"last step {p.steps_done}"
            + (f"/{p.max_steps}" if p.max_steps else "")
            + (f" at {p.last_step_at.strftime('%H:%M')}" if p.last_step_at else "")
        )
        return Verdict(
            "Stalled",
            f"Stalled: no training step for {duration(p.since_last_s)} (limit {duration(p.stall_after_s)}), {last}",
        )
    if work is not None and work.state == "Suspended":
        if kueue is not None and kueue.state != "admitted":
            return Verdict("Queued", f"Queued: {kueue.words()[len('Kueue: ') :]}")
        if work.queue:
            return Verdict(
                "Queued",
                f"Queued: no Kueue Workload yet for queue {work.queue} (is Kueue running, and "
                f"the LocalQueue {work.queue} in namespace {status.namespace}?)",
            )
        return Verdict("Suspended", "Suspended" + (f": {work.message}" if work.message else " (spec.suspend)"))
    if work is not None and kueue is not None and kueue.state == "pending" and pods.total == 0:
        return Verdict("Queued", f"Queued: {kueue.words()[len('Kueue: ') :]}")
    running = pods.phases.get("Running", 0)
    expected = work.pods_expected if work is not None else pods.total
    unscheduled = not_scheduled(pods)
    if unscheduled:
        group = unscheduled[0]
        count = sum(len(g.pods) for g in unscheduled)
        return Verdict("Pending", f"Pending: {count}/{expected} pods not scheduled: {group.words}")
    if work is None:
        if pods.total and pods.ready == pods.total:
            return Verdict("Ready", f"Ready: {pods.ready}/{pods.total} pods ready")
        pending_claims = [n for n, phase in status.claims.items() if phase != "Bound"]
        if not pods.total and status.claims:
            if pending_claims:
                return Verdict("Pending", f"Pending: claim(s) {', '.join(pending_claims)} not bound")
            return Verdict("Ready", f"Ready: {len(status.claims)} claim(s) bound")
        return Verdict("Pending", f"Pending: {pods.ready}/{pods.total} pods ready ({pods.counts()})")
    if running < expected:
        return Verdict("Pending", f"Pending: {running}/{expected} pods running ({pods.counts()})")
    restarted = f" (the set restarted {work.restarts}x)" if work.restarts else ""
    if p is not None:
        return Verdict("Running", f"Running {figures(status)}{restarted}")
    return Verdict("Running", f"Running: {running}/{expected} pods, no training step in the log yet{restarted}")


def _data_prep_verdict(status: ReleaseStatus) -> Verdict | None:
    """Completed / Failed / Running of a data-prep release, None for what the general rules decide
    (Queued, Suspended, Pending, a pod that cannot start)."""
    work, pods, shards = status.workload, status.pods, status.shards
    if work is None:
        return None
    if work.state == "Completed":
        words = shard_words(status)
        return Verdict(
            "Completed",
            "Completed" + (f" at {clock(work.since)}" if clock(work.since) else "") + (f": {words}" if words else ""),
        )
    if work.state == "Failed" or (shards is not None and shards.failed_indexes):
        why = _shard_failure(status) or _first_failure(status) or f"{work.reason}: {work.message}".strip(": ")
        tally = f"; {shard_words(status)}" if shards is not None else ""
        return Verdict("Failed", f"Failed: {why}{tally}")
    # A pod that exited non-zero is retried by the Job (its index until failedIndexes): not a failure; a pod
    # that cannot start (image, configuration) is, and the general rules say it.
    if cannot_start(pods) or not_scheduled(pods) or work.state == "Suspended" or shards is None:
        return None
    running = pods.phases.get("Running", 0)
    if not running:
        return Verdict("Pending", f"Pending: no pod running ({pods.counts()}); {shard_words(status)}")
    line = f"Running: shards {shards.done}/{shards.total} done ({shards.per_worker()})"
    if shards.skipped:
        line += f", {shards.skipped} skipped"
    if shards.failed:
        line += f", {len(shards.failed)} failed so far"
    return Verdict("Running", line)


def exit_code(verdicts: list[Verdict]) -> int:
    codes = [v.exit_code for v in verdicts]
    if EXIT_FAILED in codes:
        return EXIT_FAILED
    return EXIT_NOT_FOUND if EXIT_NOT_FOUND in codes else EXIT_OK
