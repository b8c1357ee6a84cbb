"""`helm nemo preflight`, and the preflight install/upgrade run before the first release: render every
release with `helm template` (the same flags), connect to the cluster helm would use, run the checks of
helm_nemo.preflight, print the checklist. Exit 0 all ok or warn, 1 a check failed, 2 bad input
(values, kubeconfig)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from helm_nemo.actions.helm import HelmBinary
    from helm_nemo.actions.nccl import NcclOptions
    from helm_nemo.kube.client import KubeClient
    from helm_nemo.preflight.facts import Facts
    from helm_nemo.preflight.model import Result
    from helm_nemo.values.release_plan import ReleasePlan

from helm_nemo.actions import releases


def _options(extra: list[str], mode: str, install_missing: bool = False) -> dict[str, Any]:
    names = {a.partition("=")[0] for a in extra}
    return {"mode": mode, "install_missing": install_missing, "create_namespace": "--create-namespace" in names}


def connect_early(plans: list[ReleasePlan], extra: list[str]) -> tuple[KubeClient, Facts]:
    """(client, facts): connected, with the reads every preflight needs already started, so they run
    while helm renders. Raises KubeConfigError (exit 2) when the settings name no usable cluster."""
    from helm_nemo import preflight
    from helm_nemo.kube import connect

    client = connect(extra)
    # A release with an accelerator runs GPU pods: the node and pod lists will be needed.
    return client, preflight.start(client, big_lists=any(plan.accelerator for plan in plans))


def check_rendered(
    plans: list[ReleasePlan],
    rendered: list[tuple[ReleasePlan, str]],
    extra: list[str],
    *,
    mode: str,
    install_missing: bool = False,
    early: tuple[KubeClient, Facts] | None = None,
    nccl: tuple[HelmBinary, NcclOptions, Callable[[str], None]] | None = None,
) -> tuple[list[Result], dict[str, Any]]:
    """(results, the client's target description) for rendered [(plan, text)]; `early`: connect_early's
    answer; `nccl`: (helm, options, echo) to measure the fabric once every other check passed (--nccl).
    Raises KubeConfigError (exit 2) when the settings name no usable cluster."""
    from helm_nemo import preflight
    from helm_nemo.kube.config import settings
    from helm_nemo.preflight.model import release_of

    client, facts = early or connect_early(plans, extra)
    try:
        found = [release_of(plan, text, client.namespace) for plan, text in rendered]
        results = preflight.run(found, client, _options(extra, mode, install_missing), facts=facts)
        if nccl is not None:
            results.append(fabric(plans, found, results, extra, client, *nccl))
    finally:
        client.close()
    given = settings(extra, os.environ)
    target: dict[str, Any] = {
        "server": client.config.server,
        "context": client.config.context,
        "namespace": client.namespace,
        "kubeconfig": given.get("KUBECONFIG") or None,
        "releases": [p.release for p in plans],
    }
    fit: dict[str, Any] = {p.release: p.fit.as_json() for p in plans if p.fit is not None}
    if fit:
        target["fit"] = fit
    return results, target


def fit_lines(plans: list[ReleasePlan]) -> list[str]:
    """Per training release, the per-GPU memory line validate computed (helm_nemo/fit): the same numbers as
    `helm nemo fit`."""
    return [f"fit [{plan.release}]: {plan.fit.memory_line()}" for plan in plans if plan.fit is not None]


def fabric(
    plans: list[ReleasePlan],
    found: list[Any],
    results: list[Result],
    extra: list[str],
    client: KubeClient,
    helm: HelmBinary,
    options: NcclOptions,
    echo: Callable[[str], None],
) -> Result:
    """--nccl: the fabric.busbw Result, measured only when every other check passed (a test release on a
    cluster that cannot run the recipe would measure nothing useful, or not start)."""
    from helm_nemo import preflight
    from helm_nemo.actions import nccl
    from helm_nemo.preflight.model import SKIPPED, Result

    if preflight.exit_code(results):
        return Result(nccl.CHECK_ID, SKIPPED, "the NCCL test was not run: a check above failed")
    release = nccl.gpu_release(found)
    if release is None:
        return Result(nccl.CHECK_ID, SKIPPED, "no release runs GPU pods of an accelerator with an NCCL test")
    plan = next(p for p in plans if p.release == release.name)
    return nccl.measure(release, plan, helm, extra, client, options, echo)


def header(plans: list[ReleasePlan], target: dict[str, Any]) -> str:
    source = plans[0].source if plans else "?"
    context = f" (context {target['context']})" if target.get("context") else ""
    count = f"{len(plans)} release(s)" if len(plans) != 1 else f"release {plans[0].release}"
    return f"helm nemo preflight: {count} of {source} -> {target['server']}{context}, namespace {target['namespace']}"


def run(
    plans: list[ReleasePlan],
    helm: HelmBinary,
    extra: list[str],
    *,
    output: str = "text",
    color: bool = False,
    out: Callable[[str], None] = print,
    err: Callable[[str], None] = print,
    nccl: NcclOptions | None = None,
) -> int:
    """`helm nemo preflight`: render, check, (with `nccl`: measure the fabric,) print. The exit code."""
    from helm_nemo import preflight
    from helm_nemo.preflight import report

    for plan in plans:
        for warning in plan.warnings:
            err(f"warning: {warning}")
        releases.stamp_job_time(plan)
    early = connect_early(plans, extra)  # the cluster is read while helm renders
    rendered, code = releases.render_each(plans, helm, extra, err, failed=" failed; no check was run")
    if code:
        return 2
    results, target = check_rendered(
        plans, rendered, extra, mode="preflight", early=early, nccl=(helm, nccl, err) if nccl else None
    )
    code = preflight.exit_code(results)
    if output == "json":
        out(report.as_json(results, target=target, code=code))
    else:
        for line in fit_lines(plans):
            err(line)
        out(report.text(results, header=header(plans, target), color=color))
    return code


def before_install(
    plans: list[ReleasePlan],
    rendered: list[tuple[ReleasePlan, str]],
    extra: list[str],
    *,
    upgrade: bool,
    install_missing: bool,
    echo: Callable[[str], None],
    nccl: tuple[HelmBinary, NcclOptions] | None = None,
) -> int:
    """install/upgrade: the checklist on stderr; 0 to go on (all ok or warn), 1 when a check failed.
    `nccl`: (helm, options) to measure the fabric first (install --nccl); a fail stops the install."""
    from helm_nemo import preflight
    from helm_nemo.preflight import report

    results, target = check_rendered(
        plans,
        rendered,
        extra,
        mode="upgrade" if upgrade else "install",
        install_missing=install_missing,
        nccl=(*nccl, echo) if nccl else None,
    )
    color = not os.environ.get("NO_COLOR") and sys.stderr.isatty()
    echo(report.text(results, header=header(plans, target), color=color))
    code = preflight.exit_code(results)
    if code:
        verb = "upgraded" if upgrade else "installed"
        echo(f"helm nemo: a preflight check failed; nothing was {verb} (--no-preflight skips the checks)")
    return code
