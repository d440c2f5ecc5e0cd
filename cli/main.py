"""Entry point: the click group. Each command lives in its own module and stays thin."""

from __future__ import annotations

import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recall-kit")
def cli() -> None:
    """Hand an agent the right memories at the right moment."""


def _register() -> None:
    # Commands register themselves here; one module per command keeps them small.
    from recall_kit_cli import commands  # noqa: F401
    from recall_kit_cli.integrations.commands import hook, mcp, serve

    cli.add_command(serve)
    cli.add_command(hook)
    cli.add_command(mcp)


def main() -> None:
    if sys.argv[1:3] == ["hook", "claude-code"] and not {"-h", "--help"} & set(sys.argv[3:]):
        # runs on every prompt and tool call: skip loading the other commands and the engine
        from recall_kit_cli.integrations.hook import run_claude_code

        sys.exit(run_claude_code(sys.argv[3:]))
    _register()
    cli()
