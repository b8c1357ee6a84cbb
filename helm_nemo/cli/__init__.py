"""`helm-nemo` / `helm nemo`: a thin click layer over the library.

Start-up is most of a run's own cost, so nothing heavy is imported here: the click group lives in
cli/group.py, each command's module loads on first use, and the hot release commands (template, lint,
install, upgrade, uninstall) are parsed by cli/direct.py without importing click at all whenever their
command line is one it reads exactly as click would (anything else goes to click). User errors print
one screen and exit 2; tracebacks only with --debug / HELM_DEBUG=true.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable
    from typing import Any, TypeVar

    F = TypeVar("F", bound=Callable[..., Any])

    from helm_nemo.user_errors import UserError

PASSTHROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": ["-h", "--help"]}


def mask_option(func: F) -> F:
    """--mask VAR (repeatable): mask this variable's value too, whatever its name and value look like."""
    import click

    return click.option(
        "--mask",
        "mask_names",
        multiple=True,
        metavar="VAR",
        help="Print the value of environment variable VAR as *** too (repeatable); secret-looking names "
        "and credential-looking values are masked anyway (docs/security.md).",
    )(func)


def _debug() -> bool:
    return os.environ.get("HELM_DEBUG", "").lower() == "true" or os.environ.get("HELM_NEMO_DEBUG") == "1"


def _say(text: str, err: bool = True) -> None:
    """Print one message (stderr by default) with the values from the environment masked (helm_nemo.secrets)."""
    import click  # echo: the message's encoding and stripping of terminal codes when not a terminal

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


def _exit_user_error(err: UserError) -> None:
    """A user error of a command that never calls helm (fit, metrics): its message and exit 2 (no "Nothing was
    sent to helm" as `_fail` says); with --debug raised, for the traceback."""
    import click

    from helm_nemo.user_errors import EXIT_USER_ERROR

    if _debug():
        raise err
    click.echo(err.format(), err=True)
    sys.exit(EXIT_USER_ERROR)


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
    import click

    error = getattr(err, "error", err)
    try:
        click.echo(f"helm nemo: cannot write the output: {getattr(error, 'strerror', None) or error}", err=True)
    except OSError:
        pass
    sys.exit(1)


# Command -> the module under helm_nemo/cli/ that defines it: a run imports only its command's module.
COMMANDS = {
    "generate": "charts",
    "publish": "charts",
    "template": "releases",
    "install": "releases",
    "upgrade": "releases",
    "uninstall": "releases",
    "lint": "releases",
    "diff": "releases",
    "preflight": "releases",
    "validate": "releases",
    "status": "observe",
    "logs": "observe",
    "version": "tools",
    "summary": "tools",
    "metrics": "tools",
    "fit": "fit",
    "report": "report",
}


def _helm():
    from helm_nemo.actions.helm import helm_binary

    return helm_binary()


def prog_name() -> str:
    """`helm nemo` when helm runs us as its plugin, `helm-nemo` otherwise."""
    return "helm nemo" if os.environ.get("HELM_PLUGIN_NAME") else "helm-nemo"


def __getattr__(name: str):
    """`from helm_nemo.cli import main` (the click group) still works; it loads on first use."""
    if name == "main":
        from helm_nemo.cli.group import main

        return main
    raise AttributeError(name)


# Standard modules imported on every run but used only on rare paths: loaded when first used. `dataclasses`
# imports `inspect` (with ast, dis and tokenize: ~10 ms, a tenth of a template run) only to write a
# docstring for a dataclass that has none (ours all have one); click's help, tracebacks and jsonschema's
# error paths load it for real when they use it.
DEFERRED_MODULES = ("inspect",)


def _defer_rare_modules() -> None:
    """Put a stand-in in sys.modules for each of DEFERRED_MODULES not imported yet. The first attribute read
    from it imports the real module, fills the stand-in with it (whoever holds the stand-in sees the real
    module) and puts the real module in sys.modules. (importlib.util.LazyLoader cannot do this on Python
    3.11: the next `import` statement reads the module's __spec__, which loads it.)"""
    import types
    from importlib.machinery import ModuleSpec

    for name in DEFERRED_MODULES:
        if name in sys.modules:
            continue
        stand_in = types.ModuleType(name, f"{name}, imported on first use")
        stand_in.__spec__ = ModuleSpec(name, None)

        def load(attribute: str, name=name, stand_in=stand_in):
            import importlib

            if sys.modules.get(name) is stand_in:
                del sys.modules[name]
            real = importlib.import_module(name)
            stand_in.__dict__.update(real.__dict__)
            return getattr(real, attribute)

        stand_in.__getattr__ = load  # type: ignore[method-assign]  # a module's __getattr__ (PEP 562)
        sys.modules[name] = stand_in


def run() -> None:
    """Entry point: named `helm nemo` when helm runs us as its plugin, `helm-nemo` otherwise."""
    from helm_nemo import timings

    _defer_rare_modules()
    timings.mark("start + imports")
    try:
        from helm_nemo.cli import direct

        if not direct.dispatch(sys.argv[1:]):
            from helm_nemo.cli.group import main

            main(prog_name=prog_name())
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
    early = sys.modules.get("helm_nemo.actions.early")
    if early is not None:
        early.discard()  # a helm started before validation and never given its values
    timings.dump()
    os._exit(code)


def _usage_error(message: str, hint: str) -> None:
    """A command-line mistake: one message and a hint, exit 2."""
    import click

    click.echo(f"helm nemo: {message}\n    hint: {hint}", err=True)
    sys.exit(2)
