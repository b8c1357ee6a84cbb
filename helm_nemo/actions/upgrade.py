"""`helm nemo upgrade`: decide what each release's change needs before the first helm call, then do it.

A real cluster refuses most changes to a running training workload (a Job's pod template, a JobSet's
replicated jobs: helm_nemo/diff/admission.py). Upgrading a recipe release by release would then stop
half-way with helm's "field is immutable", the releases before it already upgraded. So every release is
first rendered, validated and compared with what is installed (actions/diff.diff_plans, the install path
exactly, the installed run's jobTimestamp kept), and classified:

- in place: nothing the cluster refuses changes (ConfigMaps, Services, storage, the supervisor, a JobSet's
  labels, a suspended JobSet's pod scheduling fields, no change at all): `helm upgrade`;
- new workload: a field the cluster refuses to change. Without a choice the upgrade stops before anything
  is sent, naming each field and why. `--recreate` uninstalls that release (its history kept, waiting with
  foreground deletion until its pods are gone, so two runs never write the same checkpoints) and installs it
  again as the same run: the same jobTimestamp, so the same JOB_IDENTIFIER, log and checkpoint directories,
  and the launcher resumes from the run's last checkpoint. `--new-run` does the same with a new jobTimestamp
  (fresh directories). Other releases are upgraded in place; all in recipe order. Between the uninstall
  and the install, the refused workloads are read until the API server no longer has them (wait_deleted:
  helm's own wait once returned early on Helm 4, as helm/helm#31651 reports), bounded by --timeout (default
  300 s).

A recreate that stopped after the uninstall leaves the release `uninstalled` with its history (and so its
run's timestamp) kept; running the same command again installs it as that run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from helm_nemo.actions import releases
from helm_nemo.actions.helm import HelmBinary, needs_translation, translate_flags
from helm_nemo.actions.installed import global_flags, release_status
from helm_nemo.actions.process import Interrupted, run_helm
from helm_nemo.diff.admission import Refusal, refusals
from helm_nemo.diff.objects import ObjectDiff, ObjectId
from helm_nemo.diff.semantic import Difference
from helm_nemo.values.release_plan import ReleasePlan

if TYPE_CHECKING:
    from collections.abc import Callable

    from helm_nemo.dataprep.wait import RecipeWaits

    Echo = Callable[[str], None]

IN_PLACE, NEW_WORKLOAD, REINSTALL = "in place", "new workload", "install again"
RECREATE, NEW_RUN = "recreate", "new-run"
EXIT_NEEDS_CHOICE = 2


class ReleaseChange(NamedTuple):
    plan: ReleasePlan
    status: str | None  # helm's status of the installed release; None: not installed
    action: str  # IN_PLACE | NEW_WORKLOAD | REINSTALL
    refused: list[tuple[ObjectId, Refusal]]


def classify(
    plans: list[ReleasePlan], helm: HelmBinary, extra: list[str], *, validate: bool = True, echo: Echo = print
) -> list[ReleaseChange]:
    """Each release's change and what it needs (renders and validates every release; reads the cluster only)."""
    from helm_nemo.actions.diff import diff_plans

    statuses = [release_status(helm, plan.release, extra) for plan in plans]
    diffs = diff_plans(plans, helm, extra, validate=validate, echo=echo)
    out = []
    for plan, status, diff in zip(plans, statuses, diffs, strict=True):
        objects = diff.objects
        if status == "failed":  # the last revision failed: what runs is the last one that deployed, if any
            objects, status = _against_last_deployed(helm, plan, extra, diff.rendered)
        refused = [
            (obj.id, refusal)
            for obj in objects
            if obj.change == "changed" and obj.old and obj.new
            for refusal in refusals(obj.old, obj.new, live=live_object(obj, extra, echo))
        ]
        if status == "uninstalled":
            action = REINSTALL  # a recreate stopped after its uninstall: the history keeps the run
        else:
            action = NEW_WORKLOAD if refused and status is not None else IN_PLACE
        out.append(ReleaseChange(plan, status, action, refused))
    return out


_PLURALS = {"JobSet": "jobsets", "Job": "jobs"}


def live_object(obj: ObjectDiff, extra: list[str], echo: Echo) -> dict[str, Any] | None:
    """The object as the cluster holds it now, for the workloads whose update rules depend on their state
    (suspended by Kueue or by the values, a Job never started); None when it cannot be read: the rules then
    take the safe side (running). Only read when the manifest comparison would refuse the change."""
    plural = _PLURALS.get(obj.id.kind)
    if plural is None or not obj.old or not obj.new or not refusals(obj.old, obj.new):
        return None
    from helm_nemo.kube import KubeError, connect

    try:
        client = connect(extra)
        namespace = obj.id.namespace or client.namespace
        return client.get(f"/apis/{obj.id.api_version}/namespaces/{namespace}/{plural}/{obj.id.name}")
    except KubeError as err:
        echo(f"helm nemo: could not read {obj.id.kind} {obj.id.name} from the cluster ({err}); deciding as if it runs")
        return None


def _against_last_deployed(
    helm: HelmBinary, plan: ReleasePlan, extra: list[str], rendered: str
) -> tuple[list[ObjectDiff], str | None]:
    """For a release whose last revision failed: the comparison with the last revision that deployed (its objects
    are the ones in the cluster), or `uninstalled` when the release was uninstalled since (nothing of it runs)."""
    from helm_nemo.actions.installed import get_manifest, release_history
    from helm_nemo.diff.objects import diff_manifests

    for revision, status in reversed(release_history(helm, plan.release, extra)):
        if status == "uninstalled":
            return [], "uninstalled"
        if status in ("deployed", "superseded"):
            return diff_manifests(get_manifest(helm, plan.release, extra, revision) or "", rendered), "failed"
    return [], "uninstalled"  # it never deployed: install it again


def explain(changes: list[ReleaseChange], hint_command: str) -> str:
    """Why the upgrade stops: each release that needs a new workload, its refused fields, and the choices."""
    needing = [c for c in changes if c.action == NEW_WORKLOAD]
    lines = [
        f"helm nemo: the upgrade needs a new workload for {', '.join(c.plan.release for c in needing)}; "
        "nothing was changed."
    ]
    for change in needing:
        for ident, refusal in change.refused:
            lines.append(f"  {change.plan.release}: {ident.kind} {ident.name}: {refusal.reason}")
            for difference in refusal.differences[:5]:
                lines.append(f"      {_shown(difference)}")
            if len(refusal.differences) > 5:
                lines.append(f"      … and {len(refusal.differences) - 5} more (helm nemo diff shows them all)")
    stamp = next((_stamp(c.plan) for c in needing if _stamp(c.plan)), None)
    lines.append("  choose:")
    lines.append(
        f"    {hint_command} --recreate   uninstall and install again as the same run"
        + (
            f" ({stamp}: same log and checkpoint directories; training resumes from its last checkpoint)"
            if stamp
            else ""
        )
    )
    lines.append(f"    {hint_command} --new-run    the same, as a new run (new directories)")
    in_place = [c.plan.release for c in changes if c.action == IN_PLACE]
    if in_place:
        lines.append(f"  {', '.join(in_place)}: upgraded in place either way")
    return "\n".join(lines)


def _shown(difference: Difference) -> str:
    """`path: changed 'old' -> 'new'` with long values cut in their middle (image names differ at their end)."""

    def value(v: object) -> str:
        text = repr(v) if not isinstance(v, (dict, list)) else "{…}" if isinstance(v, dict) else "[…]"
        return text if len(text) <= 64 else text[:24] + "…" + text[-39:]

    if difference.change == "changed":
        return f"{difference.path}: changed {value(difference.expected)} -> {value(difference.actual)}"
    return f"{difference.path}: {difference.change} " + value(
        difference.actual if difference.change == "added" else difference.expected
    )


def _stamp(plan: ReleasePlan) -> str | None:
    workload = plan.values.get("workload")
    stamp = workload.get("jobTimestamp") if isinstance(workload, dict) else None
    return stamp if isinstance(stamp, str) else None


def pinned_runs(plans: list[ReleasePlan]) -> set[str]:
    """The releases whose values name their run (workload.jobTimestamp); ask before anything stamps the plans."""
    return {plan.release for plan in plans if _stamp(plan)}


def upgrade(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    *,
    mode: str | None = None,
    install_missing: bool = False,
    validate: bool = True,
    hint_command: str = "helm nemo upgrade",
    pinned: set[str] | None = None,
    echo: Echo = print,
    waits: RecipeWaits | None = None,
) -> int:
    """Classify every release, then upgrade in place / recreate, in recipe order (see the module's docstring).
    `pinned`: pinned_runs(plans) taken before the plans were stamped (default: now)."""
    from helm_nemo.actions.diff import DiffError
    from helm_nemo.actions.installed import ReleaseReadError

    pinned = pinned_runs(plans) if pinned is None else pinned
    try:
        changes = classify(plans, helm, extra, validate=validate, echo=echo)
    except (ReleaseReadError, DiffError) as problem:
        echo(f"helm nemo: {problem}; nothing was upgraded")
        return EXIT_NEEDS_CHOICE
    if any(c.action == NEW_WORKLOAD for c in changes) and mode is None:
        echo(explain(changes, hint_command))
        return EXIT_NEEDS_CHOICE
    if mode == NEW_RUN:
        named = [c.plan.release for c in changes if c.action != IN_PLACE and c.plan.release in pinned]
        if named:
            echo(
                f"helm nemo: --new-run: the values of {', '.join(named)} set workload.jobTimestamp, which names "
                "the run; nothing was changed.\n    hint: remove workload.jobTimestamp from the values (or use "
                "--recreate to resume that run)"
            )
            return EXIT_NEEDS_CHOICE
    return _apply(
        changes,
        helm,
        extra,
        mode=mode,
        install_missing=install_missing,
        echo=echo,
        hint_command=hint_command,
        pinned=pinned,
        waits=waits,
    )


def _apply(
    changes: list[ReleaseChange],
    helm: HelmBinary,
    extra: list[str],
    *,
    mode: str | None,
    install_missing: bool,
    echo: Echo,
    hint_command: str,
    pinned: set[str],
    waits: RecipeWaits | None = None,
) -> int:
    done: list[str] = []
    total = len(changes)
    for index, change in enumerate(changes, start=1):
        plan = change.plan
        if waits is not None and waits.pending(plan):  # a recipe stage: the Jobs it names complete first
            finished = [name.split(" ", 1)[0] for name in done]
            code = releases.wait_before(waits, plan, finished, [c.plan for c in changes[index - 1 :]], extra, echo)
            if code is not None:
                return code
        if change.action == IN_PLACE:
            verb = ["upgrade", "--install"] if install_missing else ["upgrade"]
            echo(f"[{index}/{total}] upgrade {plan.release} ({plan.chart}) in place")
            code = _send(helm, verb, plan, extra)
            if code:
                return _stopped(
                    echo,
                    f"the upgrade of {plan.release} failed (helm exit {code})",
                    done,
                    changes,
                    index,
                    hint_command,
                    mode,
                )
            done.append(f"{plan.release} upgraded")
            continue
        if mode == NEW_RUN and plan.release not in pinned:
            releases.stamp_job_time(plan, fresh=True)
        run = _stamp(plan)
        if change.action == NEW_WORKLOAD:
            echo(
                f"[{index}/{total}] recreate {plan.release} ({plan.chart}) as "
                + (f"run {run}" if run else "a new workload")
                + ": uninstall, then install"
            )
            code = _uninstall_for_recreate(helm, plan, extra)
            if code:
                return _stopped(
                    echo,
                    f"the uninstall of {plan.release} failed (helm exit {code}); it is still installed as it was",
                    done,
                    changes,
                    index,
                    hint_command,
                    mode,
                )
            left = wait_deleted([obj for obj, _ in change.refused], extra, echo)
            if left:
                return _stopped(
                    echo,
                    f"{plan.release} is uninstalled (its history keeps run {run}) but {left}",
                    done,
                    changes,
                    index,
                    hint_command,
                    mode,
                )
        else:
            echo(
                f"[{index}/{total}] install {plan.release} ({plan.chart}) again as "
                + (f"run {run}" if run else "before")
                + " (its uninstall finished in an earlier run)"
            )
        code = _send(helm, ["install", "--replace"], plan, extra)
        if code:
            return _stopped(
                echo,
                f"{plan.release} is uninstalled (its history keeps run {run}) and installing it "
                f"again failed (helm exit {code})",
                done,
                changes,
                index,
                hint_command,
                mode,
            )
        done.append(f"{plan.release} recreated" + (f" as run {run}" if run else ""))
    return 0


def _send(helm: HelmBinary, verb: list[str], plan: ReleasePlan, extra: list[str]) -> int:
    try:
        proc = releases.run_verb(helm, verb, plan, extra)
    except Interrupted as stop:
        return stop.exit_code
    return proc.returncode


def _uninstall_for_recreate(helm: HelmBinary, plan: ReleasePlan, extra: list[str]) -> int:
    """Uninstall keeping the history (the run's values stay readable), foreground: returns once the workload's
    Jobs and Pods are gone, so the new one never runs beside the old one."""
    flags = global_flags(extra)
    timeout = _value_of(extra, "--timeout")
    args = [
        helm.path,
        "uninstall",
        plan.release,
        "--keep-history",
        "--wait",
        "--cascade",
        "foreground",
        *(["--timeout", timeout] if timeout else []),
        *(translate_flags(flags, helm.major) if needs_translation(flags) else flags),
    ]
    try:
        proc = run_helm(args, capture_stderr=False)
    except Interrupted as stop:
        return stop.exit_code
    return proc.returncode


DELETE_TIMEOUT = 300.0  # seconds, as helm's --timeout default
DELETE_POLL = 0.5


def wait_deleted(ids: list[ObjectId], extra: list[str], echo: Echo) -> str | None:
    """Wait until the refused workloads (JobSet, Job) are gone from the cluster; None when they are, else what
    is left, said. Helm's `uninstall --wait --cascade foreground` is meant to return only then, yet Helm 4
    once returned while the JobSet still existed, and its install then met the old JobSet ("field is
    immutable"). The install must not start before, or two runs could write one run's checkpoints."""
    import time

    from helm_nemo.kube import KubeError, connect

    workloads = [obj for obj in dict.fromkeys(ids) if obj.kind in _PLURALS]
    if not workloads:
        return None
    timeout = _value_of(extra, "--timeout")
    limit = DELETE_TIMEOUT
    if timeout:
        from helm_nemo.dataprep.wait import parse_duration

        try:
            limit = parse_duration(timeout)
        except ValueError:
            pass  # helm has said so already
    deadline, said = time.monotonic() + limit, False
    try:
        client = connect(extra)
        while True:
            left = [
                obj
                for obj in workloads
                if client.get_or_none(
                    f"/apis/{obj.api_version}/namespaces/{obj.namespace or client.namespace}/"
                    f"{_PLURALS[obj.kind]}/{obj.name}"
                )
                is not None
            ]
            if not left:
                return None
            names = ", ".join(f"{obj.kind} {obj.name}" for obj in left)
            if time.monotonic() >= deadline:
                return f"{names} still exists {limit:g}s after the uninstall (being deleted?)"
            if not said:
                echo(f"  waiting for {names} to be deleted before the install")
                said = True
            time.sleep(DELETE_POLL)
    except KubeError as err:
        return f"the cluster could not be read to see that its workload is gone ({err})"


def _value_of(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag == name:
            return value if eq else (args[index + 1] if index + 1 < len(args) else None)
    return None


def _stopped(
    echo: Echo,
    what: str,
    done: list[str],
    changes: list[ReleaseChange],
    index: int,
    hint_command: str,
    mode: str | None,
) -> int:
    rest = [c.plan.release for c in changes[index:]]
    lines = [f"helm nemo: {what}; stopped.", f"  done by this run: {', '.join(done) if done else 'nothing'}."]
    if rest:
        lines.append(f"  not started: {', '.join(rest)}.")
    if mode is None:
        lines.append(f"  to finish: fix the cause, then run {hint_command} again")
    else:
        lines.append(
            f"  to finish: fix the cause, then run {hint_command} --{mode} again (a release left "
            "uninstalled is installed again " + ("as its run)" if mode == RECREATE else "as a new run)")
        )
    echo("\n".join(lines))
    return 1
