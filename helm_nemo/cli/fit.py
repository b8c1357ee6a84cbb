"""fit: will this training release fit its GPUs? Megatron's layout rules and the per-GPU memory estimate."""

from __future__ import annotations

import sys

import click

from helm_nemo.cli import _exit_user_error, _fail


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-f",
    "--values",
    "values_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="Values or recipe file (the releases with workload.gpus are checked).",
)
@click.option("--release", default=None, help="Only this release of a recipe file.")
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--no-fit-error",
    is_flag=True,
    help="A memory estimate over the GPU is a warning, not exit 2 (as `fit: {memoryCheck: warn}` in the values).",
)
def fit(values_file: str, release: str | None, output: str, no_fit_error: bool) -> None:
    """Per GPU memory of the worst pipeline stage (weights, gradients, optimizer, activations, fixed costs)
    against the accelerator's GPU, and the parallel layout against Megatron's start-up rules (docs/fit.md).

    Exit 2 when a layout rule is broken or even the low end of the estimate is over the GPU's memory."""
    import json

    from helm_nemo.fit.check import memory_errors_as_warnings, reports_for_file, text
    from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

    if no_fit_error:
        memory_errors_as_warnings()
    try:
        reports = reports_for_file(values_file, release)
    except UserError as err:
        _exit_user_error(err)
    except Exception as err:
        _fail(err)
        return
    failed = any(report.failed for report in reports)
    if output == "json":
        click.echo(json.dumps([r.as_json() for r in reports], indent=2))
    else:
        click.echo("\n".join(text(r) for r in reports))
    sys.exit(EXIT_USER_ERROR if failed else 0)
