"""`recall-kit validate`: every file the store would skip, with its reason; exit 1 when any."""

from __future__ import annotations

import click

from recall_kit_cli._format import error_line
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, clean_ref, echo, echo_json, echo_rows
from recall_kit_cli._config_file import open_store, root_option
from recall_kit_cli.commands.list_cmd import error_json


@click.command("validate", cls=HelpCommand)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.pass_context
def validate(ctx: click.Context, roots: tuple[str, ...], as_json: bool) -> None:
    """Check every memory file; exit 1 when any would be skipped or loads with a problem (for pre-commit and CI).

    \b
    Example:
      recall-kit validate --root ~/memories
    """
    with open_store(roots) as store:
        snapshot = store.snapshot()
    errors = snapshot.errors
    # a memory that loads without a bad field (`keywords: 42`) is still a file to fix
    problems = sorted((doc.ref, problem) for doc in snapshot.docs.values() for problem in doc.problems)
    if as_json:
        echo_json({"valid": len(snapshot.docs), "errors": [error_json(err) for err in errors],
                   "problems": [{"ref": ref, "problem": problem} for ref, problem in problems]})
    else:
        with_problems = len({ref for ref, _ in problems})
        verdict = "ok" if not errors and not problems else f"{len(errors) + with_problems} bad"  # files, not lines
        noted = f" ({with_problems} with problems)" if problems else ""
        echo(f"{verdict}: {len(snapshot.docs)} valid memories{noted}, {len(errors)} skipped")
        echo_rows(f"  {error_line(err)}" for err in errors)
        echo_rows(f"  {clean_ref(ref)}: {clean(problem)} (the memory loads without it)" for ref, problem in problems)
    if errors or problems:
        ctx.exit(1)
