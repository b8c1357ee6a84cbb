"""`helm nemo status` and `helm nemo logs` on Kubernetes: read-only, from the cluster helm would use.

status: the releases of a values or recipe file (or one named release) -> one read of the cluster per
refresh (helm_nemo.status.cluster) -> a verdict per release -> text, a redrawn screen (--watch) or JSON.
logs: the log of one rank (default rank 0) or pod, streamed with --follow; --errors scans the recent log of
every pod of the releases and the pods' states and names the first cause (helm_nemo.diagnose).
"""

from __future__ import annotations

import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable

from helm_nemo.user_errors import Problem, UserError

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from datetime import datetime
    from typing import Any

    from helm_nemo.kube.client import KubeClient
    from helm_nemo.status.progress import RunInputs

Echo = Callable[[str], None]
CLEAR = "\x1b[H\x1b[2J"
ERRORS_TAIL = 500  # lines of each pod's log --errors reads
ERRORS_THREADS = 8


def connect(extra: list[str], namespace: str | None) -> KubeClient:
    from helm_nemo.kube import connect as kube_connect

    return kube_connect(extra, namespace=namespace)


def release_targets(values_files: list[str], release: str | None) -> list[str]:
    """The release names to look at: those of the values/recipe file (just the names: nothing else is
    substituted), or the one named."""
    if not values_files:
        if not release:
            raise UserError(
                Problem(
                    "<command line>",
                    None,
                    None,
                    "$",
                    "name a release or give --values FILE",
                    hint="helm nemo status RELEASE, or helm nemo status --values recipe.yaml",
                )
            )
        return [release]
    from helm_nemo.values.recipe import release_names

    return [r.release for r in release_names(list(values_files), release=release)]


def run_inputs_for(values_files: list[str], names: list[str]) -> dict[str, RunInputs]:
    from helm_nemo.status.progress import RunInputs, run_inputs

    if not values_files or values_files == ["-"]:
        return {
            name: RunInputs(missing=["no --values: GPUs, batch size, model and accelerator are not known"])
            for name in names
        }
    return {name: run_inputs(values_files[-1], name if len(names) > 1 else None) for name in names}


def status(
    names: list[str],
    client: KubeClient,
    *,
    run_inputs: dict[str, RunInputs] | None = None,
    output: str = "text",
    watch: bool = False,
    interval: float = 10.0,
    stall_factor: float | None = None,
    out: Echo = print,
    tty: bool | None = None,
    now: datetime | Callable[[], datetime] | None = None,
    max_refreshes: int | None = None,
) -> int:
    """Print the status of the releases; the exit code of the (last) refresh."""
    from helm_nemo.status import cluster, render
    from helm_nemo.status.verdict import exit_code, verdict
    from helm_nemo.terminal_text import escape_json, safe

    tty = sys.stdout.isatty() if tty is None else tty
    refreshes = 0
    while True:
        statuses = cluster.read_statuses(
            client, client.namespace, names, run_inputs, stall_factor=stall_factor, now=now() if callable(now) else now
        )
        verdicts = [verdict(s) for s in statuses]
        code = exit_code(verdicts)
        if output == "json":  # with --watch: one line per refresh (JSON Lines)
            out(escape_json(render.as_json(statuses, verdicts, code, indent=None if watch else 2)))
        else:
            body = safe(render.text(statuses, verdicts, progress_bar=watch))  # log lines, events: terminal-safe
            if watch:
                stamp = time.strftime("%H:%M:%S")
                header = f"helm nemo status  {stamp}  every {interval:g} s (Ctrl-C stops)"
                out((CLEAR if tty else "") + header + "\n\n" + body + ("" if tty else "\n"))
            else:
                out(body)
        refreshes += 1
        finished = all(v.state in ("Completed", "Failed", "NotFound") for v in verdicts)
        if not watch or finished or (max_refreshes is not None and refreshes >= max_refreshes):
            return code
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return code


# ---------------------------------------------------------------------------------------------------------
# logs


def _release_pods(client: KubeClient, names: list[str]) -> list[dict[str, Any]]:
    from helm_nemo.status import cluster

    return client.list(
        cluster.PODS.format(ns=client.namespace), {"labelSelector": cluster._selector(cluster.INSTANCE, names)}
    )


def pick_pod(pods: list[dict[str, Any]], rank: int | None, pod_name: str | None) -> dict[str, Any]:
    from helm_nemo.status import cluster
    from helm_nemo.status.pods import pod_job_index, pod_rank

    if pod_name:
        for pod in pods:
            if pod["metadata"]["name"] == pod_name:
                return pod
        raise LookupError(f"pod {pod_name} is not a pod of these releases")
    ordered = [p for p in cluster.rank_pods(pods) if pod_job_index(p) == 0] or cluster.rank_pods(pods)
    wanted = rank or 0
    for pod in ordered:
        if (pod_rank(pod) or 0) == wanted:
            return pod
    ranks = sorted({rank for rank in map(pod_rank, ordered) if rank is not None})
    raise LookupError(f"no pod of rank {wanted} (ranks: {', '.join(map(str, ranks)) or 'none'})")


def logs(
    names: list[str],
    client: KubeClient,
    *,
    rank: int | None = None,
    pod: str | None = None,
    follow: bool = False,
    tail: int | None = None,
    previous: bool = False,
    timestamps: bool = False,
    out: Callable[[str], None],
    err: Echo,
    terminal: bool | None = None,
) -> int:
    """Print (or follow) the training log of one rank or pod. Exit 0, 3 when there is no such pod. On a
    terminal (default: when stdout is one) the log goes through terminal_text (escape sequences and controls
    removed or shown); piped or redirected, its text is passed through as the pod wrote it, as kubectl does."""
    from helm_nemo.status import cluster
    from helm_nemo.terminal_text import Stream

    pods = _release_pods(client, names)
    if not pods:
        err(f"helm nemo logs: no pod of {', '.join(names)} in namespace {client.namespace}")
        return 3
    try:
        chosen = pick_pod(pods, rank, pod)
    except LookupError as error:
        err(f"helm nemo logs: {error}")
        return 3
    name = chosen["metadata"]["name"]
    container = cluster.main_container(chosen)
    query = {"container": container} if container else {}
    if tail is not None:
        query["tailLines"] = str(tail)
    if previous:
        query["previous"] = "true"
    if timestamps:
        query["timestamps"] = "true"
    path = cluster.LOG.format(ns=client.namespace, pod=name)
    err(f"==> {name}" + (f" ({container})" if container else "") + " <==")
    stream = Stream() if (sys.stdout.isatty() if terminal is None else terminal) else None
    if not follow:
        text = client.text(path, query)
        out(text if stream is None else stream.feed(text) + stream.close())
        return 0
    query["follow"] = "true"
    try:
        for piece in client.stream(path, query):
            out(piece if stream is None else stream.feed(piece))
    except KeyboardInterrupt:
        pass
    if stream is not None:
        out(stream.close())
    return 0


def errors(
    names: list[str], client: KubeClient, *, tail: int = ERRORS_TAIL, output: str = "text", out: Echo, err: Echo
) -> int:
    """One diagnosis over every pod's recent log (and a restarted container's previous log) and the pods'
    states: the first cause, what followed. Exit 1 when a failure is found, 0 when none, 3 when no pod."""
    from helm_nemo.diagnose import diagnose_texts, pods as pod_states, render
    from helm_nemo.kube import KubeApiError
    from helm_nemo.status import cluster
    from helm_nemo.status.pods import summarize_pods
    from helm_nemo.terminal_text import escape_json, safe

    pods = _release_pods(client, names)
    if not pods:
        err(f"helm nemo logs: no pod of {', '.join(names)} in namespace {client.namespace}")
        return 3

    def read(pod: dict[str, Any]) -> tuple[list[tuple[str, str]], str | None]:
        name = pod["metadata"]["name"]
        container = cluster.main_container(pod)
        texts, problem = [], None
        restarted = any(
            int(s.get("restartCount") or 0) for s in (pod.get("status") or {}).get("containerStatuses") or []
        )
        for previous in (True, False) if restarted else (False,):
            try:
                text = cluster.pod_log(client, client.namespace, name, container, tail, previous=previous)
            except KubeApiError as error:
                if not previous:
                    problem = f"{name}: {error.code} {error.message}"
                continue
            texts.append((name + (" (previous)" if previous else ""), text))
        return texts, problem

    readable = [
        p for p in cluster.rank_pods(pods) if (p.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")
    ]
    readable += [p for p in pods if p not in readable and (p.get("status") or {}).get("phase") == "Failed"]
    with ThreadPoolExecutor(max_workers=ERRORS_THREADS) as pool:
        results = list(pool.map(read, readable))
    texts = [item for found, _ in results for item in found]
    unread = [problem for _, problem in results if problem]
    states = pod_states.events(summarize_pods(pods).problems)
    nodes = {p["metadata"]["name"]: (p.get("spec") or {}).get("nodeName") or "" for p in pods}
    diagnosis = diagnose_texts(texts, kind="pod", extra=states, nodes=nodes)
    if output == "json":
        doc = diagnosis.as_json()
        doc.update({"pods_scanned": len(readable), "lines_per_pod": tail, "unreadable": unread})
        out(escape_json(json.dumps(doc, indent=2, ensure_ascii=False)))
    else:
        out(safe(render.text(diagnosis, what=f"pod log(s) (the last {tail} lines of each)")))
    for problem in unread:
        err(safe(f"warning: cannot read the log of {problem}"))
    return 1 if diagnosis.failed else 0


def errors_offline(paths: list[str], *, output: str = "text", out: Echo, stdin: object = None) -> int:
    """`helm nemo logs --errors --file LOG…`: the verdict over log files (no cluster). Exit 1 when a failure is
    found, 0 when none; bad input (a missing file, a binary file, an empty folder) raises UserError (2)."""
    from helm_nemo.diagnose import diagnose_paths, render
    from helm_nemo.terminal_text import escape_json, safe

    diagnosis = diagnose_paths(paths, stdin)
    out(escape_json(render.as_json(diagnosis)) if output == "json" else safe(render.text(diagnosis, what="file(s)")))
    return 1 if diagnosis.failed else 0
