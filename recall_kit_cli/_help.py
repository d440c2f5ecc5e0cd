"""Help pages that never cut a word or an option: click's wrapping breaks ``--no-enrichment`` at its
hyphen and its command lists shorten each line with "...", so every command and group of the CLI
uses the classes here instead.

``HelpCommand`` and ``HelpGroup`` format with ``HelpFormatter`` (lines break at spaces only, a word
longer than the line stays whole); a ``HelpGroup`` lists each subcommand's whole first sentence,
wrapped, and makes its subcommands ``HelpCommand`` and ``HelpGroup`` too.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

import click

FIRST_SENTENCE = 10**6  # a limit no short help reaches: click then gives the whole first sentence
COLUMN_GAP = 2  # between a term and its text, as click's lists have it


def wrap(text: str, width: int, first: str = "", rest: str = "", *, paragraphs: bool = False) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken at spaces only; a line starting a
    ``\\b`` paragraph is kept as written (click's mark for an example), other paragraphs are refilled."""
    if not paragraphs:
        return _fill(text, width, first, rest)
    lines: list[str] = []
    for block in _paragraphs(text.expandtabs()):
        if lines:
            lines.append("")
        lead = first if not lines else rest
        indent = " " * (len(block[0]) - len(block[0].lstrip()))
        if block[0].strip() == "\b":
            lines += [(lead if n == 0 else rest) + indent + line for n, line in enumerate(block[1:])]
        else:
            lines += _fill(" ".join(line.strip() for line in block), width, lead + indent, rest + indent)
    return lines


def _fill(text: str, width: int, first: str, rest: str) -> list[str]:
    wrapper = textwrap.TextWrapper(
        width=max(width, len(first) + 1, len(rest) + 1), initial_indent=first, subsequent_indent=rest,
        replace_whitespace=False, break_on_hyphens=False, break_long_words=False,
    )
    return wrapper.wrap(text) or [first.rstrip()]


def _paragraphs(text: str) -> Iterable[list[str]]:
    block: list[str] = []
    for line in text.splitlines():
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


class HelpFormatter(click.HelpFormatter):
    """click's help layout, with lines broken at spaces only."""

    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        """The usage line, continued under the first argument when it is long."""
        prefix = "Usage: " if prefix is None else prefix
        head = f"{prefix:>{self.current_indent}}{prog}"
        if not args:
            self.write(head + "\n")
            return
        width = self.width - self.current_indent
        if width >= len(head) + 21:  # the arguments fit beside the program's name
            lines = _fill(args, width, head + " ", " " * (len(head) + 1))
        else:
            indent = " " * (max(self.current_indent, len(prefix)) + 4)
            lines = [head, *_fill(args, width, indent, indent)]
        self.write("\n".join(lines) + "\n")

    def write_text(self, text: str) -> None:
        """A block of paragraphs at the current indent."""
        indent = " " * self.current_indent
        self.write("\n".join(wrap(text, self.width, indent, indent, paragraphs=True)) + "\n")

    def write_dl(self, rows: Iterable[tuple[str, str]], col_max: int = 30, col_spacing: int = COLUMN_GAP) -> None:
        """Terms and their texts, the texts in a column wrapped beside the terms."""
        rows = list(rows)
        if not rows:
            return
        term_width = min(max(len(term) for term, _ in rows), col_max)
        column = self.current_indent + term_width + col_spacing
        text_width = max(self.width - column, 10)
        for term, text in rows:
            head = " " * self.current_indent + term
            lines = wrap(text, text_width, paragraphs=True) if text else []
            if len(term) > term_width and lines:  # a long term: its text starts on the next line
                self.write(head + "\n")
                head = ""
            first, *rest = lines or [""]
            self.write((f"{head:<{column}}{first}" if first else head).rstrip() + "\n")
            for line in rest:
                self.write((" " * column + line).rstrip() + "\n")


class HelpContext(click.Context):
    """A context whose help pages use ``HelpFormatter``."""

    formatter_class = HelpFormatter


class HelpCommand(click.Command):
    """A command whose help page never cuts a word or an option."""

    context_class = HelpContext


class HelpGroup(click.Group):
    """A group whose pages and command list never cut a word; its subcommands are alike."""

    context_class = HelpContext
    command_class = HelpCommand
    group_class = type  # click: a subgroup of this group's own class

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Each visible subcommand with its whole first sentence, wrapped, never shortened."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(FIRST_SENTENCE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
