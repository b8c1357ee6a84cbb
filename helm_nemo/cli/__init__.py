"""`helm-nemo` / `helm nemo`: a thin click layer over the library.

Heavy imports (jinja2, jsonschema, ruamel) happen inside the commands that need them, so start-up
stays fast. User errors print one screen and exit 2; tracebacks only with --debug / HELM_DEBUG=true.
"""

from __future__ import annotations

import os
import sys

import click

from helm_nemo import __version__

PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]}


def _debug() -> bool:
    return os.environ.get("HELM_DEBUG", "").lower() == "true" or os.environ.get("HELM_NEMO_DEBUG") == "1"


def _say(text: str, err: bool = True) -> None:
    """Print one message (stderr by default) with the values from the environment masked (helm_nemo.secrets)."""
    from helm_nemo.secrets import mask

    click.echo(mask(text), err=err)


def _out(text: str) -> None:
    _say(text, err=False)


def _fail(err: Exception) -> None:
    """An error becomes its exit code: user errors 2, a signal 128 + its number, a failed write of our output
    1 (one line each), anything else 1. With --debug the traceback is printed, masked like everything else."""
    from helm_nemo.actions.process import OUTPUT_ERRNOS, Interrupted, OutputError
    from helm_nemo.user_errors import EXIT_USER_ERROR, UserError

    if isinstance(err, OSError) and err.errno in OUTPUT_ERRNOS:
        err = OutputError(err)
    if isinstance(err, OutputError):
        _output_failed(err)
    if _debug():
        _say(_traceback(err))
    if isinstance(err, Interrupted):
        stopped = f" (helm stopped, exit {err.returncode})" if err.returncode is not None else ""
        _say(f"helm nemo: {err.name} received; stopped{stopped}. Nothing further was started.")
        sys.exit(err.exit_code)
    if isinstance(err, UserError):
        if not _debug():
            _say(err.format())
        _say("Nothing was sent to helm.")
        sys.exit(EXIT_USER_ERROR)
    if not _debug():
        _say(f"helm nemo: {err}")
    sys.exit(1)


def _traceback(err: BaseException) -> str:
    """--debug: the traceback, printed through `_say` (masked like every message)."""
    import traceback

    return "".join(traceback.format_exception(err)).rstrip()


def _output_failed(err: Exception) -> None:
    """Our output cannot be written (`| head -1`, `> /dev/full`): one line on stderr, exit 1, and no second
    complaint when Python flushes stdout at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor
        pass
    error = getattr(err, "error", err)
    try:
        click.echo(f"helm nemo: cannot write the output: {getattr(error, 'strerror', None) or error}", err=True)
    except OSError:
        pass
    sys.exit(1)


# Command -> the module under helm_nemo/cli/ that defines it: a run imports only its command's module.
COMMANDS = {
    "generate": "charts", "publish": "charts",
    "template": "releases", "install": "releases", "upgrade": "releases", "uninstall": "releases",
    "lint": "releases", "diff": "releases", "validate": "releases", "status": "releases",
    "version": "tools", "summary": "tools", "metrics": "tools",
}


def _helm():
    from helm_nemo.actions.helm import helm_binary

    return helm_binary()


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
      HELM_DEBUG=true       tracebacks (same as --debug)
      SBATCH_BIN, SCANCEL_BIN, SQUEUE_BIN, SACCT_BIN, SCONTROL_BIN  Slurm commands (--target slurm; default: PATH)
    """
    if debug:
        os.environ["HELM_NEMO_DEBUG"] = "1"
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
        ctx.exit(0)


def run() -> None:
    """Entry point: named `helm nemo` when helm runs us as its plugin, `helm-nemo` otherwise."""
    from helm_nemo import timings

    timings.mark("start + imports")
    try:
        main(prog_name="helm nemo" if os.environ.get("HELM_PLUGIN_NAME") else "helm-nemo")
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        if isinstance(done.code, str):
            print(done.code, file=sys.stderr)
    _exit_now(code)


def _exit_now(code: int) -> None:
    """Flush and leave without the interpreter's teardown: freeing the compiled validators and schemas
    object by object costs 100 ms and more, after all the work is done. Output errors (a closed pipe,
    a full disk) become one line and exit 1."""
    from helm_nemo import timings

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError as err:
            if stream is sys.stdout:
                try:
                    sys.stderr.write(f"helm nemo: cannot write the output: {err.strerror or err}\n")
                    sys.stderr.flush()
                except OSError:
                    pass
                code = code or 1
    timings.dump()
    os._exit(code)


def _usage_error(message: str, hint: str) -> None:
    """A command-line mistake: one message and a hint, exit 2."""
    click.echo(f"helm nemo: {message}\n    hint: {hint}", err=True)
    sys.exit(2)
