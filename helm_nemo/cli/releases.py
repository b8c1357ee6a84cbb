"""The release commands: template, install, upgrade, uninstall, lint, diff, validate, status (a values or
recipe file -> release plans -> the real helm, or the Slurm target)."""

from __future__ import annotations

import functools
import os
import sys

import click

from helm_nemo.cli import PASSTHROUGH, _debug, _fail, _helm, _out, _say, _traceback


def _values_options(func):
    """-f/--values (several merge like helm's), --root, --show-secrets: every command that reads values."""
    func = click.option("-f", "--values", "values_files", required=True, multiple=True,
                        type=click.Path(dir_okay=False, allow_dash=True),
                        help="Values or recipe file; several merge as helm merges them (later wins); - reads stdin.")(func)
    func = click.option("--root", type=click.Path(file_okay=False, exists=True), default=None,
                        help="Folder that paths in the values (files:, a chart: folder) must stay inside "
                             "(default: the values file's folder).")(func)
    func = click.option("--show-secrets", is_flag=True,
                        help="Print values taken from the environment instead of *** in messages and helm's output "
                             "(--target slurm: write secret values into the script in clear).")(func)
    return func


def _release_options(func):
    func = _values_options(func)
    func = click.option("--chart", default=None, help="Chart folder, oci:// reference or chart kind (default: from the values).")(func)
    func = click.option("--version", "chart_version", default=None, help="Chart version (with an oci:// chart).")(func)
    func = click.option("--chart-repo", default=None, metavar="oci://HOST/PATH",
                        help="Take charts named by kind from this OCI repository (default: $HELM_NEMO_CHART_REPO).")(func)
    func = click.option("-n", "--namespace", default=None, help="Namespace (helm passes it as HELM_NAMESPACE).")(func)
    func = click.argument("release", required=False, callback=_flag_is_no_release)(func)
    return func


def _flag_is_no_release(ctx: click.Context, _param, value: str | None) -> str | None:
    """With unknown options passed through, click hands the first one (`--plain-http`) to RELEASE: give it back."""
    if value and value.startswith("-"):
        ctx.meta["helm_nemo_first_flag"] = value
        return None
    return value


def _plans(values_files, release: str | None, chart: str | None, chart_version: str | None,
           chart_repo: str | None = None, root: str | None = None):
    from helm_nemo.values.plan import build_plans

    plans = build_plans(list(values_files), release=release, chart=chart, version=chart_version,
                        chart_repo=chart_repo, root=root)
    if chart_version:
        for plan in plans:
            plan.chart_version = chart_version
    return plans


def _extra(ctx: click.Context, namespace: str | None) -> list[str]:
    extra = list(ctx.args)
    if "helm_nemo_first_flag" in ctx.meta:
        extra.insert(0, ctx.meta["helm_nemo_first_flag"])
    if namespace:
        extra = ["--namespace", namespace] + extra
    return [a for a in extra if a != "--"]



def _skip_validation_option(func):
    return click.option("--skip-manifest-validation", is_flag=True,
                        help="Do not validate the rendered manifests (Kubernetes and CRD schemas, extra checks).")(func)


def _target_option(func):
    return click.option("--target", type=click.Choice(["kubernetes", "slurm"]), default="kubernetes", show_default=True,
                        help="Where the release runs: Kubernetes (helm) or a Slurm cluster (sbatch; the values' slurm: section).")(func)


def _release_command(body=None, *, names_only: bool = False):
    """A release command's frame: build the plans (`names_only`: just the release names, what uninstall
    needs), run `body(plans, extra, **options)`, exit with its code.

    Everything printed from here on masks the values taken from the environment (--show-secrets prints
    them); SIGINT/SIGTERM are passed on to helm (actions/process.py). Errors become exit codes here only:
    user errors 2 (one screen, nothing sent to helm), signals 130/143, others 1.
    """
    if body is None:
        return functools.partial(_release_command, names_only=names_only)

    @functools.wraps(body)
    @click.pass_context
    def command(ctx, values_files, root, show_secrets, chart, chart_version, chart_repo, namespace, release, **options):
        from helm_nemo import secrets
        from helm_nemo.actions.process import Interrupted, forwarding_signals, received

        with secrets.collecting(show=show_secrets), forwarding_signals():
            try:
                if names_only and options.get("target", "kubernetes") == "kubernetes":
                    from helm_nemo.values.plan import release_names

                    plans = release_names(list(values_files), release=release)
                else:
                    plans = _plans(values_files, release, chart, chart_version, chart_repo, root)
                from helm_nemo.timings import mark

                mark("values: load, substitute, schema")
                code = body(plans, _extra(ctx, namespace), **options)
                if received() is not None and not code:  # a signal no helm call was there to report
                    raise Interrupted(received())
            except Exception as err:  # noqa: BLE001 - the one place errors become exit codes
                _fail(err)
        sys.exit(code)

    return command


def _validated(plans, helm, extra, skip: bool, *, upgrade: bool = False) -> int:
    """install/upgrade: render and validate every release before the first is sent (0: go on)."""
    if skip:
        return 0
    from helm_nemo.actions import releases
    from helm_nemo.actions.lint import preflight

    for plan in plans:  # validate exactly what is installed (an upgrade keeps the installed stamp)
        releases.stamp_job_time(plan, keep=releases.installed_job_time(plan, helm, extra) if upgrade else None)
    return preflight(plans, helm, extra, echo=_say)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@_target_option
@_release_command
def template(plans, extra, skip_manifest_validation, target):
    """Render the release(s) of a values or recipe file with helm template (validated before printing);
    with --target slurm, print the sbatch script instead."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo import secrets
        from helm_nemo.targets import slurm_cli

        return slurm_cli.template(plans, extra, show_secrets=not secrets.masking())  # --show-secrets

    check = prepare = None
    if not skip_manifest_validation:
        from helm_nemo.actions.lint import SKIP_HINT, check_recipe, kube_version_from_flags, warm_validators

        kube = kube_version_from_flags(extra)
        check = lambda rendered: check_recipe(rendered, kube_version=kube, echo=_say, hint=SKIP_HINT)  # noqa: E731
        prepare = lambda: warm_validators(plans, kube)  # noqa: E731
    return releases.template(plans, _helm(), extra, check=check, prepare=prepare, echo=_say)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@_target_option
@_release_command
def install(plans, extra, skip_manifest_validation, target):
    """Install the release(s) of a values or recipe file, in order (all validated before the first install);
    with --target slurm, submit the job(s) with sbatch (other options go to sbatch)."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo.targets import slurm_cli

        return slurm_cli.install(plans, extra)

    helm = _helm()
    return _validated(plans, helm, extra, skip_manifest_validation) or releases.install(plans, helm, extra, echo=_say)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@click.option("--kube-version", default=None, metavar="X.Y",
              help="Kubernetes version to validate for (default 1.32); also passed to helm template.")
@_release_command
def lint(plans, extra, kube_version):
    """Render the release(s) and validate every object offline: Kubernetes and CRD schemas (all errors),
    names, quantities, GPUs and fabric vs the accelerator profile, env, volumes. Exit 2 on problems."""
    from helm_nemo.actions.lint import lint_plans
    from helm_nemo.validate import DEFAULT_KUBE_VERSION, resolve_kube_version

    kube = kube_version or DEFAULT_KUBE_VERSION
    resolve_kube_version(kube)  # a bad version fails before anything is rendered
    if kube_version:
        extra = ["--kube-version", kube_version] + extra
    return lint_plans(plans, _helm(), extra, kube_version=kube, echo=_out, err=_say)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@click.option("-i", "--install", "install_missing", is_flag=True, help="Install releases that do not exist yet.")
@click.option("--diff", "show_diff", is_flag=True,
              help="First print what would change (as `helm nemo diff`); stop with exit 2 if that fails.")
@_skip_validation_option
@_release_command
def upgrade(plans, extra, install_missing, show_diff, skip_manifest_validation):
    """Upgrade the release(s) of a values or recipe file, in order (all validated before the first upgrade; an
    installed release keeps its job timestamp)."""
    from helm_nemo import secrets
    from helm_nemo.actions import releases

    helm = _helm()
    if show_diff:
        code = _print_diff(plans, helm, extra, plans[0].sources or [plans[0].source], output="text", no_color=False,
                           show_secrets=not secrets.masking(), validate=not skip_manifest_validation)
        if code == 2:
            _say("helm nemo: nothing was upgraded")
            return code
    return _validated(plans, helm, extra, skip_manifest_validation, upgrade=True) or \
        releases.install(plans, helm, extra, upgrade=True, install_missing=install_missing, echo=_say)


def _print_diff(plans, helm, extra, values_files, *, output, no_color, show_secrets, validate) -> int:
    from helm_nemo.actions import diff as diffing
    from helm_nemo.diff.report import Masker

    color = not no_color and not os.environ.get("NO_COLOR") and output == "text" and sys.stdout.isatty()
    masker = Masker(diffing.environment_secrets(values_files), enabled=not show_secrets)
    return diffing.run(plans, helm, extra, masker=masker, output=output, color=color, validate=validate,
                       out=lambda text: click.echo(text, color=color), err=_say)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text: one block per object; json: one document for machines.")
@click.option("--no-color", is_flag=True, help="No colours (also when NO_COLOR is set or stdout is no terminal).")
@click.pass_context
def diff(ctx, values_files, root, show_secrets, chart, chart_version, chart_repo, namespace, release,
         skip_manifest_validation, output, no_color):
    """Show what install/upgrade would change: each release's installed manifest (none: not installed) against
    what would be sent now, object by object, field by field. Exit 0 no difference, 1 differences, 2 trouble."""
    from helm_nemo import secrets
    from helm_nemo.user_errors import UserError

    with secrets.collecting(show=show_secrets):
        try:
            plans = _plans(values_files, release, chart, chart_version, chart_repo, root)
            code = _print_diff(plans, _helm(), _extra(ctx, namespace), list(values_files), output=output,
                               no_color=no_color, show_secrets=show_secrets, validate=not skip_manifest_validation)
        except UserError as err:
            if _debug():
                _say(_traceback(err))
            else:
                _say(err.format())
            _say("Nothing was sent to helm.")
            code = 2
        except Exception as err:  # noqa: BLE001 - diff(1): trouble is 2, never 1 (1 means "different")
            _say(_traceback(err) if _debug() else f"helm nemo diff: {err}")
            code = 2
    sys.exit(code)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@_target_option
@_release_command(names_only=True)
def uninstall(plans, extra, target):
    """Uninstall the release(s) of a values or recipe file, in reverse order (only their names are read); with
    --target slurm, scancel the releases' queued and running jobs."""
    from helm_nemo.actions import releases

    if target == "slurm":
        from helm_nemo.targets import slurm_cli

        return slurm_cli.uninstall(plans, extra)
    return releases.uninstall(plans, _helm(), extra, echo=_say)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@click.option("--target", type=click.Choice(["slurm"]), default="slurm", show_default=True,
              help="Only Slurm for now (Kubernetes: helm status / kubectl).")
@_release_command
def status(plans, extra, target):
    """Show the jobs of the release(s): squeue, then sacct (or scontrol) for ended ones. Exit 3 when none."""
    from helm_nemo.targets import slurm_cli

    return slurm_cli.status(plans, extra)


@click.command()
@_values_options
@click.option("--chart", default=None)
@click.argument("release", required=False)
@_target_option
def validate(values_files, root, show_secrets, chart, release, target):
    """Check a values or recipe file (substitution, files, schema) without calling helm; with --target slurm,
    also the slurm: section and everything the Slurm job needs."""
    from helm_nemo import secrets

    with secrets.collecting(show=show_secrets):
        try:
            plans = _plans(values_files, release, chart, None, root=root)
            if target == "slurm":
                from helm_nemo.targets import slurm_cli

                for job in slurm_cli.jobs_of(plans, echo=_say):
                    _out(f"ok: {job.release} -> Slurm job {job.job_name}")
                return
        except Exception as err:  # noqa: BLE001
            _fail(err)
            return
        for plan in plans:
            for warning in plan.warnings:
                _say(f"warning: {warning}")
            _out(f"ok: {plan.release} -> {plan.chart}")

