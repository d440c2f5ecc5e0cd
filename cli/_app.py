"""The click application: the group, and every command added to it explicitly."""

from __future__ import annotations

import click

from recall_kit_cli.commands.bench_cmd import bench
from recall_kit_cli.commands.bench_latency_cmd import latency
from recall_kit_cli.commands.enrich_cmd import enrich
from recall_kit_cli.commands.list_cmd import list_memories
from recall_kit_cli.commands.query_cmd import query
from recall_kit_cli.commands.watch_cmd import watch
from recall_kit_cli.integrations.commands import hook, mcp, serve


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recall-kit")
def cli() -> None:
    """Hand an agent the right memories at the right moment."""


bench.add_command(latency)
for _command in (list_memories, query, watch, bench, serve, hook, mcp):
    cli.add_command(_command)
cli.add_command(enrich)
