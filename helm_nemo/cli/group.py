"""The click group of `helm-nemo` / `helm nemo`: commands load on first use (cli.COMMANDS)."""

from __future__ import annotations

import os

import click

from helm_nemo import __version__
from helm_nemo.cli import COMMANDS


class _Main(click.Group):
    """The command group: commands load on first use (COMMANDS); a failed write of the output, anywhere
    in a command, is one line and exit 1."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str):
        module = COMMANDS.get(name)
        if module is None:
            return None
        import importlib

        return getattr(importlib.import_module(f"helm_nemo.cli.{module}"), name)

    def invoke(self, ctx: click.Context):
        from helm_nemo.actions.process import OUTPUT_ERRNOS, OutputError
        from helm_nemo.cli import _output_failed

        try:
            return super().invoke(ctx)
        except OutputError as err:
            _output_failed(err)
        except OSError as err:
            if err.errno in OUTPUT_ERRNOS:
                _output_failed(err)
            raise


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(__version__, "--version", prog_name="helm-nemo")
@click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """Generate, validate, install and publish NeMo training charts.

    \b
    Environment:
      HELM_BIN              the helm to run (helm sets it for plugins)
      HELM_NEMO_CHART_REPO  oci://HOST/PATH: charts by kind resolve to the published charts there
      HELM_NEMO_HOME        a folder with charts/, schemas/, generator/, values/ to use instead of the shipped ones
      HELM_NEMO_CACHE_DIR   where parsed schemas are cached (default $HELM_CACHE_HOME/helm-nemo); empty: no cache
      HELM_DEBUG=true       tracebacks (same as --debug)
      SBATCH_BIN, SCANCEL_BIN, SQUEUE_BIN, SACCT_BIN, SCONTROL_BIN  Slurm commands (--target slurm; default: PATH)
    """
    if debug:
        os.environ["HELM_NEMO_DEBUG"] = "1"
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)
