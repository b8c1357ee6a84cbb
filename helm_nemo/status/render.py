"""What `helm nemo status` prints: a block of text per release (its verdict first), or one JSON document."""

from __future__ import annotations

import json

from helm_nemo.status.cluster import ReleaseStatus
from helm_nemo.status.conditions import clock
from helm_nemo.status.progress import duration
from helm_nemo.status.verdict import Verdict, verdict

BAR = 30


def bar(fraction: float, width: int = BAR) -> str:
    filled = int(round(fraction * width))
    return "[" + "#" * filled + "-" * (width - filled) + f"] {fraction * 100:5.1f} %"


def text(
    statuses: list[ReleaseStatus],
    verdicts: list[Verdict] | None = None,
    *,
    progress_bar: bool = False,
    unicode: bool | None = None,
) -> str:
    """The text of `status`; `unicode`: draw the sparklines with block characters (default: when stdout is UTF-8)."""
    from helm_nemo.status import sparkline

    unicode = sparkline.utf8_terminal() if unicode is None else unicode
    verdicts = verdicts or [verdict(s) for s in statuses]
    blocks = []
    for status, v in zip(statuses, verdicts, strict=True):
        lines = [f"{status.release} ({status.namespace}): {v.line}"]
        if not status.found:
            blocks.append("\n".join(lines))
            continue
        work = status.workload
        if work is not None:
            restarts = f", {work.restarts} restart(s)" + (
                f" of {work.max_restarts} allowed" if work.max_restarts is not None else ""
            )
            state = work.state + (f" ({work.reason})" if work.reason else "")
            lines.append(f"  {work.kind} {work.name}: {state}{restarts if work.kind == 'JobSet' else ''}")
            for job in work.jobs:
                if work.kind == "JobSet":  # the JobSet counts jobs; a Job counts pods
                    lines.append(
                        f"    replicated job {job.name} ({job.replicas} job(s)): {job.ready} ready, {job.active} "
                        f"active, {job.succeeded} succeeded, {job.failed} failed"
                        + (f", {job.suspended} suspended" if job.suspended else "")
                    )
                else:
                    lines.append(
                        f"    pods: {job.ready} ready, {job.active} active, {job.succeeded} succeeded, "
                        f"{job.failed} failed"
                    )
            if work.state == "Failed" and work.message:
                lines.append(f"    {work.message[:300]}")
        if status.kueue is not None:
            lines.append(f"  {status.kueue.words()}")
        pods = status.pods
        if pods.total:
            lines.append(f"  pods: {pods.counts()}; {pods.ready} ready, {pods.restarts} restart(s)")
        if status.claims:
            lines.append("  claims: " + ", ".join(f"{n} {phase}" for n, phase in sorted(status.claims.items())))
        p = status.progress
        if p is not None:
            where = f" (log of {status.rank0})" if status.rank0 else ""
            if progress_bar and p.fraction is not None:
                lines.append(f"  progress: {bar(p.fraction)}  step {p.steps_done}/{p.max_steps}")
            steps = f"{p.steps_done}/{p.max_steps}" if p.max_steps else f"{p.steps_done}"
            source = f" (max steps from {p.max_steps_from})" if p.max_steps_from else ""
            lines.append(f"  training: step {steps}{source}, {p.format} log{where}")
            if p.step_time_s is not None:
                lines.append(
                    f"    step time {p.step_time_s:.4g} s (mean of steps {p.first_step}–{p.last_step})"
                    + (f", {p.tflops_per_gpu:.1f} TFLOPS/GPU, MFU {p.mfu * 100:.2f} %" if p.mfu is not None else "")
                    + (f", {p.tokens_per_s:,.0f} tokens/s" if p.tokens_per_s is not None else "")
                )
            for label, values, unit in (("loss", p.recent_loss, ""), ("step time", p.recent_step_s, " s")):
                drawn = sparkline.line(label, values, unit, unicode=unicode)
                if drawn:
                    lines.append(f"    {drawn}")
            if p.eta_s is not None:
                lines.append(f"    ETA {duration(p.eta_s)}")
            if p.since_last_s is not None:
                lines.append(f"    last step {duration(p.since_last_s)} ago" + (" (STALLED)" if p.stalled else ""))
            for note in p.notes:
                lines.append(f"    note: {note}")
        elif status.rank0:
            lines.append(f"  training: no step in the last lines of {status.rank0}'s log yet")
        lines += _shard_lines(status, progress_bar)
        if pods.groups:
            lines.append("  problems:")
            for group in pods.groups[:6]:
                who = group.pods[0] + (f" and {len(group.pods) - 1} more" if len(group.pods) > 1 else "")
                at = f" at {clock(group.at)}" if clock(group.at) else ""
                lines.append(f"    {group.reason} {who}{at}: {group.words}")
            if len(pods.groups) > 6:
                lines.append(f"    … {len(pods.groups) - 6} more")
        if status.diagnosis is not None and status.diagnosis.cause is not None:
            from helm_nemo.diagnose import render as diagnose_render

            lines.append("  why (first cause over the pods' logs and states):")
            lines += ["    " + line for line in diagnose_render.text(status.diagnosis, what="pod log(s)").splitlines()]
        for pod, last in list(status.last_lines.items())[:2]:
            lines.append(f"  last lines of {pod}:")
            lines += [f"    | {line[:200]}" for line in last]
        if status.events:
            lines.append("  warning events:")
            lines += [f"    {event.text()}" for event in status.events[:5]]
        lines += [f"  note: {note}" for note in status.notes]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _shard_lines(status: ReleaseStatus, progress_bar: bool) -> list[str]:
    """A data-prep release's shards: the count per worker, the skipped ones, each failed shard's line."""
    shards = status.shards
    if shards is None:
        return []
    lines = []
    if progress_bar and shards.total:
        lines.append(f"  progress: {bar(shards.done / shards.total)}  shard {shards.done}/{shards.total}")
    lines.append(
        f"  shards: {shards.done}/{shards.total} done, {shards.skipped} skipped (complete already), "
        f"{len(shards.failed)} failed"
    )
    for worker in shards.workers:
        skipped = f", {worker.skipped} skipped" if worker.skipped else ""
        failed = f", {len(worker.failed)} failed" if worker.failed else ""
        lines.append(f"    worker {worker.index}: {worker.complete}/{worker.total}{skipped}{failed} ({worker.state})")
    for index, _, line in shards.failed[:10]:
        lines.append(f"    index {index}: {line[:240]}")
    if len(shards.failed) > 10:
        lines.append(f"    … {len(shards.failed) - 10} more failed shard(s)")
    return lines


def as_json(
    statuses: list[ReleaseStatus],
    verdicts: list[Verdict] | None = None,
    exit_code: int | None = None,
    indent: int | None = 2,
) -> str:
    verdicts = verdicts or [verdict(s) for s in statuses]
    releases = []
    for status, v in zip(statuses, verdicts, strict=True):
        diagnosis = status.diagnosis
        releases.append(
            {
                "release": status.release,
                "namespace": status.namespace,
                "found": status.found,
                "state": v.state,
                "verdict": v.line,
                "workload": status.workload.as_json() if status.workload else None,
                "kueue": status.kueue.as_json() if status.kueue else None,
                "pods": status.pods.as_json(),
                "claims": status.claims,
                "rank0_pod": status.rank0,
                "progress": status.progress.as_json() if status.progress else None,
                "shards": status.shards.as_json() if status.shards else None,
                "diagnosis": diagnosis.as_json() if diagnosis is not None else None,
                "last_lines": status.last_lines,
                "events": [e.as_json() for e in status.events],
                "notes": status.notes,
            }
        )
    return json.dumps({"releases": releases, "exit_code": exit_code}, indent=indent, ensure_ascii=False)
