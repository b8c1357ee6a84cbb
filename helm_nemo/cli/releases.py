"""The release commands as click declares them: template, install, upgrade, uninstall, lint, diff, validate
(a values or recipe file -> release plans -> the real helm, or the Slurm target; status is in cli/observe.py). What they do is in
cli/release_commands.py, which cli/direct.py also calls without click."""

from __future__ import annotations

import sys

import click

from helm_nemo.cli import PASSTHROUGH, _debug, _fail, _helm, _out, _say, _traceback, mask_option
from helm_nemo.cli import release_commands as run


def _values_options(func, values_required: bool = True):
    """-f/--values (several merge like helm's), --root, --show-secrets, --mask: every command that reads values."""
    func = click.option(
        "-f",
        "--values",
        "values_files",
        required=values_required,
        multiple=True,
        type=click.Path(dir_okay=False, allow_dash=True),
        help="Values or recipe file; several merge as helm merges them (later wins); - reads stdin.",
    )(func)
    func = click.option(
        "--root",
        type=click.Path(file_okay=False, exists=True),
        default=None,
        help="Folder that paths in the values (files:, a chart: folder) must stay inside "
        "(default: the values file's folder).",
    )(func)
    func = click.option(
        "--show-secrets",
        is_flag=True,
        help="Print secrets taken from the environment instead of *** in messages and helm's output "
        "(--target slurm: write secret values into the script in clear).",
    )(func)
    return mask_option(func)


def _release_options(func, values_required: bool = True):
    func = _values_options(func, values_required)
    func = click.option(
        "--chart", default=None, help="Chart folder, oci:// reference or chart kind (default: from the values)."
    )(func)
    func = click.option("--version", "chart_version", default=None, help="Chart version (with an oci:// chart).")(func)
    func = click.option(
        "--chart-repo",
        default=None,
        metavar="oci://HOST/PATH",
        help="Take charts named by kind from this OCI repository (default: $HELM_NEMO_CHART_REPO).",
    )(func)
    func = click.option("-n", "--namespace", default=None, help="Namespace (helm passes it as HELM_NAMESPACE).")(func)
    func = click.argument("release", required=False, callback=_flag_is_no_release)(func)
    return func


def _flag_is_no_release(ctx: click.Context, _param, value: str | None) -> str | None:
    """With unknown options passed through, click hands the first one (`--plain-http`) to RELEASE: give it back."""
    if value and value.startswith("-"):
        ctx.meta["helm_nemo_first_flag"] = value
        return None
    return value


def _skip_validation_option(func):
    return click.option(
        "--skip-manifest-validation",
        is_flag=True,
        help="Do not validate the rendered manifests (Kubernetes and CRD schemas, extra checks).",
    )(func)


def _fit_option(func):
    return click.option(
        "--no-fit-error",
        is_flag=True,
        help="A memory estimate over the GPU is a warning, not an error (helm nemo fit; as HELM_NEMO_FIT_MEMORY=warn).",
    )(func)


def _preflight_options(func):
    func = click.option(
        "--no-preflight", is_flag=True, help="Do not check the cluster first (helm nemo preflight's checks)."
    )(func)
    func = click.option(
        "--preflight-only",
        is_flag=True,
        help="Run the cluster checks (after validation) and stop: nothing is installed.",
    )(func)
    return func


def _wait_options(func):
    """A recipe's waits between stages (`after:` / `dataFrom:`): named apart from helm's --wait/--timeout."""
    func = click.option(
        "--recipe-wait-timeout",
        default=None,
        metavar="DURATION",
        help="Stop when the Jobs a recipe release waits for (after:/dataFrom:) are not complete within this "
        "time, all waits together (90s, 30m, 2h; default: no limit). The Jobs keep running.",
    )(func)
    func = click.option(
        "--recipe-poll-interval",
        default=None,
        metavar="DURATION",
        help="How often a recipe's wait reads the Jobs and their pods' logs (default 10s).",
    )(func)
    return func


def _nccl_options(func, keep: bool = False):
    """The fabric test in the cluster (preflight --nccl, install --nccl)."""
    func = click.option(
        "--nccl",
        is_flag=True,
        help="After the other checks pass, measure the fabric: install a temporary nccl-test release placed like "
        "the recipe's pods, judge rank 0's bus bandwidth (check fabric.busbw), remove it.",
    )(func)
    func = click.option(
        "--nccl-nodes",
        type=click.IntRange(1, 1 << 20),
        default=None,
        metavar="N",
        help="With --nccl: nodes the test runs on (default 2).",
    )(func)
    func = click.option(
        "--nccl-timeout",
        default=None,
        metavar="DURATION",
        help="With --nccl: how long the test may take, image pull included (default 20m).",
    )(func)
    if keep:
        func = click.option(
            "--keep", is_flag=True, help="With --nccl: leave the test release installed (to read its pods)."
        )(func)
    return func


def _target_option(func):
    return click.option(
        "--target",
        type=click.Choice(["kubernetes", "slurm"]),
        default="kubernetes",
        show_default=True,
        help="Where the release runs: Kubernetes (helm) or a Slurm cluster (sbatch; the values' slurm: section).",
    )(func)


def _release_command(body):
    """The click side of a release command: its parsed options go to release_commands.run_release (what the
    direct parser calls too); the help text is the body's docstring."""
    import functools

    @functools.wraps(body)
    @click.pass_context
    def command(
        ctx,
        /,
        values_files,
        root,
        show_secrets,
        mask_names,
        chart,
        chart_version,
        chart_repo,
        namespace,
        release,
        **options,
    ):
        from helm_nemo.cli.release_commands import helm_extra, run_release

        extra = helm_extra(ctx.args, ctx.meta.get("helm_nemo_first_flag"), namespace)
        run_release(
            body.__name__,
            values_files=values_files,
            root=root,
            show_secrets=show_secrets,
            mask_names=mask_names,
            chart=chart,
            chart_version=chart_version,
            chart_repo=chart_repo,
            namespace=namespace,
            release=release,
            extra=extra,
            **options,
        )

    return command


template = click.command(context_settings=PASSTHROUGH)(
    _release_options(_fit_option(_skip_validation_option(_target_option(_release_command(run.template)))))
)
install = click.command(context_settings=PASSTHROUGH)(
    _release_options(
        _fit_option(
            _skip_validation_option(
                _target_option(_preflight_options(_nccl_options(_wait_options(_release_command(run.install)))))
            )
        )
    )
)
lint = click.command(context_settings=PASSTHROUGH)(
    _release_options(
        _fit_option(
            click.option(
                "--kube-version",
                default=None,
                metavar="X.Y",
                help="Kubernetes version to validate for (default 1.32); also passed to helm template.",
            )(_release_command(run.lint))
        )
    )
)
upgrade = click.command(context_settings=PASSTHROUGH)(
    _release_options(
        click.option(
            "-i", "--install", "install_missing", is_flag=True, help="Install releases that do not exist yet."
        )(
            click.option(
                "--diff",
                "show_diff",
                is_flag=True,
                help="First print what would change (as `helm nemo diff`); stop with exit 2 if that fails.",
            )(
                click.option(
                    "--recreate",
                    is_flag=True,
                    help="A release the cluster cannot change in place (a running Job/JobSet's pods): uninstall "
                    "and install it again as the same run (it resumes from its last checkpoint).",
                )(
                    click.option(
                        "--new-run",
                        is_flag=True,
                        help="As --recreate, but as a new run (new jobTimestamp: new log and checkpoint directories).",
                    )(
                        _fit_option(
                            _skip_validation_option(_preflight_options(_wait_options(_release_command(run.upgrade))))
                        )
                    )
                )
            )
        )
    )
)
uninstall = click.command(context_settings=PASSTHROUGH)(
    _release_options(_target_option(_release_command(run.uninstall)))
)


def _nccl_log_options(func):
    """The offline fabric judge: an nccl-tests log the user ran themselves, instead of values (-f)."""
    func = click.option(
        "--nccl-log",
        type=click.Path(dir_okay=False, exists=True),
        default=None,
        metavar="FILE",
        help="Judge this nccl-tests output (rank 0's log) against the accelerator's bus-bandwidth floor and "
        "expected transport (check fabric.busbw), instead of checking a cluster; needs --accelerator.",
    )(func)
    func = click.option(
        "--accelerator", default=None, metavar="ID", help="With --nccl-log: the accelerator profile (a3ultra, p5, ...)."
    )(func)
    func = click.option(
        "--nodes",
        type=click.IntRange(1, 1 << 20),
        default=None,
        help="With --nccl-log: nodes of the run (default: the hosts the log lists).",
    )(func)
    return func


preflight = click.command(context_settings=PASSTHROUGH)(
    _release_options(
        _nccl_options(
            _nccl_log_options(
                click.option(
                    "-o",
                    "--output",
                    type=click.Choice(["text", "json"]),
                    default="text",
                    show_default=True,
                    help="text: a checklist; json: one document for scripts.",
                )(
                    click.option(
                        "--no-color",
                        is_flag=True,
                        help="No colours (also when NO_COLOR is set or stdout is no terminal).",
                    )(_release_command(run.preflight))
                )
            ),
            keep=True,
        ),
        values_required=False,
    )
)


@click.command(context_settings=PASSTHROUGH)
@_release_options
@_skip_validation_option
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: one block per object; json: one document for machines.",
)
@click.option("--no-color", is_flag=True, help="No colours (also when NO_COLOR is set or stdout is no terminal).")
@click.pass_context
def diff(
    ctx,
    values_files,
    root,
    show_secrets,
    mask_names,
    chart,
    chart_version,
    chart_repo,
    namespace,
    release,
    skip_manifest_validation,
    output,
    no_color,
):
    """Show what install/upgrade would change: each release's installed manifest (none: not installed) against
    what would be sent now, object by object, field by field. Exit 0 no difference, 1 differences, 2 trouble."""
    from helm_nemo import secrets
    from helm_nemo.user_errors import UserError

    with secrets.collecting(show=show_secrets, mask=mask_names):
        try:
            extra = run.helm_extra(ctx.args, ctx.meta.get("helm_nemo_first_flag"), namespace)
            plans = run.plans_of(values_files, release, chart, chart_version, chart_repo, root, extra=extra)
            code = run.print_diff(
                plans,
                _helm(),
                extra,
                list(values_files),
                output=output,
                no_color=no_color,
                show_secrets=show_secrets,
                validate=not skip_manifest_validation,
            )
        except UserError as err:
            if _debug():
                _say(_traceback(err))
            else:
                _say(err.format())
            _say("Nothing was sent to helm.")
            code = 2
        except Exception as err:
            _say(_traceback(err) if _debug() else f"helm nemo diff: {err}")
            code = 2
    sys.exit(code)


@click.command()
@_values_options
@click.option("--chart", default=None, help="Chart folder, oci:// reference or chart kind (default: from the values).")
@click.option("--version", "chart_version", default=None, help="Chart version (with an oci:// chart).")
@click.option(
    "--chart-repo",
    default=None,
    metavar="oci://HOST/PATH",
    help="Take charts named by kind from this OCI repository (default: $HELM_NEMO_CHART_REPO).",
)
@click.option("--plain-http", is_flag=True, help="Pull an oci:// chart over http (helm pull --plain-http).")
@click.option("--ca-file", default=None, help="CA bundle of the registry (helm pull --ca-file).")
@click.argument("release", required=False)
@_target_option
@_fit_option
def validate(
    values_files,
    root,
    show_secrets,
    mask_names,
    chart,
    chart_version,
    chart_repo,
    plain_http,
    ca_file,
    release,
    target,
    no_fit_error,
):
    """Check a values or recipe file (substitution, files, schema, the charts' cross-field rules) without
    installing or rendering anything; with --target slurm, also the slurm: section and everything the Slurm
    job needs. An oci:// chart that is not a released shipped chart is pulled with `helm pull` (the chart only:
    no value is sent) and the values are checked against its own schema; if it cannot be pulled, that is an
    error, never an unchecked ok."""
    from helm_nemo import secrets

    registry = (["--plain-http"] if plain_http else []) + (["--ca-file", ca_file] if ca_file else [])
    if no_fit_error:
        from helm_nemo.fit.check import memory_errors_as_warnings

        memory_errors_as_warnings()
    with secrets.collecting(show=show_secrets, mask=mask_names):
        try:
            plans = run.plans_of(values_files, release, chart, chart_version, chart_repo, root=root, extra=registry)
            if target == "slurm":
                from helm_nemo.targets import slurm_cli

                for job in slurm_cli.jobs_of(plans, echo=_say):
                    _out(f"ok: {job.release} -> Slurm job {job.job_name}")
                return
        except Exception as err:
            _fail(err)
            return
        for plan in plans:
            for warning in plan.warnings:
                _say(f"warning: {warning}")
            _out(f"ok: {plan.release} -> {plan.chart}")
