"""A recipe's wait between stages: before a release with `after:`/`dataFrom:` is installed, the Jobs of the
releases it names must have completed (docs/data-prep.md, "Recipe keys").

Imported only when a recipe waits (it brings the kube client). Per poll of a release R, read-only:
- its Jobs: a data-prep release's by `helm-nemo.dev/data-prep=R` (the Job named R), any other release's by
  `app.kubernetes.io/instance=R`. Done when every Job has condition Complete or SuccessCriteriaMet (all
  indexes succeeded); failed at the first Job with Failed or FailureTarget. A data-prep release without its
  Job is a failure (training would read nothing); so is a Job with failedIndexes (an index out of its
  retries: the Job can no longer complete), another release without Jobs has nothing to wait for;
- a data-prep Job's pods (its own selector), and the log tails (tailLines) of the pods that changed since
  the last read (a running pod's log grows: read every poll; a finished one once more, then never): the
  progress lines `helm-nemo data-prep: shard NAME done|skipped|failed` (the worker's, docs/data-prep.md),
  counted by dataprep/progress.py (the count `helm nemo status` shows too). Worker i's total is its share
  of the shard list (shards.assignment); an index in the Job's completedIndexes has done all of it.
  `R: 4/6 shards (worker 0: 2/3, worker 1: 2/3)` is said when a count changes;
- why workers are not running, in the words of `helm nemo status` (status/pods.py: summarize_pods,
  not_scheduled, cannot_start), said when it changes (not every poll): pods the scheduler cannot place
  (`R: 2 worker pod(s) not scheduled for 2 m 05 s: 0/1 nodes available: 1 Insufficient cpu`, with the
  Pending claims the pods mount when the scheduler names unbound claims), or whose container cannot start
  (`R: 2 worker pod(s) cannot start: ErrImagePull (cannot pull the image: …)`, a missing Secret or
  ConfigMap key: CreateContainerConfigError, …), or that sit on their node without starting (their newest
  Warning event since placed: `R: 2 worker pod(s) not started for 40 s: FailedMount (…)`; the namespace's
  Warning events of pods are read only while such pods exist); once the workers run, `R: 2 worker pod(s)
  running`.
  None of these stops the wait: Kubernetes keeps retrying (a node pool scales up, a Secret is created,
  the image is pushed), so the wait goes on, bounded by --recipe-wait-timeout (docs/data-prep.md).

A signal (SIGINT/SIGTERM, remembered by actions/process.py) stops the wait between two reads:
process.Interrupted, which the install turns into what was installed and how to continue.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, UTC

from helm_nemo.dataprep.progress import PodLines, count, parse_indexes, pod_index
from helm_nemo.terminal_text import safe

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.kube.client import KubeClient
    from helm_nemo.status.pods import ProblemGroup
    from helm_nemo.values.release_plan import ReleasePlan

    Echo = Callable[[str], None]

DATA_PREP_LABEL = "helm-nemo.dev/data-prep"
INSTANCE = "app.kubernetes.io/instance"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
LOG = "/api/v1/namespaces/{ns}/pods/{pod}/log"
CLAIM = "/api/v1/namespaces/{ns}/persistentvolumeclaims/{name}"
EVENTS = "/api/v1/namespaces/{ns}/events"
# Warning events that are not why a placed pod's containers have not started: the scheduler's (from before
# it was placed) and the image pull's (the container's own state says it: cannot_start)
BEFORE_START = {"FailedScheduling", "Failed", "BackOff", "InspectFailed", "ErrImageNeverPull"}
IMAGE_PULL = {"ImagePullBackOff": "ErrImagePull"}  # the kubelet alternates them: one state for the wait
TAIL_LINES = 1000  # per pod and read: the progress lines among the tokenizer's own output since the last poll
DEFAULT_INTERVAL = 10.0
MAX_READ_ERRORS = 5  # consecutive failed reads of the cluster before the wait gives up
DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str) -> float:
    """Seconds of `90`, `90s`, `30m`, `1h30m`, `2h` (Go's duration words, as helm's --timeout); ValueError."""
    text = str(text).strip()
    try:
        seconds = float(text)
    except ValueError:
        match = DURATION.fullmatch(text)
        if not text or match is None or not any(match.groups()):
            raise ValueError(f"{text!r} is not a duration (e.g. 90s, 30m, 2h, 1h30m)") from None
        hours, minutes, secs = (float(g or 0) for g in match.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration above zero")
    return seconds


def _true(job: dict[str, Any], *types: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") in types and cond.get("status") == "True":
            found: dict[str, Any] = cond
            return found
    return None


@dataclass
class WaitOptions:
    """--recipe-poll-interval and --recipe-wait-timeout, in seconds."""

    interval: float = DEFAULT_INTERVAL
    timeout: float | None = None  # seconds for all the waits of a run; None: no limit


class Failure(Exception):
    """The wait ends without the Jobs complete: `lines` say why (the install adds what is installed)."""

    def __init__(self, lines: list[str], running: bool = False):
        super().__init__(lines[0] if lines else "")
        self.lines = lines
        self.running = running  # the Job keeps running (a timeout, an unreadable cluster)


class StageWait:
    """Poll one release's Jobs until they complete (return) or fail (Failure)."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        plan: ReleasePlan,
        data_prep_values: dict[str, Any] | None,
        echo: Echo,
        *,
        timeout: float | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client, self.namespace, self.plan, self.echo = client, namespace, plan, echo
        self.timeout, self.now = timeout, now  # timeout: --recipe-wait-timeout, to say it
        self.release = plan.release
        self.data_prep = data_prep_values is not None
        self.shares: dict[int, list[str]] = {}  # worker -> its shards' names
        if data_prep_values is not None:
            from helm_nemo.dataprep import shards

            all_shards = shards.expand(data_prep_values)
            workers = max(1, int(data_prep_values.get("workers") or 1))
            for worker in range(workers):
                self.shares[worker] = [shard.name for shard in shards.assignment(all_shards, workers, worker)]
        self.totals = {worker: len(names) for worker, names in self.shares.items()}  # worker -> its shards
        self.pods: dict[str, PodLines] = {}
        self.versions: dict[str, str] = {}  # pod -> its resourceVersion at the last read
        self._index_of_name: dict[str, int] = {}  # pod -> its completion index
        self.said: tuple[int, ...] | None = None
        self.blocked: tuple[tuple[str, str, int], ...] = ()  # why the workers do not run, as last said
        self._blocked_groups: list[tuple[ProblemGroup, str]] = []  # each with its Pending claims, as said
        self._hinted = False

    # ---- one poll
    def poll(self) -> bool:
        """True when done; raises Failure when a Job failed."""
        label = f"{DATA_PREP_LABEL}={self.release}" if self.data_prep else f"{INSTANCE}={self.release}"
        jobs = self.client.list(JOBS.format(ns=self.namespace), {"labelSelector": label})
        if not jobs:
            if self.data_prep:
                raise Failure(
                    [
                        f"{self.release}: no Job labelled {label} in namespace {self.namespace}: "
                        "the data-prep release has no Job to wait for",
                    ]
                )
            self.echo(f"{self.release}: no Job to wait for")
            return True
        done = True
        for job in jobs:
            failed = _true(job, "Failed", "FailureTarget")
            if self.data_prep:
                self._progress(job)
            if failed is None and (job.get("status") or {}).get("failedIndexes"):
                # An index is out of retries: the Job can no longer complete (it fails once its other
                # indexes end), so the recipe stops now.
                failed = {"reason": "an index ran out of retries", "message": "the other indexes keep running"}
            if failed is not None:
                raise Failure(self._failure_lines(job, failed))
            if _true(job, "Complete", "SuccessCriteriaMet") is None:
                done = False
        if done:
            self.echo(f"{self.release}: complete")
        return done

    def _progress(self, job: dict[str, Any]) -> None:
        pods = self._pods(job)
        for pod in pods:
            self._read(pod)
        found = count(job, self.shares, self.pods.values())
        said = found.counts()
        if said != self.said:
            self.said = said
            self.echo(f"{self.release}: {found.line()}")
        self._not_running(pods)

    def _not_running(self, pods: list[dict[str, Any]]) -> None:
        """Say why worker pods do not run (status/pods.py's words), when that changes."""
        from helm_nemo.status.cluster import main_container
        from helm_nemo.status.pods import cannot_start, not_scheduled, summarize_pods

        live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
        container = next((c for c in map(main_container, live) if c), "data-prep")
        summary = summarize_pods(live, container)
        blocked = _merged(not_scheduled(summary) + cannot_start(summary))
        blocked += self._not_started(live, {name for group in blocked for name in group.pods})
        key = tuple((IMAGE_PULL.get(g.reason, g.reason), _same(g), len(g.pods)) for g in blocked)
        if key == self.blocked:
            return
        if not blocked:
            running, pending = summary.phases.get("Running", 0), summary.phases.get("Pending", 0)
            if running:
                self.echo(f"{self.release}: {running} worker pod(s) running")
            elif pending:
                self.echo(f"{self.release}: {pending} worker pod(s) scheduled, starting")
            self.blocked, self._blocked_groups = key, []
            return
        said = [(group, self._claims(group, live) if group.reason == "FailedScheduling" else "") for group in blocked]
        for (group, claims), group_key in zip(said, key, strict=True):
            if group_key not in self.blocked:
                self.echo(self._line(group, claims))
        self.blocked, self._blocked_groups = key, said
        if not self._hinted:
            self._hinted = True
            bound = (
                f"up to --recipe-wait-timeout {self.timeout:g}s" if self.timeout else "--recipe-wait-timeout bounds it"
            )
            self.echo(f"{self.release}: the wait goes on while Kubernetes retries ({bound}; Ctrl-C stops it)")

    @property
    def blocked_lines(self) -> list[str]:
        """Why the workers do not run, as last seen, with the time so far counted to now (the timeout's
        message repeats them: `not scheduled for 15 s`, not the age when first said)."""
        return [self._line(group, claims) for group, claims in self._blocked_groups]

    def _line(self, group: ProblemGroup, claims: str) -> str:
        from helm_nemo.status.pods import WAITING_FAILURES

        who = f"{self.release}: {len(group.pods)} worker pod(s)"
        if group.reason == "FailedScheduling":
            return f"{who} not scheduled{self._for(group.at)}: {group.words}{claims}"
        if group.reason == "SchedulingGated":
            return f"{who} {group.words}"
        if group.reason in WAITING_FAILURES:
            return f"{who} cannot start: {group.detail()}"
        return f"{who} not started{self._for(group.at)}: {group.reason} ({group.words})"  # a Warning event's

    def _not_started(self, pods: list[dict[str, Any]], said: set[str]) -> list[ProblemGroup]:
        """Pods on a node whose containers have not started, grouped by their newest Warning event since they
        were placed (FailedMount, FailedAttachVolume, FailedCreatePodSandBox: the pod's status says only
        ContainerCreating; the kubelet and the attach controller say why in events). One list of the
        namespace's Warning events of pods, read only while such pods exist; pods in `said` are already said."""
        from helm_nemo.status.events import event_message, event_time
        from helm_nemo.status.pods import ProblemGroup

        placed = {
            pod["metadata"]["name"]: scheduled
            for pod in pods
            if (pod.get("status") or {}).get("phase") == "Pending"
            and pod["metadata"]["name"] not in said
            and (scheduled := _scheduled_at(pod))
        }
        if not placed:
            return []
        events = self.client.list(
            EVENTS.format(ns=self.namespace), {"fieldSelector": "type=Warning,involvedObject.kind=Pod"}
        )
        newest: dict[str, tuple[str, str, str]] = {}  # pod -> (time, reason, message)
        for event in events:
            pod = (event.get("involvedObject") or {}).get("name", "")
            at = event_time(event)
            if pod not in placed or at < placed[pod] or event.get("reason") in BEFORE_START:
                continue
            if pod not in newest or at >= newest[pod][0]:
                newest[pod] = (at, event.get("reason") or "Warning", event_message(event)[:240])
        groups: dict[tuple[str, str], ProblemGroup] = {}
        for pod, (_, reason, message) in sorted(newest.items()):
            group = groups.setdefault((reason, message), ProblemGroup(reason, message, [], placed[pod], fatal=False))
            group.pods.append(pod)
            group.at = min(group.at, placed[pod])
        return list(groups.values())

    def _for(self, at: str) -> str:
        from helm_nemo.status.conditions import parse_time
        from helm_nemo.status.progress import duration

        since = parse_time(at)
        if since is None:
            return ""
        seconds = (self.now() - since).total_seconds()
        return f" for {duration(seconds)}" if seconds >= 1 else ""

    def _claims(self, group: ProblemGroup, pods: list[dict[str, Any]]) -> str:
        """` (claim fsx-pvc: Pending)` when the scheduler waits for claims that the group's pods mount."""
        from helm_nemo.kube import KubeApiError

        if "persistentvolumeclaim" not in group.words.lower():
            return ""
        mine = set(group.pods)
        names = sorted(
            {
                ((volume.get("persistentVolumeClaim") or {}).get("claimName") or "")
                for pod in pods
                if pod["metadata"]["name"] in mine
                for volume in (pod.get("spec") or {}).get("volumes") or []
            }
            - {""}
        )
        said = []
        for name in names:
            try:
                claim = self.client.get_or_none(CLAIM.format(ns=self.namespace, name=name))
            except KubeApiError:
                continue
            phase = "not found" if claim is None else (claim.get("status") or {}).get("phase") or "Pending"
            if phase != "Bound":
                said.append(f"claim {name}: {phase}")
        return f" ({', '.join(said)})" if said else ""

    def _pods(self, job: dict[str, Any]) -> list[dict[str, Any]]:
        match = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        selector = ",".join(f"{k}={v}" for k, v in sorted(match.items())) or f"job-name={job['metadata']['name']}"
        pods = self.client.list(PODS.format(ns=self.namespace), {"labelSelector": selector})
        for pod in pods:
            index = pod_index(pod)
            if index is not None:
                self._index_of_name[pod["metadata"]["name"]] = index
        return pods

    def _read(self, pod: dict[str, Any]) -> None:
        """The log tail of a pod that changed since its last read (a running pod: always)."""
        from helm_nemo.kube import KubeApiError
        from helm_nemo.status.cluster import main_container

        meta, phase = pod.get("metadata") or {}, (pod.get("status") or {}).get("phase")
        seen = self.pods.setdefault(meta["name"], PodLines(meta["name"]))
        seen.index, seen.phase = self._index_of_name.get(meta["name"]), phase or ""
        version = meta.get("resourceVersion", "")
        if phase not in ("Running", "Succeeded", "Failed") or (
            phase != "Running" and version == self.versions.get(meta["name"])
        ):
            return
        query = {"tailLines": str(TAIL_LINES)}
        container = main_container(pod)
        if container:
            query["container"] = container
        try:
            text = self.client.text(LOG.format(ns=self.namespace, pod=meta["name"]), query)
        except KubeApiError:
            return  # not yet readable (the container is starting), or gone: the next poll tries again
        self.versions[meta["name"]] = version
        seen.read(text)

    def _failure_lines(self, job: dict[str, Any], condition: dict[str, Any]) -> list[str]:
        status = job.get("status") or {}
        name = job["metadata"]["name"]
        failed = sorted(parse_indexes(status.get("failedIndexes")))
        if not failed:  # no backoffLimitPerIndex: the indexes of the pods that failed
            failed = sorted({self._index_of_name.get(p, -1) for p, seen in self.pods.items() if seen.failed} - {-1})
        why = condition.get("reason") or condition.get("type")
        message = condition.get("message")
        what = (
            f"index {', '.join(map(str, failed))}"
            if len(failed) == 1
            else (f"indexes {', '.join(map(str, failed))}" if failed else "no index named")
        )
        lines = [f"{self.release}: Job {name} failed ({what}; {why}{': ' + message if message else ''})"]
        for index in failed or sorted(set(self._index_of_name.values())):
            pods = sorted(p for p, i in self._index_of_name.items() if i == index and p in self.pods)
            said = [line for p in pods for line in self.pods[p].failed.values()]
            if said:  # pod log lines reach the terminal: never as escape sequences
                lines += [f"  index {index}: {safe(line)}" for line in dict.fromkeys(said)]
            elif pods and self.pods[pods[-1]].last_lines:
                lines.append(f"  index {index}: the last lines of pod {pods[-1]}:")
                lines += [f"    {safe(line)}" for line in self.pods[pods[-1]].last_lines]
        return lines


class RecipeWaits:
    """The waits of one install/upgrade run: `before(plan)` returns once the Jobs of the releases `plan`
    names in `after` are complete (each release waited for once per run). Raises Failure or
    process.Interrupted."""

    def __init__(
        self,
        plans: list[ReleasePlan],
        extra: list[str],
        echo: Echo,
        options: WaitOptions | None = None,
        *,
        connect: Callable[[], KubeClient] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.by_name = {plan.release: plan for plan in plans}
        self.extra, self.echo = extra, echo
        self.options = options or WaitOptions()
        self._connect = connect
        self.clock, self.sleep = clock, sleep
        self.waited: set[str] = set()
        self.client: KubeClient | None = None
        self.deadline: float | None = None

    def pending(self, plan: ReleasePlan) -> list[str]:
        return [name for name in plan.after if name not in self.waited and name in self.by_name]

    def before(self, plan: ReleasePlan) -> None:
        pending = self.pending(plan)
        if not pending:
            return
        from helm_nemo.actions.process import check_interrupted
        from helm_nemo.dataprep.recipe import DATA_PREP, chart_kind, source_values
        from helm_nemo.kube import KubeError

        if self.deadline is None and self.options.timeout is not None:
            self.deadline = self.clock() + self.options.timeout
        if self.client is None:
            try:
                self.client = self._connect() if self._connect else _connect(self.extra)
            except KubeError as err:
                raise Failure([f"cannot read the cluster to wait for {', '.join(pending)}: {err}"]) from None
        namespace = self.client.namespace
        for name in pending:
            source = self.by_name[name]
            values = source_values(source) if chart_kind(source) == DATA_PREP else None
            self.echo(f"waiting for {name}'s Job to complete before {plan.release} (Ctrl-C stops the wait)")
            stage = StageWait(self.client, namespace, source, values, self.echo, timeout=self.options.timeout)
            errors = 0
            while True:
                check_interrupted()
                try:
                    if stage.poll():
                        break
                    errors = 0
                except KubeError as err:
                    errors += 1
                    self.echo(f"{name}: cannot read the cluster ({err}); trying again")
                    if errors >= MAX_READ_ERRORS:
                        raise Failure(
                            [f"{name}: {errors} reads of the cluster failed in a row; the last: {err}"], running=True
                        ) from None
                self._pause(name, stage)
            self.waited.add(name)

    def _pause(self, name: str, stage: StageWait) -> None:
        """Sleep one interval in short steps (a signal is seen within 0.1 s); Failure past the deadline."""
        from helm_nemo.actions.process import check_interrupted

        end = self.clock() + self.options.interval
        while True:
            check_interrupted()
            now = self.clock()
            if self.deadline is not None and now >= self.deadline:
                shown = f"{self.options.timeout:g}s"
                progress = ""
                if stage.said is not None:
                    progress = f" ({sum(stage.said)}/{sum(stage.totals.values())} shards)"
                lines = [f"{name}: not complete after --recipe-wait-timeout {shown}{progress}"]
                lines += [f"  {line}" for line in stage.blocked_lines]  # what kept the workers from running
                raise Failure(lines, running=True)
            if now >= end:
                return
            self.sleep(min(0.1, end - now))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _merged(groups: list[ProblemGroup]) -> list[ProblemGroup]:
    """The groups with ImagePullBackOff and ErrImagePull as one (the kubelet alternates them while it
    retries: one state for the wait), said with ErrImagePull's words (the registry's answer) when a pod has
    them."""
    from helm_nemo.status.pods import ProblemGroup

    out: list[ProblemGroup] = []
    pulls: ProblemGroup | None = None
    for group in groups:
        if group.reason not in IMAGE_PULL and group.reason not in IMAGE_PULL.values():
            out.append(group)
        elif pulls is None:
            pulls = ProblemGroup(group.reason, group.words, list(group.pods), group.at, group.fatal)
            out.append(pulls)
        else:
            pulls.pods += group.pods
            if group.reason == "ErrImagePull" and pulls.reason != "ErrImagePull":
                pulls.reason, pulls.words = group.reason, group.words
    return out


def _scheduled_at(pod: dict[str, Any]) -> str:
    """When the scheduler placed the pod (its PodScheduled condition turned True), or '' when not placed."""
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return str(condition.get("lastTransitionTime") or "0")
    return ""


def _same(group: ProblemGroup) -> str:
    """What must change for a group to be said again: the scheduler's or the kubelet's words (not those of
    an image pull: a retry says `Back-off pulling image`, the same state)."""
    return "" if group.reason in IMAGE_PULL or group.reason in IMAGE_PULL.values() else group.words


def _connect(extra: list[str]) -> KubeClient:
    from helm_nemo.kube import connect

    return connect(extra)
