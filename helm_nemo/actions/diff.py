"""`helm nemo diff`: for every release of a values or recipe file, what is installed (`helm get manifest`;
a release not installed is empty) against what `helm nemo install`/`upgrade` would send now, object by
object (helm_nemo.diff.objects), shown by helm_nemo.diff.report. Exit codes as diff(1): 0 no
difference, 1 differences, 2 trouble (bad values, a render or validation failure, a cluster that does
not answer); all reading and rendering happens before anything is printed.

"Would send now" is the install path exactly: the plans (load, substitute, schema), the plugin's job
timestamp, `helm template` with the same values and flags, the offline manifest validation. Two
details: a release that is installed keeps its job timestamp (an upgrade keeps it too, see
releases.installed_job_time), so an unchanged recipe has no difference; flags only `helm upgrade` knows
(`--reuse-values`, `--history-max` …) are left out of the render.
"""

from __future__ import annotations

import os
from collections.abc import Callable

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from collections.abc import Sequence
    from pathlib import Path

    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo.actions import releases
from helm_nemo.actions.helm import HelmBinary
from helm_nemo.actions.installed import ReleaseReadError, get_manifest, get_values, job_timestamp
from helm_nemo.diff.objects import diff_manifests
from helm_nemo.diff.report import Masker, ReleaseDiff, render_json, render_text

EXIT_SAME, EXIT_DIFFERENT, EXIT_TROUBLE = 0, 1, 2
# `helm upgrade` flags `helm template` rejects: (flag, takes a value).
UPGRADE_ONLY_FLAGS = {
    "--cleanup-on-fail": False,
    "--reset-values": False,
    "--reuse-values": False,
    "--reset-then-reuse-values": False,
    "--history-max": True,
    "--install": False,
    "-i": False,
}

Echo = Callable[[str], None]


class DiffError(Exception):
    """A release could not be rendered or validated: one message, exit 2."""


def template_flags(extra: list[str]) -> list[str]:
    out, skip = [], False
    for arg in extra:
        if skip:
            skip = False
            continue
        name, eq, _ = arg.partition("=")
        if name in UPGRADE_ONLY_FLAGS:
            skip = UPGRADE_ONLY_FLAGS[name] and not eq
            continue
        out.append(arg)
    return out


def namespace_of(extra: list[str]) -> str | None:
    namespace = os.environ.get("HELM_NAMESPACE") or None
    for index, arg in enumerate(extra):
        name, eq, value = arg.partition("=")
        if name in ("-n", "--namespace"):
            namespace = value if eq else (extra[index + 1] if index + 1 < len(extra) else namespace)
    return namespace


def environment_secrets(values_files: str | Path | Sequence[str | Path]) -> list[str]:
    """The secrets (helm_nemo.secret_policy, with the active --mask names) the file(s) take from the environment."""
    from helm_nemo.values.recipe import load_all
    from helm_nemo.values.substitute import substitute

    result = substitute(load_all(values_files), os.environ)
    return result.secret_values()


def diff_plans(
    plans: list[ReleasePlan], helm: HelmBinary, extra: list[str], *, validate: bool = True, echo: Echo = print
) -> list[ReleaseDiff]:
    """Read, render and compare every release; ReleaseReadError / DiffError at the first that fails."""
    from helm_nemo.actions.lint import SKIP_HINT, check_rendered, kube_version_from_flags

    kube_version = kube_version_from_flags(extra)
    namespace = namespace_of(extra)
    out = []
    for plan in plans:
        installed = get_manifest(helm, plan.release, extra)
        keep = None
        if installed is not None and releases.needs_job_time(plan):
            keep = job_timestamp(get_values(helm, plan.release, extra))
        releases.stamp_job_time(plan, keep=keep)
        proc = releases.render(plan, helm, template_flags(extra))
        if proc.returncode != 0:
            message = " ".join(line.strip() for line in (proc.stderr or "").strip().splitlines() if line.strip())
            raise DiffError(f"rendering release {plan.release} failed (helm exit {proc.returncode}): {message}")
        if validate and not check_rendered(plan, proc.stdout, kube_version=kube_version, echo=echo, hint=SKIP_HINT):
            raise DiffError(f"release {plan.release}: the manifests it would send do not validate")
        out.append(
            ReleaseDiff(
                plan.release,
                _shown(plan.chart),
                namespace,
                installed is not None,
                diff_manifests(installed or "", proc.stdout),
                rendered=proc.stdout,
            )
        )
    return out


def _shown(chart: str) -> str:
    """A local chart relative to the current directory when it is below it (shorter to read)."""
    if chart.startswith("oci://") or not os.path.isabs(chart):
        return chart
    relative = os.path.relpath(chart)
    return chart if relative.startswith("..") else relative


def run(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    *,
    masker: Masker,
    output: str = "text",
    color: bool = False,
    validate: bool = True,
    out: Echo = print,
    err: Echo = print,
) -> int:
    """Compare and print; the exit code of diff(1)."""
    for plan in plans:
        for warning in plan.warnings:
            err(masker.text(f"warning: {warning}"))
    try:
        results = diff_plans(plans, helm, extra, validate=validate, echo=lambda line: err(masker.text(line)))
    except (ReleaseReadError, DiffError) as problem:
        err(masker.text(f"helm nemo diff: {problem}"))
        return EXIT_TROUBLE
    if output == "json":
        out(render_json(results, masker))
    else:
        text = render_text(results, masker, color=color)
        if text:
            out(text)
    return EXIT_DIFFERENT if any(r.changed for r in results) else EXIT_SAME
