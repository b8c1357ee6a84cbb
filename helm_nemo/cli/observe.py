"""status and logs: what a release is doing on the cluster (read-only). The work is in actions/status.py."""

from __future__ import annotations

import sys

import click

from helm_nemo.cli import PASSTHROUGH, _debug, _out, _say, _traceback, mask_option

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable


def _flag_is_no_release(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    if value and value.startswith("-"):
        ctx.meta["helm_nemo_first_flag"] = value
        return None
    return value


def _run(body: Callable[[], int]) -> None:
    """Run `body()` (returning the exit code) with user errors (exit 2), cluster errors (their exit code, one
    screen) and other errors (exit 1) printed without a traceback unless --debug."""
    from helm_nemo.kube import KubeError
    from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

    try:
        code = body()
    except KubeError as err:
        _say(_traceback(err) if _debug() else err.format())
        code = getattr(err, "exit_code", 2)
    except UserError as err:
        _say(_traceback(err) if _debug() else err.format())
        code = EXIT_USER_ERROR
    except KeyboardInterrupt:
        code = 130
    except Exception as err:
        from helm_nemo.actions.process import OUTPUT_ERRNOS

        if isinstance(err, OSError) and err.errno in OUTPUT_ERRNOS:
            raise
        _say(_traceback(err) if _debug() else f"helm nemo: {err}")
        code = 1
    sys.exit(code)


_VALUES_HELP = "Values or recipe file whose releases to show (several merge as helm merges them)."


@click.command(context_settings=PASSTHROUGH)
@click.argument("release", required=False, callback=_flag_is_no_release)
@click.option(
    "-f", "--values", "values_files", multiple=True, type=click.Path(dir_okay=False, allow_dash=True), help=_VALUES_HELP
)
@click.option(
    "--root", type=click.Path(file_okay=False, exists=True), default=None, help="As for install (--target slurm)."
)
@click.option("--show-secrets", is_flag=True, help="Print secrets from the environment instead of ***.")
@mask_option
@click.option("-n", "--namespace", default=None, help="Namespace (default: HELM_NAMESPACE, else the context's).")
@click.option(
    "--target",
    type=click.Choice(["kubernetes", "slurm"]),
    default="kubernetes",
    show_default=True,
    help="Where the release runs: Kubernetes, or the Slurm jobs of `install --target slurm`.",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-w", "--watch", is_flag=True, help="Refresh until every release completed or failed (Ctrl-C stops).")
@click.option(
    "--interval", type=click.FloatRange(1.0), default=10.0, show_default=True, help="Seconds between refreshes."
)
@click.option(
    "--stall-after",
    type=click.FloatRange(1.0),
    default=10.0,
    show_default=True,
    help="Stalled when no step came for this many step times (at least 5 minutes).",
)
@click.pass_context
def status(
    ctx: click.Context,
    release: str | None,
    values_files: tuple[str, ...],
    root: str | None,
    show_secrets: bool,
    mask_names: tuple[str, ...],
    namespace: str | None,
    target: str,
    output: str,
    watch: bool,
    interval: float,
    stall_after: float,
) -> None:
    """Is the run healthy, how far is it, how fast, when will it end, and if it failed, why.

    For each release of --values FILE (or the RELEASE named): the JobSet/Job and its Kueue Workload, pods by
    phase with the reason of each unhealthy one, training progress from the rank-0 log (the figures of
    `helm nemo metrics`), warning events, and one verdict line. Exit 0 healthy or completed, 1 failed or
    stalled, 3 not found, 2 bad input.
    """
    from helm_nemo import secrets
    from helm_nemo.cli.release_commands import helm_extra, run_release

    extra = helm_extra(ctx.args, ctx.meta.get("helm_nemo_first_flag"), namespace)
    if target == "slurm":
        if not values_files:
            from helm_nemo.cli import _usage_error

            _usage_error("status --target slurm needs --values FILE", "the Slurm jobs are found by the values' names")
        run_release(
            "status",
            values_files=values_files,
            root=root,
            show_secrets=show_secrets,
            mask_names=mask_names,
            chart=None,
            chart_version=None,
            chart_repo=None,
            namespace=namespace,
            release=release,
            extra=extra,
        )
        return

    def body() -> int:
        from helm_nemo.actions import status as action

        with secrets.collecting(show=show_secrets, mask=mask_names):
            names = action.release_targets(list(values_files), release)
            client = action.connect(extra, namespace)
            run = action.run_inputs_for(list(values_files), names)
            return action.status(
                names,
                client,
                run_inputs=run,
                output=output,
                watch=watch,
                interval=interval,
                stall_factor=stall_after,
                out=_out,
            )

    _run(body)


@click.command(context_settings=PASSTHROUGH)
@click.argument("release", required=False, callback=_flag_is_no_release)
@click.option(
    "--values",
    "values_files",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help=_VALUES_HELP + " (-f means --follow here, as in kubectl logs)",
)
@click.option("-n", "--namespace", default=None, help="Namespace (default: HELM_NAMESPACE, else the context's).")
@click.option("--rank", type=click.IntRange(0), default=None, help="The node rank (Job completion index); default 0.")
@click.option("--pod", default=None, help="A pod by name instead of a rank.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing as the log grows.")
@click.option("--tail", type=click.IntRange(0), default=None, help="Only the last N lines.")
@click.option("-p", "--previous", is_flag=True, help="The log of the previous (restarted) container.")
@click.option("--timestamps", is_flag=True, help="Prefix each line with the kubelet's time.")
@click.option("--errors", is_flag=True, help="Scan every pod's recent log for known failure signatures; one summary.")
@click.option(
    "--errors-tail", type=click.IntRange(1), default=500, show_default=True, help="Lines per pod --errors reads."
)
@click.option(
    "--file",
    "log_files",
    multiple=True,
    help="--errors without a cluster: a log file (one per pod or rank; repeat), a folder of them, or - for stdin.",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="--errors: text or one JSON document.",
)
@click.pass_context
def logs(
    ctx: click.Context,
    release: str | None,
    values_files: tuple[str, ...],
    namespace: str | None,
    rank: int | None,
    pod: str | None,
    follow: bool,
    tail: int | None,
    previous: bool,
    timestamps: bool,
    errors: bool,
    errors_tail: int,
    log_files: tuple[str, ...],
    output: str,
) -> None:
    """The training log of a release: rank 0 by default (--rank N, --pod P), streamed with -f; --errors names
    the first cause of a failed run (and what followed from it) from every pod's recent log, or from log
    files with --file (no cluster). Exit 1 when a failure is found, 0 when none. On a terminal the log's
    escape sequences and control characters are removed or shown, never obeyed (docs/security.md); piped,
    the log passes through as the pod wrote it."""
    from helm_nemo.cli.release_commands import helm_extra

    if log_files:
        if release or values_files:
            from helm_nemo.cli import _usage_error

            _usage_error("--file reads log files, not a release", "give either --file LOG or a release")

        def offline() -> int:
            from helm_nemo.actions import status as action

            return action.errors_offline(list(log_files), output=output, out=_out)

        _run(offline)
        return

    if release and release.endswith((".yaml", ".yml", ".json")):
        from helm_nemo.cli import _usage_error

        _usage_error(
            f"{release!r} is a file, not a release",
            "in `helm nemo logs`, -f means --follow: give the values file with --values FILE",
        )
    if rank is not None and pod:
        from helm_nemo.cli import _usage_error

        _usage_error("--rank and --pod both given", "choose one")
    extra = helm_extra(ctx.args, ctx.meta.get("helm_nemo_first_flag"), namespace)

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()

    def body() -> int:
        from helm_nemo.actions import status as action

        names = action.release_targets(list(values_files), release)
        client = action.connect(extra, namespace)
        if errors:
            return action.errors(names, client, tail=errors_tail, output=output, out=_out, err=_say)
        return action.logs(
            names,
            client,
            rank=rank,
            pod=pod,
            follow=follow,
            tail=tail,
            previous=previous,
            timestamps=timestamps,
            out=write,
            err=_say,
        )

    _run(body)
