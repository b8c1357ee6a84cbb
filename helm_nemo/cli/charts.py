"""`helm nemo generate` and `helm nemo publish`: the charts themselves."""

from __future__ import annotations

import sys

import click

from helm_nemo.cli import _fail, _helm, _usage_error


@click.command()
@click.option("--check", is_flag=True, help="Exit 1 when charts/ differs from what the sources produce.")
@click.option(
    "-o",
    "--output",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the charts into this directory instead of the project's charts/ (required when "
    "helm-nemo runs from an installed package, whose files are never modified).",
)
def generate(check: bool, output: str | None) -> None:
    """Render charts/ from generator/, schemas/ and values/accelerators/."""
    from pathlib import Path

    from helm_nemo import resources
    from helm_nemo.generate import charts as generator

    if output:
        target = Path(output).resolve()
        if resources.is_packaged() and target.is_relative_to(resources.PACKAGE_DIR):
            _usage_error("--output points inside the installed package", "name a directory of your own")
        changed = generator.write(out=target)
        click.echo(f"generated {target}: {len(changed)} file(s) changed (from the sources in {resources.data_root()})")
        return
    if resources.is_packaged() and not check:
        _usage_error(
            f"helm-nemo runs from an installed package ({resources.data_root()}); its charts are never rewritten",
            "write them elsewhere: helm nemo generate --output DIR",
        )
    if check:
        problems = generator.check()
        stale = [line for line in problems if not line.startswith("version: ")]
        versions = [line[len("version: ") :] for line in problems if line.startswith("version: ")]
        if stale:
            click.echo("charts/ is out of date with its sources (run `helm-nemo generate`):", err=True)
            for line in stale[:50]:
                click.echo(f"  {line}", err=True)
        if versions:
            click.echo("chart versions break the version policy (generator/versions.lock):", err=True)
            for line in versions:
                click.echo(f"  {line}", err=True)
        if problems:
            sys.exit(1)
        click.echo("charts/ is up to date; every chart version matches generator/versions.lock")
        return
    from helm_nemo.generate import versions as chart_versions

    changed = generator.write()
    click.echo(f"generated charts/: {len(changed)} file(s) changed")
    for added in chart_versions.record():
        click.echo(f"locked {added} in generator/versions.lock")
    conflicts = [line[len("version: ") :] for line in generator.check() if line.startswith("version: ")]
    for line in conflicts:
        click.echo(f"  {line}", err=True)
    if conflicts:
        sys.exit(1)


@click.command()
@click.argument("target")
@click.argument("charts", nargs=-1)
@click.option("--plain-http", is_flag=True, help="Talk HTTP to the registry (a local registry).")
@click.option(
    "--charts-dir",
    type=click.Path(file_okay=False, exists=True),
    default=None,
    help="Folder of generated charts (default: the project's charts/).",
)
@click.option("-j", "--jobs", type=click.IntRange(1, 32), default=8, show_default=True, help="Charts handled at once.")
def publish(target, charts, plain_http, charts_dir, jobs):
    """Package the generated charts (or the named ones) and push them to TARGET (oci://HOST/PATH).

    A version already in the registry with the same content is skipped; with different content the
    run is refused (exit 1) and nothing is pushed. Credentials: `helm registry login HOST` beforehand.
    """
    import time
    from pathlib import Path

    from helm_nemo import resources

    from helm_nemo.actions import publish as publishing

    started = time.monotonic()
    try:
        found = publishing.find_charts(Path(charts_dir) if charts_dir else resources.charts_dir(), list(charts))
        outcomes = publishing.publish(
            target,
            found,
            _helm(),
            plain_http=plain_http,
            jobs=jobs,
            verify_lock=resources.data_root(),
            echo=lambda line: click.echo(line, err=True),
        )
    except Exception as err:
        _fail(err)
        return
    click.echo(publishing.summary_table(outcomes))
    click.echo(f"{len(outcomes)} chart(s) in {time.monotonic() - started:.1f} s", err=True)
    bad = [o for o in outcomes if o.status not in ("pushed", "skipped", "unreleased")]
    if bad:
        click.echo(
            "helm nemo: publish refused; nothing was pushed"
            if any(o.status == "refused" for o in bad)
            else "helm nemo: publish failed",
            err=True,
        )
        sys.exit(1)
