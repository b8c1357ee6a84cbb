"""`helm-nemo` / `helm nemo`: a thin click layer over the library."""

from __future__ import annotations

import sys

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="helm-nemo")
def main() -> None:
    """Generate, validate, install and publish NeMo training charts."""


@main.command()
@click.option("--check", is_flag=True, help="Exit 1 when charts/ differs from what the sources produce.")
def generate(check: bool) -> None:
    """Render charts/ from generator/, schemas/ and values/accelerators/."""
    from . import generator

    if check:
        problems = generator.check()
        if problems:
            click.echo("charts/ is out of date with its sources (run `helm-nemo generate`):", err=True)
            for line in problems[:50]:
                click.echo(f"  {line}", err=True)
            sys.exit(1)
        click.echo("charts/ is up to date")
        return
    changed = generator.write()
    click.echo(f"generated charts/: {len(changed)} file(s) changed")


@main.command()
def version() -> None:
    """Print the helm-nemo version."""
    click.echo(__version__)
