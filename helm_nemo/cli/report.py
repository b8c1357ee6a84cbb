"""report: one self-contained HTML page of a run (helm_nemo.report does the work)."""

from __future__ import annotations

import click

from helm_nemo.cli import PASSTHROUGH, _say
from helm_nemo.cli.observe import _flag_is_no_release, _run


@click.command(context_settings=PASSTHROUGH)
@click.argument("release", required=False, callback=_flag_is_no_release)
@click.option(
    "-f",
    "--values",
    "values_files",
    multiple=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Values or recipe file: its training release, and the inputs of tokens/s, TFLOPS/GPU and MFU.",
)
@click.option(
    "--file",
    "log_files",
    multiple=True,
    help="Without a cluster: a log file (one per pod or rank; repeat), a folder of them, or - for stdin.",
)
@click.option("-o", "--output", default="report.html", show_default=True, help="The HTML file to write (- for stdout).")
@click.option(
    "--preflight",
    "preflight_files",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True),
    help="A saved `helm nemo preflight -o json` (or `preflight --nccl -o json`) output to show (repeat).",
)
@click.option("-n", "--namespace", default=None, help="Namespace (default: HELM_NAMESPACE, else the context's).")
@click.pass_context
def report(
    ctx: click.Context,
    release: str | None,
    values_files: tuple[str, ...],
    log_files: tuple[str, ...],
    output: str,
    preflight_files: tuple[str, ...],
    namespace: str | None,
) -> None:
    """One HTML file of a run, to open from disk or attach to an issue: the verdict (the first cause and what
    followed, linked to the log lines), the curves (loss, step time with its median, p95 and stalls, tokens/s,
    TFLOPS/GPU, MFU, learning rate) by step and by wall time, the pods' timeline and the recipe.

    For RELEASE (or the release of --values FILE) on the cluster, or for log files with --file (no cluster).
    Exit 0 when written, 2 bad input, 3 release not found.
    """
    from helm_nemo.report import command

    if log_files:
        if release:
            from helm_nemo.cli import _usage_error

            _usage_error("--file reads log files, not a release", "give either --file LOG or a release")
        _run(
            lambda: command.offline(
                list(log_files), output, values=list(values_files), preflight=list(preflight_files), say=_say
            )
        )
        return
    from helm_nemo.cli.release_commands import helm_extra

    extra = helm_extra(ctx.args, ctx.meta.get("helm_nemo_first_flag"), namespace)
    _run(
        lambda: command.on_cluster(
            release,
            list(values_files),
            output,
            extra=extra,
            namespace=namespace,
            preflight=list(preflight_files),
            say=_say,
        )
    )
