"""The reads behind a report, and the model made of them.

Offline (`--file LOG…`): the files `logs --errors --file` reads (helm_nemo.diagnose.sources), one verdict over
them (helm_nemo.diagnose), the curves of the log with the most steps, one timeline row per file.

On the cluster: the reads of `helm nemo status` (helm_nemo.status.cluster.read_statuses: one list per kind, the
tail of the rank-0 log, the failed pods' tails, the verdict), seen through a recorder that keeps the objects
listed so nothing is listed twice, then the whole log of the pod whose tail showed the steps (the curves).
"""

from __future__ import annotations

from datetime import datetime, UTC

from helm_nemo.report.model import (
    EXCERPT,
    Check,
    Excerpt,
    PodRow,
    RecipeRow,
    Report,
    RunEvent,
    percentile,
    stalls,
)
from helm_nemo.report.reading import from_text, last_time

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from typing import Any

    from helm_nemo.diagnose.events import Diagnosis, Event
    from helm_nemo.kube.client import KubeClient
    from helm_nemo.report.series import Series
    from helm_nemo.status.progress import RunInputs

MAX_EXCERPTS = 40  # the cause and the first consequences in time order (a 1,024-pod run has a thousand)


def from_files(
    paths: list[str],
    *,
    run: RunInputs | None = None,
    preflight: list[str] | None = None,
    stdin: object = None,
    now: datetime | None = None,
) -> Report:
    """The report of log files (a file per pod or rank, folders of them, `-`)."""
    from helm_nemo.diagnose import diagnose_texts
    from helm_nemo.diagnose.sources import read

    logs = read(paths, stdin)
    diagnosis = diagnose_texts(logs.texts, dumps=logs.dumps)
    texts = [(name, text) for name, text, _ in logs.texts]
    report = Report(title=", ".join(paths), generated=now or datetime.now(UTC), source="files")
    parsed = [(name, from_text(name, text)) for name, text in texts]
    best = max(parsed, key=lambda item: len(item[1].points)) if parsed else None
    _curves(report, best[1] if best else None, dict(texts).get(best[0], "") if best else "", run)
    for name, text in texts:
        row = PodRow(name, started=_first_time(text), last_line=last_time(text))
        series = dict(parsed)[name]
        row.first_step = series.points[0].at if series.points else None
        report.pods.append(row)
    _verdict(report, diagnosis, dict(texts))
    _recipe(report, run)
    _checks(report, preflight or [])
    return report


def _first_time(text: str) -> datetime | None:
    from helm_nemo.status.progress import parse_stamp

    for line in text[:4096].split("\n"):
        stamp = line.partition(" ")[0]
        if len(stamp) >= 20 and stamp[4:5] == "-":
            return parse_stamp(stamp)
    return None


def _curves(report: Report, series: Series | None, text: str, run: RunInputs | None) -> None:
    """The curves' log, its median and p95 step time, its stalls, and what turns a step time into tokens/s,
    TFLOPS/GPU and MFU (the inputs `helm nemo metrics` reads from --values)."""
    if series is None or not series.points:
        report.notes.append("no training step in the log(s): no curves")
        return
    report.series = series
    report.series_note = f"{series.source} ({series.format} log, {len(series.points)} steps)"
    if series.sampled:
        last = series.points[-1].step - series.points[0].step + 1
        report.series_note = (
            f"{series.source} ({series.format} log; {len(text) / 1e6:.0f} MB: {series.read_steps:,} of its {last:,} "
            "steps read, in windows spread evenly over it, and every pause between them read whole)"
        )
        if series.fetched:
            report.series_note = (
                f"{series.source} ({series.format} log: {series.read_steps:,} of its {last:,} steps, from its head, "
                f"{len(series.joins) - 2} windows placed near evenly spaced times and its tail, {series.fetched / 1e6:.1f} MB "
                "fetched; a pause between two pieces is placed between their steps)"
            )
    times = [p.step_time_s for p in series.points if p.step_time_s is not None]
    if times:
        report.step_median = percentile(times, 0.5)
        report.step_p95 = percentile(times, 0.95)
        report.stalls = stalls(series, report.step_median, last_time(text))
    if run is None:
        return
    inputs, names = run.inputs, run.names
    seq = names.get("seq_len") if names else None
    if "batch_size" in inputs and seq:
        report.tokens_per_step = float(inputs["batch_size"].value) * float(seq)
    if {"model_flops", "batch_size", "gpus"} <= set(inputs):
        report.flops_per_step_per_gpu = (
            float(inputs["model_flops"].value) * float(inputs["batch_size"].value) / float(inputs["gpus"].value)
        )
    if "peak_tflops" in inputs:
        report.peak_tflops = float(inputs["peak_tflops"].value)
    report.notes += [f"inputs: {m}" for m in run.missing]


def _verdict(report: Report, diagnosis: Diagnosis, texts: dict[str, str]) -> None:
    """The diagnosis, an excerpt for its cause and its first consequences, and each pod's role."""
    report.diagnosis = diagnosis
    if diagnosis.cause is None:
        return
    shown: list[Event] = [diagnosis.cause] + sorted(diagnosis.consequences, key=lambda e: (e.at or "~", e.source))
    split: dict[str, list[str]] = {}
    blocks: dict[str, list[Excerpt]] = {}  # per source; events whose lines are close share one excerpt
    for number, event in enumerate(shown[:MAX_EXCERPTS]):
        text = texts.get(event.source)
        if text is None or event.line <= 0:  # line 0: a pod's state (its exit, its eviction), no log line
            continue
        if event.source not in split:
            split[event.source] = text.split("\n")
        lines = split[event.source]
        first, last = max(1, event.line - EXCERPT), min(len(lines), event.line + EXCERPT)
        mine = blocks.setdefault(event.source, [])
        block = next((b for b in mine if first <= b.first + len(b.lines) and last >= b.first - 1), None)
        if block is None:
            block = Excerpt(f"x{sum(map(len, blocks.values()))}", event.source, first, event.line, [])
            mine.append(block)
            report.blocks.append(block)
        end = max(last, block.first + len(block.lines) - 1)
        block.first = min(first, block.first)
        block.lines = [line.rsplit("\r", 1)[-1] for line in lines[block.first - 1 : end]]
        anchor = block.hits.setdefault(event.line, f"ev{number}")  # two events of one line: one anchor
        report.excerpts[id(event)] = block
        report.anchors[id(event)] = anchor
    roles = {e.source: "consequence" for e in diagnosis.consequences}
    roles[diagnosis.cause.source] = "first cause"
    for row in report.pods:
        row.role = roles.get(row.name, "")
        for event in [diagnosis.cause, *diagnosis.consequences]:
            if event.source == row.name and event.at:
                from helm_nemo.status.progress import parse_stamp

                when = parse_stamp(event.at)
                if when is not None:
                    row.marks.append((when, "cause" if event is diagnosis.cause else "consequence", event.klass))
                    row.rank = row.rank or event.rank
                    row.node = row.node or event.node


def _recipe(report: Report, run: RunInputs | None) -> None:
    if run is None:
        return
    labels = {
        "model_flops": "model FLOPs per sample",
        "batch_size": "global batch size",
        "gpus": "GPUs",
        "accelerator": "accelerator",
        "precision": "precision",
        "peak_tflops": "peak TFLOPS/GPU",
    }
    for key, item in run.inputs.items():
        report.recipe.append(RecipeRow(labels.get(key, key), str(item.value), item.origin))
    names = run.names or {}
    if names.get("model"):
        report.recipe.append(RecipeRow("model", str(names["model"]), str(names.get("model_source", ""))))
    if names.get("seq_len"):
        report.recipe.append(RecipeRow("sequence length", str(names["seq_len"])))
    if run.max_steps:
        report.recipe.append(RecipeRow("max steps", str(run.max_steps), run.max_steps_origin))


def _checks(report: Report, paths: list[str]) -> None:
    """The checks of `helm nemo preflight -o json` (and `--nccl`) documents the user saved."""
    import json

    from helm_nemo.user_errors import Problem, UserError

    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                document = json.load(handle)
        except OSError as err:
            raise UserError(
                Problem(
                    path,
                    None,
                    None,
                    "$",
                    f"cannot read: {err.strerror or err}",
                    hint="give the file of `helm nemo preflight … -o json > FILE`",
                )
            ) from None
        except json.JSONDecodeError as err:
            raise UserError(
                Problem(
                    path,
                    err.lineno,
                    err.colno,
                    "$",
                    f"not JSON: {err.msg}",
                    hint="give the output of `helm nemo preflight … -o json`",
                )
            ) from None
        checks = document.get("checks") if isinstance(document, dict) else None
        if not isinstance(checks, list):
            raise UserError(
                Problem(
                    path,
                    None,
                    None,
                    "$.checks",
                    "no list of checks",
                    hint="expected the JSON document "
                    '`helm nemo preflight -o json` prints: {"checks": [{"id", "verdict", "message"}…]}',
                )
            )
        for index, check in enumerate(checks):
            if not isinstance(check, dict) or "id" not in check:
                raise UserError(
                    Problem(
                        path,
                        None,
                        None,
                        f"$.checks[{index}]",
                        "a check without an id",
                        hint='expected {"id", "verdict", "message"}',
                    )
                )
            report.checks.append(
                Check(str(check["id"]), str(check.get("verdict", "")), str(check.get("message", "")), path)
            )


# ---------------------------------------------------------------------------------------------------------
# On the cluster


class Recorder:
    """A KubeClient seen through: every list's items kept by path, so the report reuses status's lists."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.namespace = client.namespace
        self.lists: dict[str, list[dict[str, Any]]] = {}

    def list(self, path: str, query: dict[str, Any] | None = None, **options: Any) -> list[dict[str, Any]]:
        items = self.client.list(path, query, **options)
        self.lists.setdefault(path.rsplit("/", 1)[-1], []).extend(items)
        return items

    def text(self, path: str, query: dict[str, Any] | None = None) -> str:
        return self.client.text(path, query)


def from_cluster(
    client: KubeClient,
    release: str,
    *,
    run: RunInputs | None = None,
    preflight: list[str] | None = None,
    now: datetime | None = None,
) -> Report:
    """The report of one release on the cluster."""
    from helm_nemo.status import cluster
    from helm_nemo.status.verdict import verdict

    now = now or datetime.now(UTC)
    recorder = Recorder(client)
    from concurrent.futures import ThreadPoolExecutor

    fetching: dict[str, Any] = {}  # the curves' pod -> its log being fetched

    def start_fetch(status: Any) -> None:  # once the tails are read: the log comes while the failures are diagnosed
        curves = _curves_pod(status)
        if curves is not None:
            fetching[curves] = pool.submit(_fetch_curves, client, recorder, status, curves)

    with ThreadPoolExecutor(max_workers=1) as pool:
        status = cluster.read_statuses(
            recorder,  # type: ignore[arg-type]
            client.namespace,
            [release],
            {release: run} if run else None,
            now=now,
            on_progress=start_fetch,
        )[0]
        curves = _curves_pod(status)
        if curves is not None and curves not in fetching:
            fetching[curves] = pool.submit(_fetch_curves, client, recorder, status, curves)
        series, full = fetching[curves].result() if curves is not None else (None, "")
    report = Report(title=f"{release} ({client.namespace})", generated=now, source="cluster")
    report.notes += status.notes
    report.recipe.append(RecipeRow("verdict", verdict(status).line))
    texts = dict(status.texts)
    _curves(report, series, full, run)
    pods = [p for p in recorder.lists.get("pods", []) if _instance(p) == release]
    ranked = cluster.rank_pods(pods)
    chosen = {id(p) for p in ranked}
    report.pods = [_pod_row(p) for p in ranked] + [_pod_row(p) for p in pods if id(p) not in chosen]
    by_name = {row.name: row for row in report.pods}
    if series is not None and series.points and curves in by_name:
        by_name[curves].first_step = series.points[0].at
    for name, text in texts.items():
        if name in by_name:
            by_name[name].last_line = last_time(text)
    if status.diagnosis is not None:
        texts.update(_excerpt_tails(client, status, recorder.lists.get("pods", []), texts))
        _verdict(report, status.diagnosis, texts)
    report.events = _run_events(recorder, release, status)
    _cluster_recipe(report, recorder, release, pods)
    _recipe(report, run)
    _checks(report, preflight or [])
    return report


def _fetch_curves(client: KubeClient, recorder: Recorder, status: Any, curves: str) -> tuple[Series, str]:
    """The steps of the curves' pod's whole log (fetch.py), and its text whose last line is the log's last."""
    from helm_nemo.report.fetch import fetch
    from helm_nemo.status import cluster

    pod = next((p for p in recorder.lists.get("pods", []) if p["metadata"]["name"] == curves), None)
    query = {"timestamps": "true"}
    container = cluster.main_container(pod or {})
    if container:
        query["container"] = container
    return fetch(
        client, cluster.LOG.format(ns=client.namespace, pod=curves), query, status.texts.get(curves, ""), curves
    )


EXCERPT_PODS = 8  # failed pods whose tail is read again for the verdict's excerpts (the cause's first)


def _excerpt_tails(
    client: KubeClient, status: Any, pods: list[dict[str, Any]], texts: dict[str, str]
) -> dict[str, str]:
    """The tails status read of the pods the verdict names first (the cause's, then the earliest consequences'),
    read again with the same tail length: the diagnosis's line numbers are those of these tails."""
    from concurrent.futures import ThreadPoolExecutor

    from helm_nemo.kube import KubeApiError
    from helm_nemo.status import cluster

    diagnosis = status.diagnosis
    events = [diagnosis.cause] + sorted(diagnosis.consequences, key=lambda e: (e.at or "~", e.source))
    wanted: list[str] = []
    for event in events[:MAX_EXCERPTS]:
        if event.source not in texts and event.source not in wanted:
            wanted.append(event.source)
    by_name = {p["metadata"]["name"]: p for p in pods}
    wanted = [name for name in wanted if name in by_name][:EXCERPT_PODS]

    def tail(name: str) -> tuple[str, str | None]:
        pod = by_name[name]
        running = (pod.get("status") or {}).get("phase") == "Running"
        try:
            return name, cluster.pod_log(
                client, client.namespace, name, cluster.main_container(pod), cluster.FAILED_TAIL, previous=running
            )
        except KubeApiError:
            return name, None

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(wanted)))) as pool:
        return {name: text for name, text in pool.map(tail, wanted) if text is not None}


def _curves_pod(status: Any) -> str | None:
    """The pod whose whole log holds the curves: the one whose tail status read shows the most steps (rank 0, or
    the last rank where Megatron prints them); rank 0 when no tail shows one."""
    best: str | None = status.rank0
    most = 0
    for name, text in status.texts.items():
        count = len(from_text(name, text).points)
        if count > most:
            best, most = name, count
    return best


def _instance(obj: dict[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/instance") or "")


def _time(text: str | None) -> datetime | None:
    from helm_nemo.status.conditions import parse_time

    return parse_time(text)


def _pod_row(pod: dict[str, Any]) -> PodRow:
    from helm_nemo.status.pods import pod_rank

    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    rank = pod_rank(pod)
    row = PodRow(meta.get("name", ""), rank="" if rank is None else str(rank), node=spec.get("nodeName") or "")
    row.created = _time(meta.get("creationTimestamp"))
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            row.scheduled = _time(condition.get("lastTransitionTime"))
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            row.marks.append(
                (
                    _time(condition.get("lastTransitionTime")) or row.created or datetime.now(UTC),
                    "evicted",
                    f"{condition.get('reason', '')}: {condition.get('message', '')}".strip(": "),
                )
            )
    statuses = status.get("containerStatuses") or []
    main = pod.get("metadata", {}).get("annotations", {}).get("kubectl.kubernetes.io/default-container")
    chosen = next((c for c in statuses if c.get("name") == (main or "workload")), statuses[0] if statuses else None)
    if chosen is not None:
        row.restarts = int(chosen.get("restartCount") or 0)
        state = chosen.get("state") or {}
        running, term = state.get("running"), state.get("terminated")
        if running:
            row.started = _time(running.get("startedAt"))
        if term:
            from helm_nemo.status.pods import SIGNALS

            row.started = _time(term.get("startedAt"))
            row.finished = _time(term.get("finishedAt"))
            code = term.get("exitCode")
            row.exit_code = code if isinstance(code, int) else None
            row.signal = str(term.get("signal") or (SIGNALS.get(code) if isinstance(code, int) else "") or "")
            row.reason = term.get("reason") or ""
    if status.get("reason") == "Evicted":
        row.reason = "Evicted"
        row.marks.append(
            (
                row.finished or row.started or row.created or datetime.now(UTC),
                "evicted",
                str(status.get("message") or ""),
            )
        )
    return row


def _run_events(recorder: Recorder, release: str, status: Any) -> list[RunEvent]:
    """Kueue's admission and eviction (preemption) from the Workload's conditions, the JobSet's restarts, and
    the warning events of the release's objects."""
    from helm_nemo.status.conditions import conditions

    out: list[RunEvent] = []
    for workload in recorder.lists.get("workloads", []):
        name = (workload.get("metadata") or {}).get("name", "")
        for cond in conditions(workload).values():
            if cond.type in ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Finished") and cond.true:
                kind = {"QuotaReserved": "quota reserved", "Admitted": "admitted"}.get(cond.type, cond.type.lower())
                out.append(RunEvent(_time(cond.time), f"Kueue {kind}", name, f"{cond.reason}: {cond.message}"))
    for jobset in recorder.lists.get("jobsets", []):
        if _instance(jobset) != release:
            continue
        restarts = int((jobset.get("status") or {}).get("restarts") or 0)
        for cond in conditions(jobset).values():
            if cond.true and cond.type in ("Failed", "Completed", "Suspended", "StartupPolicyCompleted"):
                out.append(
                    RunEvent(
                        _time(cond.time),
                        f"JobSet {cond.type.lower()}",
                        jobset["metadata"]["name"],
                        f"{cond.reason}: {cond.message}".strip(": "),
                    )
                )
        if restarts:
            out.append(RunEvent(None, "JobSet restarts", jobset["metadata"]["name"], f"{restarts} restart(s)"))
    for event in status.events:
        when = _time(event.at)
        out.append(RunEvent(when, "warning", f"{event.kind} {event.name}", f"{event.reason}: {event.message}"))
    return sorted(out, key=lambda e: (e.at is None, e.at or datetime.min.replace(tzinfo=UTC)))


def _cluster_recipe(report: Report, recorder: Recorder, release: str, pods: list[dict[str, Any]]) -> None:
    """The release, its chart and version (the charts' helm.sh/chart label), the accelerator and GPUs."""
    owners = [o for o in recorder.lists.get("jobsets", []) + recorder.lists.get("jobs", []) if _instance(o) == release]
    labels = ((owners[0] if owners else (pods[0] if pods else {})).get("metadata") or {}).get("labels") or {}
    report.recipe.insert(0, RecipeRow("release", release, f"namespace {report.title.rsplit('(', 1)[-1].rstrip(')')}"))
    if labels.get("helm.sh/chart"):
        report.recipe.insert(1, RecipeRow("chart", labels["helm.sh/chart"], "label helm.sh/chart"))
    gpus = 0
    accelerators = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        for container in spec.get("containers") or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            gpus += int(str(limits.get("nvidia.com/gpu", "0")) or 0)
        selector = spec.get("nodeSelector") or {}
        for key in ("cloud.google.com/gke-accelerator", "node.kubernetes.io/instance-type", "nvidia.com/gpu.product"):
            if key in selector:
                accelerators.add(f"{selector[key]} ({key})")
    report.recipe.append(RecipeRow("pods", str(len(pods))))
    if gpus:
        report.recipe.append(RecipeRow("GPUs requested", str(gpus), "the pods' nvidia.com/gpu limits"))
    for accelerator in sorted(accelerators):
        report.recipe.append(RecipeRow("accelerator", accelerator, "the pods' nodeSelector"))
