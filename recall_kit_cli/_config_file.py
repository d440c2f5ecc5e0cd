"""The settings a command runs with, loaded by ``recall_kit.settings.load_settings``: the user's
file and the project file are read once per command (kept in the click context), every value
checked and bounded there, and each warning (an unknown key, a key an untrusted project file may
not set) printed once on stderr.

Roots, highest precedence first: ``--root`` arguments, ``RECALL_KIT_ROOTS`` (os.pathsep-separated),
``roots = [...]`` in the user's file, then in the project file ``./recall-kit.toml`` (relative paths
are relative to their file; never ``/`` or the home folder, from any of them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click

from memory_store import MemoryStore, MemoryStoreError
from recall_kit import ConfigError, SelectorConfig
from recall_kit.settings import CONFIG_FILE_NAME, ROOTS_ENV, Settings, SettingsFiles, load_settings, read_settings_files
from recall_kit_cli._format import InputError
from recall_kit_cli._output import warn

NO_ROOT = f"no memory root: pass --root DIR, set {ROOTS_ENV}, or put roots = [...] in {CONFIG_FILE_NAME}"
# how each setting is spelled as an option, for the one line naming where a bad value came from
OPTION_NAMES = {"roots": "--root", "base_url": "--base-url", "model": "--model", "timeout": "--model-timeout",
                "idle_timeout": "--idle-timeout", "learn": "--learn",
                "trail": "--trail/--no-trail", "trail_prompts": "--trail-prompts"}
_FILES_KEY, _WARNED_KEY = "recall_kit.settings_files", "recall_kit.settings_warned"


@dataclass(frozen=True, slots=True)
class Roots:
    """The memory folders to use and where that list came from."""

    paths: tuple[str, ...]
    source: str


def load(*, lenient: bool = False, **arguments: Any) -> Settings:
    """Every setting, with ``arguments`` (setting name -> option value, None when not given) first.
    The files are read on the first call of a command; later calls resolve from what was read.
    InputError in one line for the first setting (or file) that cannot be used, whichever the
    command needs: a bad value is said at once, by every command. With ``lenient`` (for `recall-kit
    config`), nothing raises and each setting carries its problem."""
    meta = _meta()
    files: SettingsFiles | None = meta.get(_FILES_KEY)
    if files is None:
        files = meta[_FILES_KEY] = read_settings_files()
    settings = load_settings(arguments, labels=OPTION_NAMES, files=files)
    if not meta.get(_WARNED_KEY):
        meta[_WARNED_KEY] = True
        for line in settings.warnings:
            warn(line)
    return settings if lenient else require(settings)


def require(settings: Settings, *names: str) -> Settings:
    """``settings`` when the ones named (and the files) can be used; else InputError in one line."""
    try:
        return settings.required(*names)
    except ConfigError as exc:
        raise InputError(str(exc)) from None


def _meta() -> dict[str, Any]:
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().meta if ctx is not None else {}


def roots_of(settings: Settings) -> Roots:
    """The roots of loaded settings; InputError naming every way to give one when none is set."""
    if settings.roots.value is None:
        raise InputError(NO_ROOT)
    return Roots(settings.roots.value, settings.roots.source)


def resolve_roots(given: tuple[str, ...]) -> Roots:
    """The roots a command works on (``given``: its --root options)."""
    return roots_of(load(roots=given))


def selector_config(
    *, base_url: str | None = None, model: str | None = None, timeout: float | None = None, lenient: bool = False
) -> SelectorConfig:
    """The model endpoint; a bad value is a one-line error that names its real source (with
    ``lenient``, it is described in ``problems`` instead)."""
    return load(base_url=base_url, model=model, timeout=timeout, lenient=lenient).selector


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
