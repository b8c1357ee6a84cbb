"""`preflight --nccl` (and `install --nccl`): measure the fabric the recipe will use with a temporary
nccl-test release, then remove it.

The profile's nccl-test chart is installed with the recipe release's placement (fabric/placement.py) on
N whole nodes, under a name of its own (`<release>-nccl`); its Job, pods and Kueue Workload are read until
rank 0 ends (fabric/watch.py: pods that cannot start end the wait with their reason; pods not placed end it
after SCHEDULING_PATIENCE); rank 0's log is judged (fabric/judge.py) as check `fabric.busbw`. The release is
uninstalled in every case (a failure, a timeout, Ctrl-C: the signal is set aside for the clean-up, then
re-raised) unless `keep`; `helm uninstall --cascade foreground --wait` returns once the pods are gone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.actions.helm import HelmBinary
    from helm_nemo.kube.client import KubeClient
    from helm_nemo.preflight.model import Release, Result
    from helm_nemo.values.release_plan import ReleasePlan

CHECK_ID = "fabric.busbw"
SCHEDULING_PATIENCE = 20.0  # seconds a test may stay unplaced (Kueue pending, no node fits) before it ends
LOG_LIMIT = 64 << 20  # bytes of rank 0's log read at most (400 ranks' INFO lines are a few MB)
JOB = "/apis/batch/v1/namespaces/{ns}/jobs/{name}"
PODS = "/api/v1/namespaces/{ns}/pods"
REMOVE_WAIT_S = 30.0  # after helm returns: the garbage collector removes a deleted Job within seconds
LOG = "/api/v1/namespaces/{ns}/pods/{pod}/log"


@dataclass
class NcclOptions:
    """--nccl-nodes, --nccl-timeout (seconds), --keep."""

    nodes: int = 2
    timeout: float = 1200.0
    keep: bool = False


def gpu_release(releases: list[Release]) -> Release | None:
    """The release whose pods the fabric carries: of those whose profile has an NCCL test, the one that
    requests the most of the profile's GPU resource."""
    from decimal import Decimal

    from helm_nemo.preflight.model import gpu_resource

    best, most = None, Decimal(0)
    for release in releases:
        if not (release.profile or {}).get("ncclTest"):
            continue
        resource = gpu_resource(release)
        gpus = sum((w.requests().get(resource, Decimal(0)) * w.pods for w in release.workloads()), Decimal(0))
        if gpus > most:
            best, most = release, gpus
    return best


def measure(
    release: Release,
    plan: ReleasePlan,
    helm: HelmBinary,
    extra: list[str],
    client: KubeClient,
    options: NcclOptions,
    echo: Callable[[str], None],
) -> Result:
    """Install the test, wait, judge rank 0's log, remove the test: the fabric.busbw Result."""
    import json

    from helm_nemo import resources
    from helm_nemo.fabric import placement
    from helm_nemo.preflight.model import FAIL, Result

    profile = release.profile or {}
    chart = resources.shipped_chart_name("nccl-test", release.accelerator)
    if chart is None:
        return Result(CHECK_ID, FAIL, f"no nccl-test chart for {release.accelerator}", release=release.name)
    with open(f"{chart}/values.schema.json", encoding="utf-8") as handle:
        schema = json.load(handle)
    values = placement.test_values(plan.values, profile, options.nodes, schema)
    name = placement.release_name(release.name)
    flags = _cluster_flags(extra, helm)
    namespace = release.namespace
    started = time.monotonic()
    timings: dict[str, float] = {}
    echo(f"helm nemo: NCCL test {name}: {options.nodes} x {profile.get('displayName', release.accelerator)}")
    result = None
    try:
        result = _install(helm, name, chart, values, namespace, flags)
        timings["install"] = time.monotonic() - started
        if result is None:
            result = _wait_and_judge(client, name, namespace, profile, options, echo, timings, started)
    finally:
        removed = None if options.keep else _remove(helm, name, namespace, flags, client, echo)
    if removed:  # the clean-up failed: say so on top of the measurement
        result.hint = f"{result.hint + '; ' if result.hint else ''}{removed}"
    timings["total"] = time.monotonic() - started
    result.release = release.name
    result.details.update(
        test_release=name,
        kept=options.keep,
        test_values=values,
        seconds={k: round(v, 2) for k, v in timings.items()},
    )
    if options.keep:
        result.message += f" (kept: helm uninstall {name} -n {namespace})"
    return result


def _cluster_flags(extra: list[str], helm: HelmBinary) -> list[str]:
    """Of the command's helm flags, the ones that choose the cluster and namespace (nothing else of the
    recipe's install applies to the test)."""
    from helm_nemo.actions.helm import needs_translation, translate_flags
    from helm_nemo.kube.config import FLAGS

    out, index = [], 0
    while index < len(extra):
        arg = extra[index]
        name, eq, _ = arg.partition("=")
        spec = FLAGS.get(name)
        if spec is None and arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
            out.append(arg)
        elif spec is not None:
            out.append(arg)
            if spec[1] and not eq and index + 1 < len(extra):
                index += 1
                out.append(extra[index])
        index += 1
    return translate_flags(out, helm.major) if needs_translation(out) else out


def _install(
    helm: HelmBinary, name: str, chart: str, values: dict[str, Any], namespace: str, flags: list[str]
) -> Result | None:
    """None when installed, else the failing Result (helm's own words)."""
    import json

    from helm_nemo.actions.process import run_helm
    from helm_nemo.preflight.model import FAIL, Result

    args = [helm.path, "install", name, chart, "-f", "-", *flags]
    if not any(f in ("-n", "--namespace") or f.startswith(("-n", "--namespace=")) for f in flags):
        args += ["--namespace", namespace]
    proc = run_helm(args, input=json.dumps(values), capture_stdout=True, capture_stderr=True)
    if proc.returncode == 0:
        return None
    said = next((line for line in (proc.stderr or "").splitlines() if line.strip()), "helm said nothing")
    hint = "helm nemo preflight renders the same chart: run helm nemo lint on a values file with chart: nccl-test"
    if "cannot re-use a name" in said or "still in use" in said:
        hint = f"a test release of an earlier run is there (--keep?): helm uninstall {name} -n {namespace}"
    return Result(CHECK_ID, FAIL, f"could not install the NCCL test release {name}: {said}", hint)


def _wait_and_judge(
    client: KubeClient,
    name: str,
    namespace: str,
    profile: dict[str, Any],
    options: NcclOptions,
    echo: Callable[[str], None],
    timings: dict[str, float],
    started: float,
) -> Result:
    from helm_nemo.actions.process import check_interrupted
    from helm_nemo.fabric import watch
    from helm_nemo.preflight.model import FAIL, Result

    deadline = started + options.timeout
    interval, unplaced_since, said = 0.2, None, ""
    while True:
        check_interrupted()
        seen, created = _look(client, name, namespace)
        now = time.monotonic()
        if seen.words != said:
            echo(f"  {name}: {seen.words}")
            said = seen.words
        if seen.state == watch.DONE:
            break
        hint = _hint(seen, name, namespace)
        if seen.state == watch.FAILED:
            return Result(CHECK_ID, FAIL, f"the NCCL test did not run: {seen.words}", hint)
        unplaced_since = (unplaced_since or now) if seen.state == watch.PENDING else None
        patience_over = unplaced_since is not None and now - unplaced_since >= SCHEDULING_PATIENCE
        if patience_over or (unplaced_since is not None and now >= deadline):
            waited = now - started
            return Result(CHECK_ID, FAIL, f"the NCCL test's pods did not start in {waited:.0f} s: {seen.words}", hint)
        if now >= deadline:
            return Result(
                CHECK_ID,
                FAIL,
                f"no result after {options.timeout:.0f} s (--nccl-timeout): {seen.words}",
                hint or "a large image can take minutes to pull: rerun with a longer --nccl-timeout",
            )
        time.sleep(min(interval, max(0.0, deadline - now)))
        interval = min(interval * 1.5, 1.0)
    timings["run"] = time.monotonic() - started
    span = _span(created, seen.finished_at)
    if span is not None:
        timings["in_cluster"] = span
    assert seen.rank0 is not None
    return _judge_log(client, namespace, seen, profile, options.nodes)


def _span(start: str, end: str) -> float | None:
    """Seconds between two API times (1 s resolution): the Job's creation to rank 0's end is the test's
    run as the cluster records it (Kueue, the scheduler, image pulls, the test itself)."""
    from helm_nemo.status.conditions import parse_time

    first, last = parse_time(start), parse_time(end)
    return (last - first).total_seconds() if first and last else None


def _look(client: KubeClient, name: str, namespace: str) -> tuple[Any, str]:
    """(what the test's objects say, the Job's creationTimestamp)."""
    from helm_nemo.fabric import watch
    from helm_nemo.kube import KubeApiError
    from helm_nemo.status.cluster import WORKLOADS
    from helm_nemo.status.kueue import KUEUE_JOB_UID

    job = client.get_or_none(JOB.format(ns=namespace, name=name))
    pods = client.list(PODS.format(ns=namespace), {"labelSelector": f"batch.kubernetes.io/job-name={name}"})
    workload = None
    if job and (job.get("spec") or {}).get("suspend"):
        uid = (job.get("metadata") or {}).get("uid", "")
        try:
            found = client.list(WORKLOADS.format(ns=namespace), {"labelSelector": f"{KUEUE_JOB_UID}={uid}"})
        except KubeApiError as err:
            if not err.not_found:  # 404: Kueue not installed (a suspended Job nobody admits)
                raise
            found = []
        workload = found[0] if found else None
    return watch.look(job, pods, workload), ((job or {}).get("metadata") or {}).get("creationTimestamp", "")


def _hint(seen: Any, name: str, namespace: str) -> str:
    words = seen.words
    if "Kueue" in words:
        return "the test asks the recipe's queue for --nccl-nodes nodes' GPUs: free quota, or fewer --nccl-nodes"
    if "not scheduled" in words:
        return (
            "the test's pods are placed like the recipe's (its selectors, tolerations, networks): "
            f"kubectl describe pod -n {namespace} -l batch.kubernetes.io/job-name={name}"
        )
    if "cannot start" in words:
        return f"kubectl describe pod -n {namespace} -l batch.kubernetes.io/job-name={name}"
    return ""


def _judge_log(client: KubeClient, namespace: str, seen: Any, profile: dict[str, Any], nodes: int) -> Result:
    from helm_nemo.fabric import nccl_log
    from helm_nemo.fabric.judge import judge
    from helm_nemo.preflight.model import FAIL, Result

    text = client.text(
        LOG.format(ns=namespace, pod=seen.rank0), {"container": "workload", "limitBytes": str(LOG_LIMIT)}
    )
    try:
        run = nccl_log.parse(text)
    except nccl_log.NotAnNcclTestsOutput as bad:
        tail = [line for line in text.splitlines() if line.strip()][-3:]
        return Result(
            CHECK_ID,
            FAIL,
            f"{seen.words}; its log holds no result: {bad.message}",
            bad.hint + (f"; its last lines: {' | '.join(tail)}" if tail else ""),
            details={"rank0": seen.rank0, "nodes_used": list(seen.nodes)},
        )
    result = judge(run, profile, nodes)
    result.details.update(rank0=seen.rank0, nodes_used=list(seen.nodes))
    if not seen.rank0_ok and result.verdict != FAIL:
        result.verdict = FAIL
        result.message = f"{result.message}; but {seen.words}"
    return result


def _remove(
    helm: HelmBinary, name: str, namespace: str, flags: list[str], client: KubeClient, echo: Callable[[str], None]
) -> str | None:
    """Uninstall the test and wait for its pods to go; None when nothing is left, else what to run."""
    from helm_nemo.actions.process import Interrupted, run_helm, signal_set_aside

    args = [helm.path, "uninstall", name, "--ignore-not-found", "--cascade", "foreground", "--wait", *flags]
    if not any(f in ("-n", "--namespace") or f.startswith(("-n", "--namespace=")) for f in flags):
        args += ["--namespace", namespace]
    left = f"the test release may be left: helm uninstall {name} -n {namespace}"
    with signal_set_aside():
        try:
            proc = run_helm(args, capture_stdout=True, capture_stderr=True)
        except Interrupted:
            return left
    if proc.returncode != 0:
        echo(f"helm nemo: could not remove the NCCL test release {name}: {(proc.stderr or '').strip()}")
        return left
    # helm's --wait can return while the Job still holds its foreground-deletion finalizer (Kueue's Workload
    # goes first); the clean-up is done when the API server no longer has the Job nor its pods.
    deadline = time.monotonic() + REMOVE_WAIT_S
    while True:
        try:
            job = client.get_or_none(JOB.format(ns=namespace, name=name))
            pods = client.list(PODS.format(ns=namespace), {"labelSelector": f"batch.kubernetes.io/job-name={name}"})
        except Exception as err:  # the clean-up says what it could not see; it never hides the measurement
            return f"could not list the test's pods after removing it ({err})"
        if job is None and not pods:
            return None
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if pods:
        return f"{len(pods)} pod(s) of the test still terminating: kubectl get pods -n {namespace} -l job-name={name}"
    return f"the test's Job is still being deleted: kubectl get job {name} -n {namespace}"
