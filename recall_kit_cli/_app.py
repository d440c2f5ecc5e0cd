"""The click application: the group, the table of its commands (each imported when used), and how it exits.

Exit status: 0 done; 1 `validate` found bad files; 2 bad input or configuration (one line on
stderr); 3 `query --require-model` got no answer from the model; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from recall_kit_cli._help import HelpGroup
from recall_kit_cli._output import SanitisingLogHandler, clean, clean_block, echo, quiet_broken_pipe, reader_gone

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


class Registered(NamedTuple):
    """A command not imported yet: the module and attribute that define it, its line in the list."""

    module: str
    attribute: str
    summary: str  # what `recall-kit --help` and shell completion show beside its name, in one line


# Every command, in one line each: its module is imported only when it runs or shows its own help.
COMMANDS: dict[str, Registered] = {
    "add": Registered("recall_kit_cli.commands.manage_cmd", "add", "Save a new memory as ROOT/TYPE/SLUG.md."),
    "bench": Registered("recall_kit_cli.commands.bench_cmd", "bench", "Benchmarks: delivery, latency, learning replay."),
    "cache": Registered("recall_kit_cli.commands.cache_cmd", "cache", "List or clear the per-user index caches."),
    "config": Registered("recall_kit_cli.commands.config_cmd", "config", "Every setting with its source; trust a project file."),
    "doctor": Registered("recall_kit_cli.commands.doctor_cmd", "doctor", "What is wrong in the memory folders; --fix mends MEMORY.md."),
    "enrich": Registered("recall_kit_cli.commands.enrich_cmd", "enrich", "Ask the model for the words a user might type instead."),
    "hook": Registered("recall_kit_cli.integrations.commands", "hook", "Agent hooks that hand memories over through the daemon."),
    "learned": Registered("recall_kit_cli.commands.learned_cmd", "learned", "Show or forget what was learned from the model's picks."),
    "list": Registered("recall_kit_cli.commands.list_cmd", "list_memories", "List the memories, and every file skipped and why."),
    "mcp": Registered("recall_kit_cli.integrations.commands", "mcp", "Serve the memories to any MCP client over stdio."),
    "query": Registered("recall_kit_cli.commands.query_cmd", "query", "Show what a prompt receives: fast now, refined after."),
    "rm": Registered("recall_kit_cli.commands.manage_cmd", "rm", "Delete one memory file, after confirmation."),
    "serve": Registered("recall_kit_cli.integrations.commands", "serve", "Run the per-user recall daemon the hooks talk to."),
    "show": Registered("recall_kit_cli.commands.manage_cmd", "show", "Show one memory as the agent would see it."),
    "stats": Registered("recall_kit_cli.commands.stats_cmd", "stats", "Counts, sizes, dates, enrichment and learning per store."),
    "validate": Registered("recall_kit_cli.commands.validate_cmd", "validate", "Check every memory file; exit 1 if any is skipped."),
    "watch": Registered("recall_kit_cli.commands.watch_cmd", "watch", "Print one line per new snapshot of the memory roots."),
}

EXIT_INTERRUPTED = 130
# click >= 8.2: a group run without its subcommand raises this, its message the whole help text
_NO_ARGS_IS_HELP: type[click.UsageError] | tuple[()] = getattr(click.exceptions, "NoArgsIsHelpError", ())


class RecallKitGroup(HelpGroup):
    """The top group: its commands load from ``COMMANDS`` when used, and a reader that went away
    (``| head``) ends any command quietly, with status 0."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every registered command, without importing one."""
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command, its module imported now (once)."""
        command = self.commands.get(cmd_name)
        entry = COMMANDS.get(cmd_name)
        if command is None and entry is not None:
            command = getattr(importlib.import_module(entry.module), entry.attribute)
            assert isinstance(command, click.Command) and command.name == cmd_name, f"COMMANDS[{cmd_name!r}]"
            self.add_command(command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list from the registry: no command module is imported to show it."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name].summary) for name in sorted(COMMANDS)])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        """Command names (with their lines) from the registry, then this group's options."""
        from click.shell_completion import CompletionItem

        names = [CompletionItem(name, help=entry.summary) for name, entry in sorted(COMMANDS.items()) if name.startswith(incomplete)]
        return names + click.Command.shell_complete(self, ctx, incomplete)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        """Parse the arguments (``--help`` and ``--version`` print here) with the same quiet end."""
        with _quiet_when_the_reader_is_gone():
            return super().make_context(info_name, args, parent, **extra)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The two options on one line, so that every command still fits a 24-line screen."""
        shown = [", ".join(param.opts) for param in self.get_params(ctx) if isinstance(param, click.Option) and not param.hidden]
        formatter.write_paragraph()
        formatter.write_text(f"Options: {'  '.join(shown)}")
        self.format_commands(ctx, formatter)

    def invoke(self, ctx: click.Context) -> object:
        """Run the command; a write to a stdout nobody reads any more ends it as done, not as an error."""
        with _quiet_when_the_reader_is_gone():
            return super().invoke(ctx)


@contextlib.contextmanager
def _quiet_when_the_reader_is_gone() -> Iterator[None]:
    try:
        yield
    except BrokenPipeError:
        if not reader_gone():  # a pipe of something else (a socket, a child) broke: a real error
            raise
        quiet_broken_pipe()
        raise click.exceptions.Exit(0) from None


@click.group(cls=RecallKitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="recall-kit")
def cli() -> None:
    """Right memories, right moment. Example: recall-kit query 'how do we deploy?'"""


def usage_line(exc: click.UsageError) -> str:
    """A usage error as one line, with the command to ask for help."""
    message = exc.format_message()
    command = exc.ctx.command_path if exc.ctx is not None else "recall-kit"
    if exc.ctx is not None and exc.ctx.command.name == "query" and "unexpected extra argument" in message:
        message = 'the query is one argument: quote it, e.g. recall-kit query "how do we deploy?"'
    return f"recall-kit: {clean(message)} (see '{clean(command)} --help')"


def run(args: list[str] | None = None) -> int:
    """Run the CLI; every failure ends as one line on stderr and an exit status, never a traceback."""
    root_logger = logging.getLogger()
    if not root_logger.handlers:
        handler = SanitisingLogHandler(logging.WARNING)
        root_logger.addHandler(handler)
    try:
        result = cli.main(args=args, prog_name="recall-kit", standalone_mode=False)
    except _NO_ARGS_IS_HELP as exc:  # `recall-kit hook`: its help, as the lines it is
        echo(*clean_block(exc.format_message().rstrip("\n")).split("\n"), err=True)
        return 2
    except click.UsageError as exc:
        echo(usage_line(exc), err=True)
        return 2
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except (KeyboardInterrupt, click.Abort):
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        quiet_broken_pipe()
        return 0
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return result if isinstance(result, int) else 0


def main() -> None:
    exit_now(run())


def exit_now(code: int) -> None:
    """Flush what was written and end the process without tearing down every object it made: a
    query over 10,000 memories spends 0.1 s freeing them (bench/cold_start.py). Nothing is left to
    clean up here: each command has closed its stores, sessions and files when it returns."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed pipe: what could be written was written
    os._exit(code)
