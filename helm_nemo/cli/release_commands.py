"""What the release commands do once their command line is parsed: no click here, so the direct parser
(cli/direct.py) and the click declarations (cli/releases.py) run the same code.

`run_release` is the frame of every release command: build the plans (for uninstall just the names),
run the command's body, exit with its code. Everything printed from there on masks the values taken
from the environment (--show-secrets prints them); SIGINT/SIGTERM are passed on to helm
(actions/process.py). Errors become exit codes there only: user errors 2 (one screen, nothing sent to
helm), signals 130/143, others 1.
"""

from __future__ import annotations

import os
import sys

from helm_nemo.cli import _fail, _helm, _out, _say


def plans_of(
    values_files,
    release: str | None,
    chart: str | None,
    chart_version: str | None,
    chart_repo: str | None = None,
    root: str | None = None,
    extra: list[str] | None = None,
):
    from helm_nemo.values.chart_source import registry_flags
    from helm_nemo.values.plan import build_plans

    plans = build_plans(
        list(values_files),
        release=release,
        chart=chart,
        version=chart_version,
        chart_repo=chart_repo,
        root=root,
        pull_flags=registry_flags(extra or []),
    )
    if chart_version:
        for plan in plans:
            plan.chart_version = chart_version
    return plans


def helm_extra(args: list[str], first_flag: str | None, namespace: str | None) -> list[str]:
    """What goes on to helm: the options we do not know (click hands the first one to RELEASE: `first_flag`)
    and -n."""
    extra = list(args)
    if first_flag is not None:
        extra.insert(0, first_flag)
    if namespace:
        extra = ["--namespace", namespace] + extra
    return [a for a in extra if a != "--"]


def run_release(
    name: str,
    *,
    values_files,
    root,
    show_secrets,
    chart,
    chart_version,
    chart_repo,
    namespace,
    release,
    extra: list[str],
    mask_names=(),
    **options,
) -> None:
    """Run release command `name` (a key of BODIES) and exit with its code."""
    from helm_nemo import secrets
    from helm_nemo.actions.process import Interrupted, SignalStop, forwarding_signals, received, stopping_at_once

    body, names_only = BODIES[name]
    if options.pop("no_fit_error", False):
        from helm_nemo.fit.check import memory_errors_as_warnings

        memory_errors_as_warnings()
    try:
        with secrets.collecting(show=show_secrets, mask=mask_names), forwarding_signals():
            try:
                with stopping_at_once():
                    if options.get("nccl_log") or not values_files:
                        plans = []  # preflight --nccl-log reads a log, not values; without it -f is needed
                    elif names_only and options.get("target", "kubernetes") == "kubernetes":
                        from helm_nemo.values.recipe import release_names

                        plans = release_names(list(values_files), release=release)
                    else:
                        plans = plans_of(values_files, release, chart, chart_version, chart_repo, root, extra)
                from helm_nemo.timings import mark

                mark("values: load, substitute, schema")
                code = body(plans, extra, **options)
                if (signum := received()) is not None and not code:  # a signal no helm call was there to report
                    raise Interrupted(signum)
            except Exception as err:
                _fail(err)
    except SignalStop as stop:  # before any helm started: nothing is running, nothing was sent
        _fail(Interrupted(stop.signum))
    sys.exit(code)


def validated(
    plans,
    helm,
    extra,
    skip: bool,
    *,
    upgrade: bool = False,
    preflight: bool = True,
    install_missing: bool = False,
    nccl=None,
) -> int:
    """install/upgrade: render every release, validate it (unless `skip`) and run the cluster preflight
    (unless not `preflight`; with `nccl`, NcclOptions, the fabric test too) before the first is sent (0: go on)."""
    preflight = preflight and not _client_dry_run(extra)
    if skip and not preflight:
        return 0
    from helm_nemo.actions import releases
    from helm_nemo.actions.lint import preflight as render_and_check

    for plan in plans:  # validate exactly what is installed (an upgrade keeps the installed stamp)
        releases.stamp_job_time(plan, keep=releases.installed_job_time(plan, helm, extra) if upgrade else None)
    cluster = None
    if preflight:

        def cluster(rendered):
            from helm_nemo.actions.preflight import before_install

            return before_install(
                plans,
                rendered,
                extra,
                upgrade=upgrade,
                install_missing=install_missing,
                echo=_say,
                nccl=(helm, nccl) if nccl else None,
            )

    return render_and_check(plans, helm, extra, echo=_say, validate=not skip, cluster=cluster)


def _client_dry_run(extra: list[str]) -> bool:
    """`--dry-run` (client): helm talks to no cluster and installs nothing, so neither do the checks
    (`--dry-run=server` reads the cluster: the checks run)."""
    return any(
        a == "--dry-run" or a.partition("=")[0] == "--dry-run" and a.partition("=")[2] in ("client", "true")
        for a in extra
    )


def nccl_options(nccl: bool, nccl_nodes, nccl_timeout, keep: bool = False, *, no_preflight: bool = False):
    """--nccl, --nccl-nodes N, --nccl-timeout DURATION, --keep -> NcclOptions, or None without --nccl."""
    from helm_nemo.cli import _usage_error

    if not nccl:
        given = [f for f, v in (("--nccl-nodes", nccl_nodes), ("--nccl-timeout", nccl_timeout), ("--keep", keep)) if v]
        if given:
            _usage_error(f"{', '.join(given)} without --nccl", "add --nccl to run the NCCL test")
        return None
    if no_preflight:
        _usage_error("--nccl and --no-preflight exclude each other", "the NCCL test runs after the preflight checks")
    from helm_nemo.actions.nccl import NcclOptions
    from helm_nemo.dataprep.wait import parse_duration

    options = NcclOptions(keep=keep)
    if nccl_nodes is not None:
        options.nodes = int(nccl_nodes)
    if nccl_timeout is not None:
        try:
            options.timeout = parse_duration(nccl_timeout)
        except ValueError as err:
            _usage_error(str(err), "--nccl-timeout 20m (or seconds)")
    return options


def _preflight_flags(no_preflight: bool, preflight_only: bool) -> None:
    if no_preflight and preflight_only:
        from helm_nemo.cli import _usage_error

        _usage_error(
            "--no-preflight and --preflight-only exclude each other",
            "--preflight-only runs the checks and installs nothing; --no-preflight installs without them",
        )


def _only(code: int, preflight_only: bool, verb: str) -> int | None:
    """The exit code when the command stops after the checks (a failure, or --preflight-only), else None."""
    if code:
        return code
    if preflight_only:
        _say(f"helm nemo: --preflight-only: nothing was {verb}")
        return 0
    return None


def template(plans, extra, skip_manifest_validation=False, target="kubernetes"):
    """Render the release(s) of a values or recipe file with helm template (validated before printing);
    with --target slurm, print the sbatch script instead."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo import secrets
        from helm_nemo.targets import slurm_cli

        return slurm_cli.template(plans, extra, show_secrets=not secrets.masking())  # --show-secrets

    if skip_manifest_validation:
        return releases.template(plans, _helm(), extra, echo=_say)

    def check(rendered):
        from helm_nemo.actions.lint import SKIP_HINT, check_recipe, kube_version_from_flags

        return check_recipe(rendered, kube_version=kube_version_from_flags(extra), echo=_say, hint=SKIP_HINT)

    def prepare():  # while helm renders: the validators the check will need
        from helm_nemo.actions.lint import kube_version_from_flags, warm_validators

        warm_validators(plans, kube_version_from_flags(extra))

    return releases.template(plans, _helm(), extra, check=check, prepare=prepare, echo=_say)


def recipe_waits(plans, extra, recipe_wait_timeout, recipe_poll_interval):
    """The waits of a recipe whose releases name earlier ones (`after:`/`dataFrom:`), else None; a bad
    --recipe-wait-timeout / --recipe-poll-interval is a usage error (exit 2) before anything is sent."""
    if recipe_wait_timeout is None and recipe_poll_interval is None and not any(plan.after for plan in plans):
        return None
    from helm_nemo.cli import _usage_error
    from helm_nemo.dataprep.wait import DEFAULT_INTERVAL, RecipeWaits, WaitOptions, parse_duration

    options = WaitOptions()
    try:
        if recipe_wait_timeout is not None:
            options.timeout = parse_duration(recipe_wait_timeout)
        if recipe_poll_interval is not None:
            options.interval = parse_duration(recipe_poll_interval)
    except ValueError as err:
        _usage_error(str(err), "--recipe-wait-timeout 2h, --recipe-poll-interval 30s (or seconds)")
    options.interval = options.interval or DEFAULT_INTERVAL
    return RecipeWaits(plans, extra, _say, options) if any(plan.after for plan in plans) else None


def install(
    plans,
    extra,
    skip_manifest_validation=False,
    target="kubernetes",
    no_preflight=False,
    preflight_only=False,
    recipe_wait_timeout=None,
    recipe_poll_interval=None,
    nccl=False,
    nccl_nodes=None,
    nccl_timeout=None,
):
    """Install the release(s) of a values or recipe file, in order (all validated before the first install;
    a release with `after:`/`dataFrom:` once the Jobs of the releases it names completed); with --target slurm,
    submit the job(s) with sbatch (other options go to sbatch). --nccl: measure the fabric first (preflight
    --nccl); a failed measurement installs nothing."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo.targets import slurm_cli

        return slurm_cli.install(plans, extra)

    _preflight_flags(no_preflight, preflight_only)
    fabric = nccl_options(nccl, nccl_nodes, nccl_timeout, no_preflight=no_preflight)
    waits = recipe_waits(plans, extra, recipe_wait_timeout, recipe_poll_interval)
    helm = _helm()
    code = validated(plans, helm, extra, skip_manifest_validation, preflight=not no_preflight, nccl=fabric)
    stop = _only(code, preflight_only, "installed")
    if stop is not None:
        return stop
    try:
        return releases.install(plans, helm, extra, echo=_say, waits=waits)
    finally:
        if waits is not None:
            waits.close()


def lint(plans, extra, kube_version=None):
    """Render the release(s) and validate every object offline: Kubernetes and CRD schemas (all errors),
    names, quantities, GPUs and fabric vs the accelerator profile, env, volumes. Exit 2 on problems."""
    from helm_nemo.actions.lint import lint_plans
    from helm_nemo.validate import DEFAULT_KUBE_VERSION, resolve_kube_version

    kube = kube_version or DEFAULT_KUBE_VERSION
    resolve_kube_version(kube)  # a bad version fails before anything is rendered
    if kube_version:
        extra = ["--kube-version", kube_version] + extra
    return lint_plans(plans, _helm(), extra, kube_version=kube, echo=_out, err=_say)


def upgrade(
    plans,
    extra,
    install_missing=False,
    show_diff=False,
    skip_manifest_validation=False,
    recreate=False,
    new_run=False,
    no_preflight=False,
    preflight_only=False,
    recipe_wait_timeout=None,
    recipe_poll_interval=None,
):
    """Upgrade the release(s) of a values or recipe file, in order (all validated, checked against the cluster and
    classified before the first upgrade; an installed release keeps its job timestamp; one the cluster cannot
    change in place is recreated with --recreate / --new-run, or nothing is done)."""
    from helm_nemo import secrets
    from helm_nemo.actions import releases, upgrade as upgrading

    if recreate and new_run:
        from helm_nemo.cli import _usage_error

        _usage_error(
            "--recreate and --new-run exclude each other",
            "--recreate resumes the installed run; --new-run starts a new one",
        )
    _preflight_flags(no_preflight, preflight_only)
    waits = recipe_waits(plans, extra, recipe_wait_timeout, recipe_poll_interval)
    helm = _helm()
    if show_diff:
        code = print_diff(
            plans,
            helm,
            extra,
            plans[0].sources or [plans[0].source],
            output="text",
            no_color=False,
            show_secrets=not secrets.masking(),
            validate=not skip_manifest_validation,
        )
        if code == 2:
            _say("helm nemo: nothing was upgraded")
            return code
    for plan in plans:
        for warning in plan.warnings:
            _say(f"warning: {warning}")
        plan.warnings = []
    pinned = upgrading.pinned_runs(plans)
    code = validated(
        plans,
        helm,
        extra,
        skip_manifest_validation,
        upgrade=True,
        preflight=not no_preflight,
        install_missing=install_missing,
    )
    stop = _only(code, preflight_only, "upgraded")
    if stop is not None:
        return stop
    hint = f"helm nemo upgrade {plans[0].values_flags()}{releases.namespace_flag(extra)}"
    mode = upgrading.RECREATE if recreate else upgrading.NEW_RUN if new_run else None
    try:
        return upgrading.upgrade(
            plans,
            helm,
            extra,
            mode=mode,
            install_missing=install_missing,
            validate=False,
            hint_command=hint,
            pinned=pinned,
            echo=_say,
            waits=waits,
        )
    finally:
        if waits is not None:
            waits.close()


def print_diff(plans, helm, extra, values_files, *, output, no_color, show_secrets, validate) -> int:
    import click

    from helm_nemo.actions import diff as diffing
    from helm_nemo.diff.report import Masker

    color = not no_color and not os.environ.get("NO_COLOR") and output == "text" and sys.stdout.isatty()
    masker = Masker(diffing.environment_secrets(values_files), enabled=not show_secrets)
    return diffing.run(
        plans,
        helm,
        extra,
        masker=masker,
        output=output,
        color=color,
        validate=validate,
        out=lambda text: click.echo(text, color=color),
        err=_say,
    )


def uninstall(plans, extra, target="kubernetes"):
    """Uninstall the release(s) of a values or recipe file, in reverse order (only their names are read); with
    --target slurm, scancel the releases' queued and running jobs."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo.targets import slurm_cli

        return slurm_cli.uninstall(plans, extra)
    return releases.uninstall(plans, _helm(), extra, echo=_say)


def status(plans, extra, target="slurm"):
    """Show the jobs of the release(s): squeue, then sacct (or scontrol) for ended ones. Exit 3 when none."""
    from helm_nemo.targets import slurm_cli

    return slurm_cli.status(plans, extra)


def preflight(
    plans,
    extra,
    output="text",
    no_color=False,
    nccl_log=None,
    accelerator=None,
    nodes=None,
    nccl=False,
    nccl_nodes=None,
    nccl_timeout=None,
    keep=False,
):
    """Check the cluster helm would use can run the release(s), read-only: API and version, served kinds,
    namespace and release name, Kueue queue and quota, nodes and free GPUs, the profile's networks,
    DeviceClasses and CSI drivers, referenced objects, RBAC. With --nccl: then measure the fabric with a
    temporary nccl-test release placed like the recipe's pods (removed after). With --nccl-log FILE
    --accelerator ID: judge an nccl-tests output instead (fabric.busbw: busbw against the profile's floor,
    transport, wrong results). Exit 0 ok/warn, 1 a check failed, 2 bad input."""
    color = not no_color and not os.environ.get("NO_COLOR") and output == "text" and sys.stdout.isatty()
    fabric = nccl_options(nccl, nccl_nodes, nccl_timeout, keep)
    if fabric is not None and (nccl_log or accelerator or nodes):
        from helm_nemo.cli import _usage_error

        _usage_error(
            "--nccl runs the test in the cluster; --nccl-log judges a log you ran: one or the other",
            "helm nemo preflight -f recipe.yaml --nccl, or --nccl-log FILE --accelerator ID",
        )
    if nccl_log or accelerator or nodes:
        from helm_nemo.fabric.offline import judge_log

        return judge_log(nccl_log, accelerator, nodes, output=output, color=color, out=_out)
    if not plans:
        from helm_nemo.user_errors import Problem, UserError

        raise UserError(
            Problem(
                None,
                None,
                None,
                "$",
                "no values file",
                "-f VALUES (or --nccl-log FILE)",
                "helm nemo preflight -f values.yaml, or --nccl-log FILE --accelerator ID",
            )
        )
    from helm_nemo.actions import preflight as checking

    return checking.run(plans, _helm(), extra, output=output, color=color, out=_out, err=_say, nccl=fabric)


# Release command -> (its body, whether it needs only the release names).
BODIES = {
    "preflight": (preflight, False),
    "template": (template, False),
    "install": (install, False),
    "lint": (lint, False),
    "upgrade": (upgrade, False),
    "uninstall": (uninstall, True),
    "status": (status, False),
}
