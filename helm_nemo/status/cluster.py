"""The reads behind `helm nemo status`: one list per object kind for all the releases asked about, then the
tail of the rank-0 log (never the whole log), and the tails of the failed pods' logs.

`client` is a helm_nemo.kube KubeClient (or anything with its `list(path, query)` and `text(path, query)`):
per refresh, JobSets, Jobs, Pods and PersistentVolumeClaims are listed with the selector
`app.kubernetes.io/instance in (…)` (the charts' selector label), Kueue Workloads with
`kueue.x-k8s.io/job-uid in (…)` (only when a job is there), Warning events once for the namespace.

A data-prep release (its Job labelled `helm-nemo.dev/data-prep: R`, docs/data-prep.md) shows its shards
instead of training steps: its ConfigMaps are listed (one list, only when such a Job is there) for the shard
list, and the log tail of each of its pods is read once and counted by helm_nemo.dataprep.progress (the
count of the recipe's wait); the failed pods' signatures are read from the same text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, UTC

from helm_nemo.status import kueue
from helm_nemo.status.events import EventLine, warning_events
from helm_nemo.status.workloads import WorkloadState, workload_state
from helm_nemo.status.pods import PodSummary, pod_job_index, pod_rank, summarize_pods
from helm_nemo.status.progress import Progress, RunInputs, progress

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable, Iterable
    from typing import Any

    from helm_nemo.dataprep.progress import ShardProgress
    from helm_nemo.kube.client import KubeClient
    from helm_nemo.diagnose.events import Diagnosis
    from helm_nemo.status.pods import PodProblem

INSTANCE = "app.kubernetes.io/instance"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
CLAIMS = "/api/v1/namespaces/{ns}/persistentvolumeclaims"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads"
EVENTS = "/api/v1/namespaces/{ns}/events"
CONFIGMAPS = "/api/v1/namespaces/{ns}/configmaps"
DATA_PREP_LABEL = "helm-nemo.dev/data-prep"  # on a data-prep release's Job, pods and ConfigMap
DATA_PREP_TAIL = 1000  # a data-prep pod's log: its progress lines among the tokenizer's output (as the wait)
LOG = "/api/v1/namespaces/{ns}/pods/{pod}/log"
TAIL_LINES = 2000  # the rank-0 log: enough for WINDOW steps among NeMo's other output
FAILED_TAIL = 300  # a failed pod's last lines, for the signatures


@dataclass
class ReleaseStatus:
    """Everything status found about one release."""

    release: str
    namespace: str
    workload: WorkloadState | None = None
    kueue: kueue.KueueState | None = None
    pods: PodSummary = field(default_factory=PodSummary)
    claims: dict[str, str] = field(default_factory=dict)  # PVC name -> phase
    rank0: str | None = None
    progress: Progress | None = None
    events: list[EventLine] = field(default_factory=list)
    diagnosis: Diagnosis | None = None  # the first cause, when the logs read (and pod states) show a failure
    texts: dict[str, str] = field(default_factory=dict)  # pod -> the log tail read this refresh
    last_lines: dict[str, list[str]] = field(default_factory=dict)  # failed pod -> its last lines
    notes: list[str] = field(default_factory=list)
    data_prep: bool = False  # a data-prep release: its Job carries helm-nemo.dev/data-prep
    shards: ShardProgress | None = None  # a data-prep release's shard count

    @property
    def found(self) -> bool:
        return self.workload is not None or self.pods.total > 0 or bool(self.claims)


def _selector(label: str, values: Iterable[str]) -> str:
    return f"{label} in ({','.join(sorted(values))})"


def _optional_list(client: KubeClient, path: str, query: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A list, or None when the API is not served (a CRD not installed: 404)."""
    from helm_nemo.kube import KubeApiError

    try:
        return client.list(path, query)
    except KubeApiError as err:
        if err.not_found:
            return None
        raise


def pod_log(
    client: KubeClient,
    namespace: str,
    pod: str,
    container: str | None,
    tail: int,
    *,
    previous: bool = False,
    timestamps: bool = True,
) -> str:
    query = {"tailLines": str(tail)}
    if container:
        query["container"] = container
    if timestamps:
        query["timestamps"] = "true"
    if previous:
        query["previous"] = "true"
    return client.text(LOG.format(ns=namespace, pod=pod), query)


def main_container(pod: dict[str, Any]) -> str | None:
    """The training container: the pod's kubectl default-container annotation, else its first container."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    annotation: str | None = annotations.get("kubectl.kubernetes.io/default-container")
    if annotation:
        return annotation
    containers = (pod.get("spec") or {}).get("containers") or []
    first: str | None = containers[0].get("name") if containers else None
    return first


def rank_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods in rank order (JobSet job index, then completion index); of several pods with the same rank
    (a restart), the running one, else the newest."""
    best: dict[tuple[int, int], dict[str, Any]] = {}
    for pod in pods:
        rank = pod_rank(pod)
        key = (pod_job_index(pod), rank if rank is not None else 1 << 30)
        old = best.get(key)
        if old is None or _preference(pod) > _preference(old):
            best[key] = pod
    return [best[key] for key in sorted(best)]


def _preference(pod: dict[str, Any]) -> tuple[bool, str]:
    status = pod.get("status") or {}
    return (status.get("phase") == "Running", (pod.get("metadata") or {}).get("creationTimestamp", ""))


def read_statuses(
    client: KubeClient,
    namespace: str,
    releases: list[str],
    run_inputs: dict[str, RunInputs] | None = None,
    *,
    now: datetime | None = None,
    with_logs: bool = True,
    stall_factor: float | None = None,
    tail: int = TAIL_LINES,
    on_progress: Callable[[ReleaseStatus], None] | None = None,
) -> list[ReleaseStatus]:
    """The status of each release (in the order given). `on_progress` is called with a release's status once its
    pods are listed and its progress read (status.texts final), before its failed pods are read and diagnosed:
    the report starts fetching the whole log there, so the API server sends it while this process diagnoses."""
    run_inputs = run_inputs or {}
    ns = namespace
    selector = {"labelSelector": _selector(INSTANCE, releases)}
    jobsets = _optional_list(client, JOBSETS.format(ns=ns), selector) or []
    jobs = client.list(JOBS.format(ns=ns), selector)
    for job in jobs:  # the API server's list items of a built-in kind have no kind
        job.setdefault("kind", "Job")
    # managedFields are half a pod's bytes and nothing here reads them: not decoded (kube/paging.py)
    pods = client.list(PODS.format(ns=ns), selector, managed_fields=False)
    claims = client.list(CLAIMS.format(ns=ns), selector)
    out = {name: ReleaseStatus(name, ns) for name in releases}

    def owner(obj: dict[str, Any]) -> str:  # "": no release (the selector asked for the label: never in practice)
        return ((obj.get("metadata") or {}).get("labels") or {}).get(INSTANCE) or ""

    data_prep_jobs: dict[str, dict[str, Any]] = {}
    job_ids = {id(job) for job in jobs}
    for obj in jobsets + jobs:
        status = out.get(owner(obj))
        if status is not None and status.workload is None:
            status.workload = workload_state(obj)
            if _labels(obj).get(DATA_PREP_LABEL) == status.release and id(obj) in job_ids:
                status.data_prep = True
                data_prep_jobs[status.release] = obj
    uids = {s.workload.uid: s for s in out.values() if s.workload and s.workload.uid}
    if uids:
        workloads = _optional_list(
            client, WORKLOADS.format(ns=ns), {"labelSelector": _selector(kueue.KUEUE_JOB_UID, uids)}
        )
        for item in workloads or []:
            uid = ((item.get("metadata") or {}).get("labels") or {}).get(kueue.KUEUE_JOB_UID)
            if uid in uids:
                uids[uid].kueue = kueue.kueue_state(item)
    by_release: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        by_release.setdefault(owner(pod), []).append(pod)
    for claim in claims:
        status = out.get(owner(claim))
        if status is not None:
            status.claims[claim["metadata"]["name"]] = (claim.get("status") or {}).get("phase", "Pending")
    names: set[str] = set()
    for name, status in out.items():
        release_pods = by_release.get(name, [])
        status.pods = summarize_pods(release_pods)
        names |= {p["metadata"]["name"] for p in release_pods} | set(status.claims)
        if status.workload:
            names.add(status.workload.name)
        if status.kueue:
            names.add(status.kueue.name)
    events = _optional_list(client, EVENTS.format(ns=ns), {"fieldSelector": "type=Warning"}) or []
    for name, status in out.items():
        mine = {p["metadata"]["name"] for p in by_release.get(name, [])} | set(status.claims)
        mine |= {x for x in (status.workload and status.workload.name, status.kueue and status.kueue.name) if x}
        status.events = warning_events(events, mine)
    if with_logs:
        shard_lists = _shard_lists(client, ns, data_prep_jobs) if data_prep_jobs else {}
        for name, status in out.items():
            texts: dict[str, str] = {}
            ordered = rank_pods(by_release.get(name, []))
            if name in data_prep_jobs:
                texts = _read_shards(client, status, data_prep_jobs[name], by_release.get(name, []), shard_lists)
            elif status.workload is not None and ordered:
                _read_progress(client, status, ordered, run_inputs.get(name), now, stall_factor, tail)
            if on_progress is not None:
                on_progress(status)
            _read_failures(client, status, by_release.get(name, []), texts)
    return [out[name] for name in releases]


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def _shard_lists(client: KubeClient, ns: str, jobs: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """Release -> its shard names, from the shards.tsv of its ConfigMap `R-data-prep` (what its pods run)."""
    from helm_nemo.dataprep.progress import names_of_tsv

    maps = client.list(CONFIGMAPS.format(ns=ns), {"labelSelector": _selector(DATA_PREP_LABEL, jobs)})
    out = {}
    for item in maps:
        release = _labels(item).get(DATA_PREP_LABEL, "")
        if release in jobs and item["metadata"]["name"] == f"{release}-data-prep":
            out[release] = names_of_tsv(str((item.get("data") or {}).get("shards.tsv") or ""))
    return out


def _read_shards(
    client: KubeClient,
    status: ReleaseStatus,
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    shard_lists: dict[str, list[str]],
) -> dict[str, str]:
    """A data-prep release's shard count: the log tail of each of its Job's pods (retries included) that
    ran; returns the texts read (pod -> log), for the failure signatures."""
    from helm_nemo.dataprep.progress import PodLines, count, pod_index, shares_of
    from helm_nemo.kube import KubeApiError

    texts: dict[str, str] = {}
    seen = []
    for pod in sorted(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp", "")):
        meta, phase = pod.get("metadata") or {}, (pod.get("status") or {}).get("phase") or ""
        lines = PodLines(meta.get("name", ""), pod_index(pod), phase)
        if lines.index is None:
            continue
        seen.append(lines)
        if phase not in ("Running", "Succeeded", "Failed"):
            continue
        try:
            text = pod_log(client, status.namespace, lines.name, main_container(pod), DATA_PREP_TAIL)
        except KubeApiError as err:
            status.notes.append(f"cannot read the log of {lines.name}: {err.code} {err.message}")
            continue
        texts[lines.name] = text
        lines.read(text)
    names = shard_lists.get(status.release)
    if names is None:
        status.notes.append(f"no ConfigMap {status.release}-data-prep: the shard list is not known")
        return texts
    workers = int((job.get("spec") or {}).get("completions") or 1)
    status.shards = count(job, shares_of(names, workers), seen)
    return texts


def _read_progress(
    client: KubeClient,
    status: ReleaseStatus,
    ordered: list[dict[str, Any]],
    run: RunInputs | None,
    now: datetime | None,
    stall_factor: float | None,
    tail: int,
) -> None:
    from helm_nemo.kube import KubeApiError

    kwargs: dict[str, Any] = {"now": now or datetime.now(UTC)}
    if stall_factor is not None:
        kwargs["stall_factor"] = stall_factor
    candidates = [ordered[0]] + ([ordered[-1]] if len(ordered) > 1 else [])  # Megatron logs on the last rank
    for pod in candidates:
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Running", "Succeeded", "Failed"):
            continue
        name = pod["metadata"]["name"]
        try:
            text = pod_log(client, status.namespace, name, main_container(pod), tail)
        except KubeApiError as err:
            status.notes.append(f"cannot read the log of {name}: {err.code} {err.message}")
            continue
        status.texts[name] = text
        found = progress(text, run, name=name, **kwargs)
        if status.rank0 is None:
            status.rank0 = name
        if found is not None:
            over = status.workload is not None and status.workload.state in ("Completed", "Failed")
            if over:  # no stall, nothing left to wait for
                found.stalled, found.eta_s = False, None
            status.rank0, status.progress = name, found
            return


def _read_failures(
    client: KubeClient,
    status: ReleaseStatus,
    pods: list[dict[str, Any]],
    texts: dict[str, str] | None = None,
) -> None:
    """The last lines of the failed pods most likely to hold the first cause (their previous container when it
    restarted), a batch at a time until one names a specific cause (helm_nemo.status.failures), then one
    diagnosis (helm_nemo.diagnose) over them, the logs read already this refresh and the pods' states: the
    first cause across pods by the kubelet's line times."""
    from helm_nemo.diagnose import diagnose_texts, pods as pod_states
    from helm_nemo.status import failures

    by_name = {p["metadata"]["name"]: p for p in pods}
    read = dict(status.texts)
    for name, text in (texts or {}).items():
        read.setdefault(name, text)
    states = pod_states.events(status.pods.problems)
    order = {p["metadata"]["name"]: n for n, p in enumerate(rank_pods(pods))}
    nodes = {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in pods}

    def diagnose() -> Diagnosis:
        ordered = sorted(read.items(), key=lambda item: (order.get(item[0], len(order)), item[0]))
        return diagnose_texts(ordered, kind="pod", extra=states, nodes=nodes)

    diagnosis = None
    for batch in failures.batches(failures.read_order(status.pods.problems)):
        wanted = [(p, by_name[p.pod]) for p in batch if p.pod in by_name]
        for problem, text in _failed_tails(client, status, wanted, {**status.texts, **(texts or {})}):
            read[problem.pod] = text
            lines = [line.partition(" ")[2] if line[:4].isdigit() else line for line in text.rstrip("\n").split("\n")]
            status.last_lines[problem.pod] = [line.rsplit("\r", 1)[-1] for line in lines[-5:]]
        diagnosis = diagnose()
        if failures.found(diagnosis):
            break
    if diagnosis is None:
        if not read and not states:
            return
        diagnosis = diagnose()
    if diagnosis.failed:
        status.diagnosis = diagnosis


def _failed_tails(
    client: KubeClient, status: ReleaseStatus, wanted: list[tuple[PodProblem, dict[str, Any]]], texts: dict[str, str]
) -> list[tuple[PodProblem, str]]:
    """The last FAILED_TAIL lines of each pod (a restarted one's previous container), side by side (the client
    keeps a connection per thread); a log already read this refresh is not read again."""
    from concurrent.futures import ThreadPoolExecutor

    from helm_nemo.kube import KubeApiError

    def tail(item: tuple[PodProblem, dict[str, Any]]) -> tuple[PodProblem, str | None]:
        problem, pod = item
        running = (pod.get("status") or {}).get("phase") == "Running"
        known = texts.get(problem.pod) if not running else None
        if known is not None:
            return problem, known
        try:
            container = problem.container or main_container(pod)
            return problem, pod_log(client, status.namespace, problem.pod, container, FAILED_TAIL, previous=running)
        except KubeApiError:
            return problem, None

    if len(wanted) <= 1:
        done = [tail(item) for item in wanted]
    else:
        with ThreadPoolExecutor(max_workers=min(8, len(wanted))) as pool:
            done = list(pool.map(tail, wanted))
    return [(problem, text) for problem, text in done if text is not None]
