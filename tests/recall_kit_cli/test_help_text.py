"""Every help page at an 80-column terminal shows every text whole: no command's line in a list is
shortened, no word or option is broken across lines; and the commands' table agrees with the
commands it loads."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator

import click
import pytest

from recall_kit_cli._app import COMMANDS, cli
from recall_kit_cli._help import FIRST_SENTENCE, HelpCommand, HelpGroup, wrap

WIDTH = 80


def command_paths() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command and group of the CLI, the top group first, each with its path of names."""
    def walk(path: tuple[str, ...], command: click.Command) -> Iterator[tuple[tuple[str, ...], click.Command]]:
        yield path, command
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None, (path, name)
                yield from walk((*path, name), sub)

    yield from walk((), cli)


PATHS = list(command_paths())


def help_page(path: tuple[str, ...], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    assert cli.main(args=[*path, "--help"], prog_name="recall-kit", standalone_mode=False) == 0
    return capsys.readouterr().out


def flat(text: str) -> str:
    """Text as words: what is shown whole reads the same however it was wrapped."""
    return " ".join(text.replace("\b", " ").split())


def written_help(command: click.Command) -> list[str]:
    """Every text the page must show whole: the command's help and each visible option's (the top
    group names its two options on one line, without their help)."""
    texts = [command.help or ""]
    if command is not cli:
        texts += [param.help for param in command.params if isinstance(param, click.Option) and param.help and not param.hidden]
    return [t for t in texts if t.strip()]


@pytest.mark.parametrize(("path", "command"), PATHS, ids=[" ".join(p) or "recall-kit" for p, _ in PATHS])
def test_a_help_page_shows_every_text_whole_and_fits_80_columns(
    path: tuple[str, ...], command: click.Command, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    page = help_page(path, capsys, monkeypatch)
    shown = flat(page)
    for text in written_help(command):
        assert flat(text) in shown, f"cut: {text!r}\n{page}"
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            line = COMMANDS[name].summary if not path else command.get_command(ctx, name).get_short_help_str(FIRST_SENTENCE)  # type: ignore[union-attr]
            assert flat(f"{name} {line}") in shown, f"{name}'s line is cut:\n{page}"
    assert not re.search(r"\w\.\.\.|\w-\n", page), page  # nothing shortened ("over..."), no line ends inside a word
    too_wide = [line for line in page.splitlines() if len(line) > WIDTH and " " in line.strip()]
    assert too_wide == [], page


@pytest.mark.parametrize(("path", "command"), PATHS, ids=[" ".join(p) or "recall-kit" for p, _ in PATHS])
def test_every_command_formats_its_help_without_cutting(path: tuple[str, ...], command: click.Command) -> None:
    # a command made with click's own classes would wrap at hyphens and shorten its list again
    assert isinstance(command, (HelpCommand, HelpGroup)), f"recall-kit {' '.join(path)}: use cls=HelpCommand or HelpGroup"


def test_each_registered_command_is_the_one_its_module_defines_and_its_line_fits_the_list() -> None:
    width = WIDTH - 2 - 2 - max(map(len, COMMANDS)) - 2  # click's margin, the list's indent, the names, the gap
    for name, entry in COMMANDS.items():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert isinstance(command, click.Command) and command.name == name
        assert len(entry.summary) <= width, f"{name}: its line in `recall-kit --help` takes two lines; say it in {width}"


def test_the_top_level_help_lists_every_command_of_the_table(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    page = help_page((), capsys, monkeypatch)
    listed = [line.split()[0] for line in page.split("Commands:\n", 1)[1].splitlines() if line.strip()]
    assert listed == sorted(COMMANDS)


@pytest.mark.parametrize(("text", "width", "lines"), [
    ("Example: recall-kit bench replay DIR --no-enrichment", 44, ["Example: recall-kit bench replay DIR", "--no-enrichment"]),
    ("a " + "x" * 30 + " b", 10, ["a", "x" * 30, "b"]),  # a word longer than the line stays whole
    ("\b\nExample:\n  recall-kit query 'x'", 10, ["Example:", "  recall-kit query 'x'"]),  # an example block as written
    ("one\n\ntwo", 40, ["one", "", "two"]),
])
def test_wrapping_breaks_lines_at_spaces_only(text: str, width: int, lines: list[str]) -> None:
    assert wrap(text, width, paragraphs=True) == lines
