"""Shared by the commands: one-line errors and small number formatting."""

from __future__ import annotations

import math
from typing import IO, Any

import click

from memory_store import RecallKitError, SkippedFile


class InputError(RecallKitError, click.ClickException):
    """Bad input or configuration: one line on stderr, exit status 2."""

    exit_code = 2

    def show(self, file: IO[Any] | None = None) -> None:
        from recall_kit_cli._output import clean, echo

        echo(f"recall-kit: {clean(self.format_message())}", err=True)


class ModelUnavailable(RecallKitError, click.ClickException):
    """``--require-model`` and no model answer (none configured, or it failed): the fast result was
    shown, exit status 3."""

    exit_code = 3

    def show(self, file: IO[Any] | None = None) -> None:
        from recall_kit_cli._output import clean, echo

        echo(f"recall-kit: {clean(self.format_message())}", err=True)


def parse_number_list(text: str, option: str) -> list[float]:
    """`40,250,600` -> [40.0, 250.0, 600.0]; InputError unless every item is a finite number >= 0."""
    try:
        values = [float(item) for item in text.split(",") if item.strip()]
    except ValueError:
        raise InputError(f"{option} takes comma-separated numbers, got {text!r}") from None
    if not values or not all(0 <= value < math.inf for value in values):  # NaN fails both tests
        raise InputError(f"{option} needs at least one number, none negative or infinite; got {text!r}")
    return values


def error_ref(err: SkippedFile) -> str:
    """A skipped file's ref; a root itself (missing, say) is named by its label alone, not label//path."""
    return err.scope if err.path.startswith("/") else err.ref


def error_line(err: SkippedFile) -> str:
    """``ref: reason``, both cleaned; a missing root also shows its path."""
    from recall_kit_cli._output import clean

    where = f" ({err.path})" if err.path.startswith("/") else ""
    return f"{clean(error_ref(err))}{clean(where)}: {clean(err.reason)}"
