"""Start `helm template` before the values are validated, and give it the values only once they are.

helm spends most of a `helm template` starting (the Go runtime and helm's packages: ~55 of ~65 ms here)
before it reads a single value, and helm-nemo spends about as long starting Python and validating. So
`template` and `lint` start helm at once, with the release name and chart read off the values file's
top-level lines (`release:`, `chart:`, `accelerator:`), the values to come on stdin (`-f -`), and then
validate as usual. When validation passes and the command helm would get is exactly the one started, that
process gets the values; otherwise (a guess that does not match, an error, a signal, any exit) it is killed
before it has read anything: a helm started this way never sees a value, prints nothing and touches
nothing (`helm template` with a local chart reads no network and no cluster before its values).

Only for a single values file naming a chart folder shipped with helm-nemo, no --chart/--version/
--chart-repo/$HELM_NEMO_CHART_REPO, and no flag for helm but -n (nothing that could make helm read a
repository or registry first). install/upgrade never start helm before validation.
"""

from __future__ import annotations

import os
import re

# A top-level key with a plain value on one line (what the examples and gpu-recipes files have); anything
# else (quotes, ${VARS}, anchors, a recipe) makes no guess.
_TOP_LEVEL = re.compile(r"^(chart|accelerator|release|releases)[ \t]*:[ \t]*([a-z0-9][-a-z0-9]*)?[ \t]*(?:#.*)?$", re.M)
_READ_AT_MOST = 1 << 20
_started: list = []  # [(args, Popen)] not yet taken


def guess_release(values_file: str, release: str | None) -> tuple[str, str] | None:
    """(release name, chart folder) that the values file most likely names, or None when unsure."""
    try:
        with open(values_file, "rb") as handle:
            text = handle.read(_READ_AT_MOST).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    found: dict[str, str | None] = {}
    for key, value in _TOP_LEVEL.findall(text):
        if key in found or key == "releases":
            return None  # written twice, or a recipe
        found[key] = value or None
    release = release or found.get("release")
    kind, accelerator = found.get("chart"), found.get("accelerator")
    if not release or not kind:
        return None
    from helm_nemo import resources

    charts = resources.charts_dir()
    if (charts / kind / "Chart.yaml").is_file():
        return release, str(charts / kind)
    if accelerator and (charts / accelerator / kind / "Chart.yaml").is_file():
        return release, str(charts / accelerator / kind)
    return None


def start_template(params: dict) -> None:
    """For `template`/`lint` parameters from cli/direct.py: start `helm template` when the guess is safe."""
    values = params["values_files"]
    if (len(values) != 1 or values[0] == "-" or params.get("chart") or params.get("chart_version")
            or params.get("chart_repo") or os.environ.get("HELM_NEMO_CHART_REPO")
            or params.get("target", "kubernetes") != "kubernetes"):
        return
    guessed = guess_release(values[0], params.get("release"))
    if guessed is None:
        return
    from helm_nemo.actions.helm import HelmNotFound, locate_helm

    try:
        helm = locate_helm()
    except HelmNotFound:
        return  # the command says so in its own words
    release, chart = guessed
    extra = ["--namespace", params["namespace"]] if params.get("namespace") else []
    if params.get("kube_version"):
        extra = ["--kube-version", params["kube_version"]] + extra
    args = [helm, "template", release, chart, "-f", "-", *extra]
    from helm_nemo.actions import process

    _started.append((args, process.spawn_detached(args)))


def take(args: list[str]):
    """The process started for exactly `args` (then it is the caller's), or None."""
    for index, (started, proc) in enumerate(_started):
        if started == args and proc.poll() is None:
            del _started[index]
            return proc
    return None


def discard() -> None:
    """Kill every started helm not taken (it has read no values) and reap it."""
    from helm_nemo.actions import process

    while _started:
        _, proc = _started.pop()
        process.kill(proc)
