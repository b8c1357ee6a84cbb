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
) -> tuple[list[Result], dict[str, Any]]:
    """(results, the client's target description) for rendered [(plan, text)]; `early`: connect_early's
    answer. Raises KubeConfigError (exit 2) when the settings name no usable cluster."""
    from helm_nemo import preflight
    from helm_nemo.kube.config import settings
    from helm_nemo.preflight.model import release_of

    client, facts = early or connect_early(plans, extra)
    try:
        found = [release_of(plan, text, client.namespace) for plan, text in rendered]
        results = preflight.run(found, client, _options(extra, mode, install_missing), facts=facts)
    finally:
        client.close()
    given = settings(extra, os.environ)
    target = {
        "server": client.config.server,
        "context": client.config.context,
        "namespace": client.namespace,
        "kubeconfig": given.get("KUBECONFIG") or None,
        "releases": [p.release for p in plans],
    }
    return results, target


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
) -> int:
    """`helm nemo preflight`: render, check, print. The exit code."""
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
    results, target = check_rendered(plans, rendered, extra, mode="preflight", early=early)
    code = preflight.exit_code(results)
    if output == "json":
        out(report.as_json(results, target=target, code=code))
    else:
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
) -> int:
    """install/upgrade: the checklist on stderr; 0 to go on (all ok or warn), 1 when a check failed."""
    from helm_nemo import preflight
    from helm_nemo.preflight import report

    results, target = check_rendered(
        plans, rendered, extra, mode="upgrade" if upgrade else "install", install_missing=install_missing
    )
    color = not os.environ.get("NO_COLOR") and sys.stderr.isatty()
    echo(report.text(results, header=header(plans, target), color=color))
    code = preflight.exit_code(results)
    if code:
        verb = "upgraded" if upgrade else "installed"
        echo(f"helm nemo: a preflight check failed; nothing was {verb} (--no-preflight skips the checks)")
    return code
