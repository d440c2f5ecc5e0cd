"""The click application: the group, every command added to it explicitly, and how it exits.

Exit status: 0 done; 1 `validate` found bad files; 2 bad input or configuration (one line on
stderr); 3 `query --require-model` got no answer from the model; 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from recall_kit_cli._output import SanitisingLogHandler, clean, clean_block, echo, quiet_broken_pipe, reader_gone
from recall_kit_cli.commands.bench_cmd import bench
from recall_kit_cli.commands.bench_latency_cmd import latency
from recall_kit_cli.commands.cache_cmd import cache
from recall_kit_cli.commands.config_cmd import config
from recall_kit_cli.commands.doctor_cmd import doctor
from recall_kit_cli.commands.enrich_cmd import enrich
from recall_kit_cli.commands.learned_cmd import learned
from recall_kit_cli.commands.list_cmd import list_memories
from recall_kit_cli.commands.manage_cmd import add, rm, show
from recall_kit_cli.commands.query_cmd import query
from recall_kit_cli.commands.stats_cmd import stats
from recall_kit_cli.commands.validate_cmd import validate
from recall_kit_cli.commands.watch_cmd import watch
from recall_kit_cli.integrations.commands import hook, mcp, serve

EXIT_INTERRUPTED = 130
# click >= 8.2: a group run without its subcommand raises this, its message the whole help text
_NO_ARGS_IS_HELP: type[click.UsageError] | tuple[()] = getattr(click.exceptions, "NoArgsIsHelpError", ())


class RecallKitGroup(click.Group):
    """The top group: a reader that went away (``| head``) ends any command quietly, with status 0."""

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


bench.add_command(latency)
for _command in (
    list_memories, query, watch, add, show, rm, validate, stats, doctor, config, enrich, learned, cache, bench, serve,
    hook, mcp,
):
    cli.add_command(_command)


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
