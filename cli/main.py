"""Entry point: the click group. Each command lives in its own module and stays thin."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recall-kit")
def cli() -> None:
    """Hand an agent the right memories at the right moment."""


def _register() -> None:
    # Commands register themselves here; one module per command keeps them small.
    from recall_kit_cli import commands  # noqa: F401


def main() -> None:
    _register()
    cli()
