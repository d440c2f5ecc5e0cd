"""Settings the commands share: the default memory roots, the checks on recall-kit.toml, and the
model settings every command resolves the same way (``recall_kit.load_selector_config``).

Roots, highest precedence first: ``--root`` arguments, ``RECALL_KIT_ROOTS`` (os.pathsep-separated),
then ``roots = [...]`` at the top of the project file ``./recall-kit.toml`` (relative paths are
relative to that file; roots need no trust, the model's endpoint does).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from memory_store import MemoryStore, MemoryStoreError
from recall_kit import CONFIG_FILE_NAME, ConfigError, SelectorConfig, load_selector_config, read_config_toml
from recall_kit_cli._format import InputError
from recall_kit_cli._output import warn

ROOTS_ENV = "RECALL_KIT_ROOTS"
KNOWN_KEYS = {"": ("roots", "learn", "selector"), "selector": ("base_url", "model", "api_key", "timeout")}
NO_ROOT = f"no memory root: pass --root DIR, set {ROOTS_ENV}, or put roots = [...] in {CONFIG_FILE_NAME}"

_warned: set[Path] = set()


@dataclass(frozen=True, slots=True)
class Roots:
    """The memory folders to use and where that list came from."""

    paths: tuple[str, ...]
    source: str


def config_file() -> Path | None:
    path = Path.cwd() / CONFIG_FILE_NAME
    return path if path.is_file() else None


def read_config_file() -> tuple[Path | None, dict[str, Any]]:
    """``./recall-kit.toml`` and its content ({} when absent); unknown keys warned about once."""
    path = config_file()
    if path is None:
        return None, {}
    try:
        data = read_config_toml(path)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    if path not in _warned:
        _warned.add(path)
        for line in unknown_key_warnings(data, path):
            warn(line)
    return path, data


def unknown_key_warnings(data: dict[str, Any], path: Path) -> list[str]:
    """One line per key recall-kit does not know, with the closest known key when there is one."""
    lines = []
    for table, known in KNOWN_KEYS.items():
        section = data if not table else data.get(table, {})
        if not isinstance(section, dict):
            continue
        where = f"[{table}] " if table else ""
        for key in section:
            if key in known or (not table and key in KNOWN_KEYS):
                continue
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
            lines.append(f"{path}: unknown key {where}{key!r} ignored{hint}")
    return lines


def resolve_roots(given: tuple[str, ...]) -> Roots:
    """The roots a command works on; InputError naming every way to give one when none is set."""
    if given:
        return Roots(tuple(given), "argument --root")
    env = os.environ.get(ROOTS_ENV, "")
    from_env = tuple(p for p in env.split(os.pathsep) if p)
    if from_env:
        return Roots(from_env, f"environment variable {ROOTS_ENV}")
    path, data = read_config_file()
    value = data.get("roots")
    if path is None or value is None:
        raise InputError(NO_ROOT)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise InputError(f"{path}: roots must be a non-empty list of folder paths")
    base = path.parent
    return Roots(tuple(str(base / os.path.expanduser(v)) for v in value), f"project file {path} roots")


def selector_config(
    *, base_url: str | None = None, model: str | None = None, timeout: float | None = None, lenient: bool = False
) -> SelectorConfig:
    """The model endpoint; a bad value is a one-line error that names its real source (with
    ``lenient``, it is described in ``problems`` instead)."""
    if timeout is not None and not (timeout > 0 and timeout != float("inf")):
        raise InputError(f"--model-timeout must be a positive number of seconds, got {timeout:g}")
    try:
        read_config_file()  # warns about unknown keys before the engine reads the same file
    except InputError:
        if not lenient:
            raise
    try:
        return load_selector_config(base_url=base_url, model=model, timeout=timeout, lenient=lenient)
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def model_off_reason(config: SelectorConfig) -> str | None:
    """Why the model stage cannot run with ``config``, in one line; None when it can."""
    if config.refusal:
        return config.refusal
    if not config.configured:
        return (
            f"no model configured (missing {' and '.join(config.missing())}; use --base-url/--model, "
            f"RECALL_KIT_BASE_URL/RECALL_KIT_MODEL, or [selector] in {CONFIG_FILE_NAME})"
        )
    return None


root_option = click.option(
    "--root", "roots", multiple=True, metavar="DIR",
    help="Memory folder (repeatable; default: see `recall-kit config`).",
)


def open_store(roots: tuple[str, ...]) -> MemoryStore:
    """A one-shot store over the resolved roots; InputError for a missing root."""
    try:
        return MemoryStore.open(*resolve_roots(roots).paths, watch=False)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
