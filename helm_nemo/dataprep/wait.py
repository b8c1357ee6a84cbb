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
  `R: 4/6 shards (worker 0: 2/3, worker 1: 2/3)` is said when a count changes.

A signal (SIGINT/SIGTERM, remembered by actions/process.py) stops the wait between two reads:
process.Interrupted, which the install turns into what was installed and how to continue.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from helm_nemo.dataprep.progress import PodLines, count, parse_indexes, pod_index

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.kube.client import KubeClient
    from helm_nemo.values.plan import ReleasePlan

    Echo = Callable[[str], None]

DATA_PREP_LABEL = "helm-nemo.dev/data-prep"
INSTANCE = "app.kubernetes.io/instance"
JOBS = "/apis/batch/v1/namespaces/{ns}/jobs"
PODS = "/api/v1/namespaces/{ns}/pods"
LOG = "/api/v1/namespaces/{ns}/pods/{pod}/log"
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
    ) -> None:
        self.client, self.namespace, self.plan, self.echo = client, namespace, plan, echo
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
        for pod in self._pods(job):
            self._read(pod)
        found = count(job, self.shares, self.pods.values())
        said = found.counts()
        if said != self.said:
            self.said = said
            self.echo(f"{self.release}: {found.line()}")

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
            if said:
                lines += [f"  index {index}: {line}" for line in dict.fromkeys(said)]
            elif pods and self.pods[pods[-1]].last_lines:
                lines.append(f"  index {index}: the last lines of pod {pods[-1]}:")
                lines += [f"    {line}" for line in self.pods[pods[-1]].last_lines]
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
            stage = StageWait(self.client, namespace, source, values, self.echo)
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
                raise Failure([f"{name}: not complete after --recipe-wait-timeout {shown}{progress}"], running=True)
            if now >= end:
                return
            self.sleep(min(0.1, end - now))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


def _connect(extra: list[str]) -> KubeClient:
    from helm_nemo.kube import connect

    return connect(extra)
