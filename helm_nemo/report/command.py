"""`helm nemo report`: gather (files or the cluster) -> the page -> the file named by -o; one line on stderr."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only
    from collections.abc import Callable

    from helm_nemo.report.model import Report
    from helm_nemo.status.progress import RunInputs


def offline(
    paths: list[str], output: str, *, values: list[str], preflight: list[str], say: Callable[[str], None]
) -> int:
    """The report of log files; exit 0 once written."""
    from helm_nemo.report.gather import from_files

    run = _run_inputs(values, None)
    return write(from_files(paths, run=run, preflight=preflight), output, say)


def on_cluster(
    release: str | None,
    values: list[str],
    output: str,
    *,
    extra: list[str],
    namespace: str | None,
    preflight: list[str],
    say: Callable[[str], None],
) -> int:
    """The report of a release (the one named, or the training release of --values); exit 3 when not there."""
    from helm_nemo.actions import status as action
    from helm_nemo.report.gather import from_cluster

    names = action.release_targets(values, release)
    client = action.connect(extra, namespace)
    name = names[0]
    if len(names) > 1:  # a recipe: its training release (a JobSet or Job that is not data-prep)
        from helm_nemo.status.cluster import read_statuses

        found = read_statuses(client, client.namespace, names, with_logs=False)
        training = [s.release for s in found if s.workload is not None and not s.data_prep]
        name = training[0] if training else name
        say(f"helm nemo report: {len(names)} releases in the values; reporting {name} (name another to choose it)")
    run = action.run_inputs_for(values, [name])[name]
    report = from_cluster(client, name, run=run, preflight=preflight)
    if len(names) > 1:
        from helm_nemo.report.model import RecipeRow

        report.recipe.insert(1, RecipeRow("releases of the values", ", ".join(names), ", ".join(values)))
    if not report.pods and report.series is None:
        say(f"helm nemo report: nothing of release {name} in namespace {client.namespace}")
        return 3
    return write(report, output, say)


def _run_inputs(values: list[str], release: str | None) -> RunInputs | None:
    if not values:
        return None
    from helm_nemo.status.progress import run_inputs

    return run_inputs(values[-1], release)


def write(report: Report, output: str, say: Callable[[str], None]) -> int:
    from helm_nemo.report.render import html

    page = html(report)
    if output == "-":
        import sys

        sys.stdout.write(page)
        return 0
    folder = os.path.dirname(os.path.abspath(output))
    os.makedirs(folder, exist_ok=True)
    with open(output, "w", encoding="utf-8") as handle:
        handle.write(page)
    cause = report.diagnosis.cause if report.diagnosis is not None else None
    verdict = f"FAILED: {cause.klass or cause.signature} in {cause.source}" if cause else "no failure found"
    say(f"wrote {output} ({len(page.encode()) / 1024:.0f} KiB): {verdict}")
    return 0
