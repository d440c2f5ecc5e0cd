"""`recall-kit validate`: every file the store would skip, with its reason; exit 1 when any."""

from __future__ import annotations

import click

from recall_kit_cli._format import error_line
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import echo, echo_json, echo_rows
from recall_kit_cli._config_file import open_store, root_option
from recall_kit_cli.commands.list_cmd import error_json


@click.command("validate", cls=HelpCommand)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.pass_context
def validate(ctx: click.Context, roots: tuple[str, ...], as_json: bool) -> None:
    """Check every memory file; exit 1 when any would be skipped (for pre-commit and CI).

    \b
    Example:
      recall-kit validate --root ~/memories
    """
    with open_store(roots) as store:
        snapshot = store.snapshot()
    errors = snapshot.errors
    if as_json:
        echo_json({"valid": len(snapshot.docs), "errors": [error_json(err) for err in errors]})
    else:
        verdict = "ok" if not errors else f"{len(errors)} bad"
        echo(f"{verdict}: {len(snapshot.docs)} valid memories, {len(errors)} skipped")
        echo_rows(f"  {error_line(err)}" for err in errors)
    if errors:
        ctx.exit(1)
