"""The hot release commands without click: importing click (and the standard modules it pulls in) is a
good part of a short run's start-up, so a command line this module can read exactly as click would is
parsed here and run by release_commands.run_release; anything else (help, an option helm gets, `--`,
an option value that looks like an option, a bad choice, a folder given as values file ...) returns
None and goes to click, which gives the usual answer or message.

tests/test_cli_direct.py checks that every command line `parse` accepts gets the same options from click.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any

# option -> (parameter, "flag" | "value" | "values" (repeatable)), as cli/releases.py declares them for click
_VALUES = {
    "-f": ("values_files", "values"),
    "--values": ("values_files", "values"),
    "--root": ("root", "value"),
    "--show-secrets": ("show_secrets", "flag"),
    "--mask": ("mask_names", "values"),
}
_RELEASE = {
    **_VALUES,
    "--chart": ("chart", "value"),
    "--version": ("chart_version", "value"),
    "--chart-repo": ("chart_repo", "value"),
    "-n": ("namespace", "value"),
    "--namespace": ("namespace", "value"),
}
_SKIP = {"--skip-manifest-validation": ("skip_manifest_validation", "flag")}
_TARGET = {"--target": ("target", "value")}
_FIT = {"--no-fit-error": ("no_fit_error", "flag")}
# preflight's offline fabric judge: declared for the tables' agreement, always left to click (a file that must
# exist, an integer).
_NCCL_LOG = {
    "--nccl-log": ("nccl_log", "value"),
    "--accelerator": ("accelerator", "value"),
    "--nodes": ("nodes", "value"),
}
# the fabric test in the cluster: declared for the tables' agreement, left to click when given (an integer, a
# test that runs minutes: start-up time does not matter).
_NCCL = {
    "--nccl": ("nccl", "flag"),
    "--nccl-nodes": ("nccl_nodes", "value"),
    "--nccl-timeout": ("nccl_timeout", "value"),
}
_NCCL_DEFAULTS = {"nccl": False, "nccl_nodes": None, "nccl_timeout": None}
_PREFLIGHT = {"--no-preflight": ("no_preflight", "flag"), "--preflight-only": ("preflight_only", "flag")}
_WAITS = {
    "--recipe-wait-timeout": ("recipe_wait_timeout", "value"),
    "--recipe-poll-interval": ("recipe_poll_interval", "value"),
}
_WAIT_DEFAULTS = {"recipe_wait_timeout": None, "recipe_poll_interval": None}
_COMMON_DEFAULTS = {
    "values_files": (),
    "root": None,
    "show_secrets": False,
    "mask_names": (),
    "chart": None,
    "chart_version": None,
    "chart_repo": None,
    "namespace": None,
    "release": None,
}

# command -> (its options, the defaults of the ones beyond _RELEASE)
COMMANDS: dict[str, tuple[dict[str, tuple[str, str]], dict[str, object]]] = {
    "template": (
        {**_RELEASE, **_SKIP, **_TARGET, **_FIT},
        {"skip_manifest_validation": False, "target": "kubernetes", "no_fit_error": False},
    ),
    "install": (
        {**_RELEASE, **_SKIP, **_TARGET, **_PREFLIGHT, **_NCCL, **_WAITS, **_FIT},
        {
            "no_fit_error": False,
            "skip_manifest_validation": False,
            "target": "kubernetes",
            "no_preflight": False,
            "preflight_only": False,
            **_NCCL_DEFAULTS,
            **_WAIT_DEFAULTS,
        },
    ),
    "lint": (
        {**_RELEASE, "--kube-version": ("kube_version", "value"), **_FIT},
        {"kube_version": None, "no_fit_error": False},
    ),
    "upgrade": (
        {
            **_RELEASE,
            "-i": ("install_missing", "flag"),
            "--install": ("install_missing", "flag"),
            "--diff": ("show_diff", "flag"),
            "--recreate": ("recreate", "flag"),
            "--new-run": ("new_run", "flag"),
            **_SKIP,
            **_PREFLIGHT,
            **_WAITS,
            **_FIT,
        },
        {
            **_WAIT_DEFAULTS,
            "no_fit_error": False,
            "install_missing": False,
            "show_diff": False,
            "skip_manifest_validation": False,
            "recreate": False,
            "new_run": False,
            "no_preflight": False,
            "preflight_only": False,
        },
    ),
    "preflight": (
        {
            **_RELEASE,
            "-o": ("output", "value"),
            "--output": ("output", "value"),
            "--no-color": ("no_color", "flag"),
            **_NCCL_LOG,
            **_NCCL,
            "--keep": ("keep", "flag"),
        },
        {
            "output": "text",
            "no_color": False,
            "nccl_log": None,
            "accelerator": None,
            "nodes": None,
            **_NCCL_DEFAULTS,
            "keep": False,
        },
    ),
    "uninstall": ({**_RELEASE, **_TARGET}, {"target": "kubernetes"}),
}
_TARGETS = ("kubernetes", "slurm")


def parse(command: str, args: list[str]) -> dict[str, Any] | None:
    """The parameters click would give `command` for `args`, or None when this parser does not read the
    line exactly as click does (then click parses it)."""
    if command not in COMMANDS:
        return None
    options, defaults = COMMANDS[command]
    params: dict[str, Any] = {**_COMMON_DEFAULTS, **defaults}
    repeated: dict[str, list[str]] = {}
    positional: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if token.startswith("--"):
            name, eq, value = token.partition("=")
            attached = value if eq else None
        elif token.startswith("-") and token != "-":
            name, attached = token[:2], (token[2:] or None)
        else:
            if token == "-":
                return None
            positional.append(token)
            continue
        spec = options.get(name)
        if spec is None:
            return None  # an option for helm, --help, `--`: click's pass-through rules apply
        parameter, kind = spec
        if kind == "flag":
            if attached is not None:
                return None
            params[parameter] = True
            continue
        if attached is None:
            if index >= len(args):
                return None
            attached = args[index]
            index += 1
        if not attached or (attached.startswith("-") and not (kind == "values" and attached == "-")):
            return None
        if kind == "values":
            repeated.setdefault(parameter, []).append(attached)
        else:
            params[parameter] = attached
    values = repeated.pop("values_files", [])
    params.update((parameter, tuple(given)) for parameter, given in repeated.items())
    if not values or len(positional) > 1:
        return None
    if any(params.get(name) is not None for name in ("nccl_log", "accelerator", "nodes")):
        return None
    if (
        params.get("nccl")
        or params.get("keep")
        or any(params.get(n) is not None for n in ("nccl_nodes", "nccl_timeout"))
    ):
        return None
    if any(v != "-" and os.path.isdir(v) for v in values):
        return None  # click: "is a directory"
    root = params["root"]
    if root is not None and not (os.path.isdir(root) and os.access(root, os.R_OK)):
        return None  # click: does not exist / is a file / not readable
    if params.get("target", "kubernetes") not in _TARGETS or params.get("output", "text") not in ("text", "json"):
        return None
    params["values_files"] = tuple(values)
    params["release"] = positional[0] if positional else None
    return params


def dispatch(argv: list[str]) -> bool:
    """Run argv's command when `parse` reads it (exits through SystemExit); False: click should."""
    params = parse(argv[0], argv[1:]) if argv else None
    if params is None:
        return False
    import sys

    if argv[0] in ("template", "lint"):
        from helm_nemo.actions import early

        early.start_template(params)  # helm starts while the values are validated; it gets them only if valid
    from helm_nemo.cli.release_commands import helm_extra, run_release

    try:
        run_release(argv[0], extra=helm_extra([], None, params["namespace"]), **params)
    except KeyboardInterrupt:  # before signals are forwarded: what click says
        print("\nAborted!", file=sys.stderr)
        sys.exit(1)
    return True
