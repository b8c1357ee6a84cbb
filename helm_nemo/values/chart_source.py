"""Which chart a release installs, and where its schema and defaults are read from.

The values' `chart:` (or --chart) names a chart kind, found per accelerator among the shipped charts
(charts/<accelerator>/<kind>), a chart folder next to the values file, or an oci:// reference. With a chart
repository ($HELM_NEMO_CHART_REPO, --chart-repo) a kind names the same released chart in that repository. An
oci:// chart is checked against the shipped chart when generator/versions.lock says it is that released content
(`released_local_chart`), else it is pulled with the real helm (`pull_chart`, once per run, only the registry
flags of the command line).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs every run start-up time
    from typing import Any
    from collections.abc import Sequence

    from helm_nemo.values.loaded import LoadedValues
    from helm_nemo.values.recipe import RealPath

from helm_nemo import resources
from helm_nemo.values.recipe import problem

CHART_KIND = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def chart_for(
    loaded: LoadedValues,
    data: dict[str, Any],
    where: tuple[Any, ...],
    chart_override: str | None,
    real: RealPath | None = None,
    root: Path | None = None,
) -> tuple[str, str | None, str | None]:
    """(chart ref, kind, accelerator) from --chart or the values' `chart`/`accelerator` keys.

    `real` maps a values path to where it is written (a recipe's release-level `chart:`/`accelerator:`).
    The values' `chart:` is a chart kind, or a chart folder relative to the values file inside `root`
    (values/paths.py); --chart is the user's own command line and is taken as given.
    """
    from helm_nemo.user_errors import UserError
    from helm_nemo.values.paths import PathRefused, inside

    real = real or (lambda rel: where + rel)

    kind = data.get("chart")
    accelerator = data.get("accelerator")
    if chart_override:
        if chart_override.startswith("oci://") or os.sep in chart_override or Path(chart_override).is_dir():
            return chart_override, kind, accelerator
        kind = chart_override  # a chart kind name
    if not kind:
        raise UserError(
            problem(
                loaded,
                where,
                "which chart? the values name no `chart`",
                expected="chart: jobset (or nemo-training, nccl-test, supervisor, gcs-fuse, fsx-lustre) "
                "and accelerator: <id>",
                hint="or pass --chart PATH|oci://…|KIND",
            )
        )
    if not chart_override and ("/" in kind or kind.startswith((".", "~"))):
        at = real(("chart",))
        base = loaded.base_dir(at)
        try:
            folder = inside(base, kind, root or base, what="chart folder")
        except PathRefused as refused:
            raise UserError(problem(loaded, at, str(refused), hint=refused.hint)) from None
        if not (folder / "Chart.yaml").is_file():
            raise UserError(problem(loaded, at, f"chart folder {kind!r} has no Chart.yaml ({folder})"))
        return str(folder), "", accelerator
    if not CHART_KIND.fullmatch(kind):
        raise UserError(
            problem(
                loaded,
                real(("chart",)),
                f"chart {kind!r} is neither a chart kind nor a folder path",
                expected="a chart kind (jobset, nemo-training, nccl-test, supervisor, gcs-fuse, fsx-lustre) or "
                "./a/chart/folder next to the values file",
            )
        )
    # The charts folder says which kinds exist per accelerator (charts/<accelerator>/<kind>) and which once.
    path = resources.shipped_chart_name(kind, accelerator)
    if path is None:  # say why
        charts = resources.charts_dir()
        have = sorted(p.parent.parent.name for p in charts.glob(f"*/{kind}/Chart.yaml"))
        if not have:
            raise UserError(problem(loaded, real(("chart",)), f"no chart {kind!r}", hint=f"charts live in {charts}"))
        if not accelerator:
            raise UserError(
                problem(
                    loaded,
                    where,
                    f"chart {kind!r} exists per accelerator; the values name no `accelerator`",
                    expected="accelerator: " + " | ".join(have),
                    hint="add `accelerator:` to the values file",
                )
            )
        raise UserError(
            problem(
                loaded,
                real(("accelerator",)),
                f"no {kind!r} chart for accelerator {accelerator!r}",
                expected=" | ".join(have),
            )
        )
    return path, kind, accelerator


def from_repository(
    loaded: LoadedValues, where: tuple[Any, ...], chart: str, version: str | None, repo: str
) -> tuple[str, str]:
    """A chart picked by kind (+ accelerator) -> the same chart published in `repo` (oci://HOST/PATH), at the
    shipped chart's version unless one is given. Only released versions are published, so an unreleased
    shipped chart is an error rather than a silently different chart."""
    from helm_nemo.generate.versions import load_lock, read_chart
    from helm_nemo.user_errors import UserError

    if not repo.startswith("oci://"):
        raise UserError(
            problem(
                loaded,
                where,
                f"chart repository {repo!r} is not an oci:// reference",
                expected="HELM_NEMO_CHART_REPO=oci://HOST/PATH (or --chart-repo)",
            )
        )
    shipped = read_chart(Path(chart))
    version = version or shipped.version
    if version == shipped.version and load_lock().get(shipped.name, {}).get(version) != shipped.digest:
        raise UserError(
            problem(
                loaded,
                where,
                f"chart {shipped.name} {version} is not released, so no repository holds it",
                hint="unset HELM_NEMO_CHART_REPO / --chart-repo to use the shipped chart",
            )
        )
    return f"{repo.rstrip('/')}/{shipped.name}", version


def released_local_chart(name: str, version: str | None) -> Path | None:
    from helm_nemo.generate.versions import load_lock, read_chart

    locked = load_lock().get(name, {}).get(version or "")
    if not locked:
        return None
    for chart_yaml in sorted(resources.charts_dir().glob("**/Chart.yaml")):
        chart = read_chart(chart_yaml.parent)
        if chart.name == name and chart.version == version and chart.digest == locked:
            return chart_yaml.parent
    return None


# helm pull flags that say how to reach a registry (taken from the command line, given to the pull only).
REGISTRY_FLAGS = {
    "--plain-http": False,
    "--insecure-skip-tls-verify": False,
    "--ca-file": True,
    "--cert-file": True,
    "--key-file": True,
    "--registry-config": True,
    "--repository-config": True,
}
_PULLED: dict[tuple[Any, ...], Any] = {}  # (reference, version, flags) -> TemporaryDirectory holding the pulled chart


def registry_flags(extra: Sequence[str]) -> list[str]:
    """The REGISTRY_FLAGS among helm's flags of the command line (`--ca-file X` and `--ca-file=X`)."""
    out: list[str] = []
    args = list(extra)
    for index, arg in enumerate(args):
        name = arg.partition("=")[0]
        if name in REGISTRY_FLAGS:
            out.append(arg)
            if REGISTRY_FLAGS[name] and "=" not in arg and index + 1 < len(args):
                out.append(args[index + 1])
    return out


class ChartPullFailed(Exception):
    """helm could not pull an oci:// chart: the values were not checked against it."""


def pull_chart(reference: str, version: str | None, flags: Sequence[str] = ()) -> Path:
    """The folder of an oci:// chart, pulled (once per run) with the real helm into a temporary folder that is
    removed at exit. Only the chart is fetched: no value goes to helm, no cluster is asked."""
    import subprocess
    import tempfile

    key = (reference, version, tuple(flags))
    if key not in _PULLED:
        from helm_nemo.actions.helm import locate_helm

        folder = tempfile.TemporaryDirectory(prefix="helm-nemo-pull-")
        args = [locate_helm(), "pull", reference, "--untar", "--untardir", folder.name, *flags]
        if version:
            args += ["--version", version]
        proc = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        charts = [p.parent for p in Path(folder.name).glob("*/Chart.yaml")]
        if proc.returncode != 0 or len(charts) != 1:
            words = (proc.stderr or proc.stdout).strip().splitlines()
            folder.cleanup()
            raise ChartPullFailed(words[-1] if words else f"helm pull exited {proc.returncode} without a chart")
        _PULLED[key] = (folder, charts[0])
    pulled: Path = _PULLED[key][1]
    return pulled
