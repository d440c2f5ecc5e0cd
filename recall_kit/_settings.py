"""The settings loader: every setting declared once, each file read once, trust applied to every key.

Each setting is one ``Declaration`` in ``DECLARATIONS``: its name and table in recall-kit.toml, its
environment variable, how a value is checked and bounded, its default, and whether an untrusted
project file may set it. ``load_settings`` reads the user's file and the project file once (or
takes them already read, as ``SettingsFiles``), then resolves every declared setting the same way,
highest precedence first: an argument; its ``RECALL_KIT_*`` variable; the user's own file; its
generic ``OPENAI_*`` variable (set for every OpenAI client, so less specific than a file written
for recall-kit); the project file ``./recall-kit.toml``. The first value given wins; a bad one is
a problem in one line naming where it came from, raised as a ConfigError by ``Settings.required``.

An untrusted project file (one the user has not trusted as it is now, see ``_config_files``) may
set only what ``UNTRUSTED_FILE_MAY_SET`` lists; any other key in it is ignored with a warning, and
the base_url it names receives nothing (``SelectorConfig.refusal``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import platformdirs

from memory_store import broad_root_refusal
from recall_kit._config import DEFAULT_TIMEOUT_S, Raw, SelectorConfig, resolve_selector
from recall_kit._config_files import TRUST_LABELS, ConfigFile, SettingsFiles, read_settings_files
from recall_kit._errors import ConfigError
from recall_kit.limits import DAEMON_ENRICH_CALLS_PER_MINUTE, MAX_MODEL_TIMEOUT_S

T = TypeVar("T")

DEFAULT_IDLE_TIMEOUT_S = 30 * 60.0
ROOTS_ENV = "RECALL_KIT_ROOTS"
LEARN_ENV = "RECALL_KIT_LEARN"
CACHE_DIR_ENV = "RECALL_KIT_CACHE_DIR"
IDLE_TIMEOUT_ENV = "RECALL_KIT_IDLE_TIMEOUT"
TRAIL_ENV = "RECALL_KIT_TRAIL"
TRAIL_PROMPTS_ENV = "RECALL_KIT_TRAIL_PROMPTS"
AGENT_KEYWORDS_ENV = "RECALL_KIT_AGENT_KEYWORDS"
DAEMON_ENRICH_ENV = "RECALL_KIT_DAEMON_ENRICH"
ENRICH_RATE_ENV = "RECALL_KIT_ENRICH_CALLS_PER_MINUTE"
MAX_ENRICH_CALLS_PER_MINUTE = 6_000.0  # ten a second: past it a local server is the bound, not this
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """A resolved setting: its value, where the value came from, and what is wrong with it, if anything."""

    value: T
    source: str  # "default", "not set", or the origin of the value used
    problem: str | None = None  # why the value given could not be used (then ``value`` is the default)


def _seconds(raw: Raw, name: str, bound: float | None) -> float:
    try:
        seconds = float(raw.value) if not isinstance(raw.value, bool) else math.nan
    except (TypeError, ValueError):
        raise ConfigError(f"{raw.origin}: {name} must be a number of seconds, got {raw.value!r}") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigError(f"{raw.origin}: {name} must be a positive, finite number of seconds, got {raw.value!r}")
    if bound is not None and seconds > bound:
        raise ConfigError(f"{raw.origin}: {name} must be at most {bound:g} seconds, got {raw.value!r}")
    return seconds


def _boolean(raw: Raw, name: str) -> bool:
    if isinstance(raw.value, bool):
        return raw.value
    if raw.text and isinstance(raw.value, str) and raw.value.strip().lower() in _TRUE + _FALSE:
        return raw.value.strip().lower() in _TRUE
    shown = repr(raw.value[:40]) if isinstance(raw.value, str) else repr(raw.value)
    wanted = "1 or 0 (true or false)" if raw.text else "true or false (a TOML boolean, unquoted)"
    raise ConfigError(f"{raw.origin}: {name} must be {wanted}, got {shown}")


def _rate(raw: Raw, name: str) -> float:
    try:
        rate = float(raw.value) if not isinstance(raw.value, bool) else math.nan
    except (TypeError, ValueError):
        rate = math.nan
    if not (0 < rate <= MAX_ENRICH_CALLS_PER_MINUTE):
        raise ConfigError(f"{raw.origin}: {name} must be a number of calls above 0 and at most "
                          f"{MAX_ENRICH_CALLS_PER_MINUTE:g}, got {raw.value!r}")
    return rate


def _text(raw: Raw, name: str) -> str | None:
    if raw.value is None or raw.value == "":
        return None
    if not isinstance(raw.value, str):
        raise ConfigError(f"{raw.origin}: {name} must be a string")
    return raw.value


def _roots(raw: Raw, name: str) -> tuple[str, ...]:
    value = raw.value
    if raw.text and isinstance(value, str):
        value = [p for p in value.split(os.pathsep) if p]
    if (not isinstance(value, (list, tuple)) or not value
            or not all(isinstance(v, str) and v for v in value)):
        raise ConfigError(f"{raw.origin}: {name} must be a non-empty list of folder paths")
    paths = tuple(str(raw.base / os.path.expanduser(v)) if raw.base else v for v in value)
    for given, path in zip(value, paths):
        refusal = broad_root_refusal(path)
        if refusal is None and not raw.users and raw.base is not None:
            refusal = _outside_refusal(given, path, raw.base)
        if refusal is not None:
            raise ConfigError(f"{raw.origin}: {refusal}")
    return paths


def _outside_refusal(given: str, path: str, folder: Path) -> str | None:
    """Why an untrusted project file may not name ``path`` as a root: it lies outside the file's own folder
    (``../private-notes``, ``~/notes``, or a symlink in the folder that leads out), or None."""
    real, home = os.path.realpath(path), os.path.realpath(folder)
    if real == home or real.startswith(home.rstrip(os.sep) + os.sep):
        return None
    return (f"root {given!r} is outside {home}, and a project file you have not trusted may name only "
            f"folders inside its own; pass it with --root, or trust the file")


def _folder(raw: Raw, name: str) -> Path:
    text = _text(raw, name)
    if text is None:
        raise ConfigError(f"{raw.origin}: {name} must be a folder path")
    path = Path(os.path.expanduser(text))
    if not path.is_absolute():
        raise ConfigError(f"{raw.origin}: {name} must be an absolute path, got {text!r}")
    return path


@dataclass(frozen=True, slots=True)
class Declaration:
    """One setting, declared once: where it may be given, how it is checked, and its default."""

    name: str
    table: str | None  # its table in recall-kit.toml ("" for the top level); None: files cannot set it
    check: Callable[[Raw, str], Any]  # the value, checked and bounded; ConfigError in one line
    env: str | None = None  # its RECALL_KIT_* variable
    generic_env: str | None = None  # its OPENAI_* variable (below the user's file)
    untrusted_file: bool = False  # whether an untrusted project file may set it
    default: Callable[[], Any] = lambda: None
    help: str = ""

    @property
    def key(self) -> str:
        """How recall-kit.toml spells it: ``roots``, ``[selector] model``."""
        return f"[{self.table}] {self.name}" if self.table else self.name


# A new setting (the hook's roots, say, in a [hook] table) is one more Declaration here: the loader,
# the unknown-key check and the trust list take it from this tuple; `recall-kit config` adds its row.
DECLARATIONS: tuple[Declaration, ...] = (
    Declaration("roots", "", _roots, env=ROOTS_ENV, untrusted_file=True,
                help="memory folders (a file's relative paths are relative to it); never / or the home folder"),
    Declaration("base_url", "selector", lambda r, n: _text(r, n), env="RECALL_KIT_BASE_URL",
                generic_env="OPENAI_BASE_URL", untrusted_file=True,
                help="OpenAI-compatible endpoint; an untrusted project file's gets nothing until trusted"),
    Declaration("model", "selector", lambda r, n: _text(r, n), env="RECALL_KIT_MODEL", untrusted_file=True,
                help="model name at that endpoint"),
    Declaration("api_key", "selector", lambda r, n: _text(r, n), env="RECALL_KIT_API_KEY",
                generic_env="OPENAI_API_KEY", help="sent only to an endpoint from the same or a more trusted source"),
    Declaration("timeout", "selector", lambda r, n: _seconds(r, n, MAX_MODEL_TIMEOUT_S), env="RECALL_KIT_TIMEOUT",
                untrusted_file=True, default=lambda: DEFAULT_TIMEOUT_S,
                help=f"seconds a model call may take, at most {MAX_MODEL_TIMEOUT_S:g}"),
    Declaration("learn", "", _boolean, env=LEARN_ENV, default=lambda: False,
                help="learn from the model's refined selections (opt-in)"),
    Declaration("cache_dir", None, _folder, env=CACHE_DIR_ENV,
                default=lambda: Path(platformdirs.user_cache_dir("recall-kit")), help="the per-user index cache folder"),
    Declaration("idle_timeout", None, lambda r, n: _seconds(r, n, None), env=IDLE_TIMEOUT_ENV,
                default=lambda: DEFAULT_IDLE_TIMEOUT_S, help="seconds `recall-kit serve` waits for a request"),
    Declaration("trail", "", _boolean, env=TRAIL_ENV, default=lambda: True,
                help="the daemon keeps the trail `recall-kit hook log` reads (opt-out)"),
    Declaration("trail_prompts", "", _boolean, env=TRAIL_PROMPTS_ENV, default=lambda: False,
                help="the trail keeps each prompt's first characters too (opt-in)"),
    # Neither may come from a project file nobody trusted: one would make a cloned repo decide what
    # the user's agent is told each session, the other whether the user's model is sent memories.
    Declaration("agent_keywords", "", _boolean, env=AGENT_KEYWORDS_ENV, default=lambda: True,
                help="the hook asks the agent to write keywords and usage_scenarios into the memories it saves"),
    Declaration("daemon_enrich", "", _boolean, env=DAEMON_ENRICH_ENV, default=lambda: True,
                help="with a trusted model, the daemon enriches the memories it watches (opt-out)"),
    Declaration("enrich_calls_per_minute", "", _rate, env=ENRICH_RATE_ENV, default=lambda: DAEMON_ENRICH_CALLS_PER_MINUTE,
                help=f"the daemon's enrichment calls a minute, at most {MAX_ENRICH_CALLS_PER_MINUTE:g}"),
)
BY_NAME: Mapping[str, Declaration] = {d.name: d for d in DECLARATIONS}
# the one list of what a project file nobody trusted may set (docs/security.md says the same)
UNTRUSTED_FILE_MAY_SET: tuple[str, ...] = tuple(d.name for d in DECLARATIONS if d.untrusted_file)
_TABLES = {"", *(d.table for d in DECLARATIONS if d.table)}


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting as loaded for one command: each with its value, its source and any problem."""

    roots: Setting[tuple[str, ...] | None]
    selector: SelectorConfig  # base_url, model, api_key, timeout, with their sources and problems
    learn: Setting[bool]
    cache_dir: Setting[Path]
    idle_timeout: Setting[float]
    trail: Setting[bool]
    trail_prompts: Setting[bool]
    agent_keywords: Setting[bool]
    daemon_enrich: Setting[bool]
    enrich_calls_per_minute: Setting[float]
    files: SettingsFiles
    warnings: tuple[str, ...] = ()  # one line each: unknown keys, keys an untrusted file may not set

    problems: Mapping[str, str] = field(default_factory=dict)  # setting or file -> why it could not be used

    def required(self, *names: str) -> Settings:
        """These settings, checked: ConfigError in one line for the first of them (or of the files
        they come from) that could not be used. ``names`` default to every setting."""
        wanted = set(names or BY_NAME) | {"user_config", "config_file"}
        for name, problem in self.problems.items():
            if name in wanted:
                raise ConfigError(problem)
        return self

    def __getitem__(self, name: str) -> Setting[Any]:
        """Any declared setting by name, the selector's four included (its key as given, never shown)."""
        if name in _SELECTOR:
            value = getattr(self.selector, name)
            default = "default" if name == "timeout" else "not set"
            return Setting(value, self.selector.sources.get(name, default), self.problems.get(name))
        setting: Setting[Any] = getattr(self, name)
        return setting


def load_settings(
    arguments: Mapping[str, Any] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    files: SettingsFiles | None = None,
    project_path: str | os.PathLike[str] | None = None,
) -> Settings:
    """Every declared setting, resolved.

    ``arguments`` maps a setting's name to the value given for it as an argument (None: not given),
    ``labels`` how each was spelled there ("--model-timeout"; default the name). ``files`` are the
    files already read, else they are read now, once (the project file is ``project_path``, default
    ``./recall-kit.toml``). Never raises: a value or file that cannot be used is in ``problems``
    (the setting keeps its default); ``Settings.required`` raises for the ones a caller needs."""
    env = os.environ if environ is None else environ
    files = files if files is not None else read_settings_files(env, project_path)
    given, spelled = dict(arguments or {}), dict(labels or {})
    problems = dict(files.problems)
    warnings = unknown_keys(files.user, user=True) + unknown_keys(files.project, user=False)
    tables = {"user": _tables(files.user, "user_config", problems), "project": _tables(files.project, "config_file", problems)}
    trusted = files.trust == "trusted"

    def raws(decl: Declaration) -> list[Raw]:
        """Every value given for ``decl``, highest precedence first."""
        found = []
        if given.get(decl.name) not in (None, "", ()):
            found.append(Raw(given[decl.name], f"argument {spelled.get(decl.name, decl.name)}", text=False))
        if decl.env and env.get(decl.env, "").strip():
            found.append(Raw(env[decl.env], f"environment variable {decl.env}", text=True))
        user_value = tables["user"].get(decl.table or "", {}).get(decl.name) if decl.table is not None else None
        if user_value is not None and files.user is not None:
            found.append(Raw(user_value, f"user file {files.user_path} {decl.key}", False, files.user.path.parent))
        if decl.generic_env and env.get(decl.generic_env, "").strip():
            found.append(Raw(env[decl.generic_env], f"environment variable {decl.generic_env}", text=True))
        value = tables["project"].get(decl.table or "", {}).get(decl.name) if decl.table is not None else None
        if value is not None and files.project is not None and files.trust is not None:
            path = files.project_path
            if trusted or decl.untrusted_file:
                origin = f"project file {path} ({TRUST_LABELS[files.trust]}) {decl.key}"
                found.append(Raw(value, origin, False, files.project.path.parent, users=trusted))
            else:
                warnings.append(f"{path}: {decl.key} ignored: a project file you have not trusted may set only "
                                f"{', '.join(UNTRUSTED_FILE_MAY_SET)} (`recall-kit config trust {path}` trusts it)")
        return found

    def resolve(decl: Declaration, found: list[Raw]) -> Setting[Any]:
        if not found:
            default = decl.default()
            return Setting(default, "default" if default is not None else "not set")
        try:
            return Setting(decl.check(found[0], decl.name), found[0].origin)
        except ConfigError as exc:
            problems[decl.name] = str(exc)
            return Setting(decl.default(), found[0].origin, str(exc))

    candidates = {d.name: raws(d) for d in DECLARATIONS}
    selector = resolve_selector(
        {name: candidates[name] for name in _SELECTOR}, lambda name, raw: BY_NAME[name].check(raw, name),
        files=files, file_problems=problems,
    )
    problems.update(selector.problems)
    rest = {name: resolve(BY_NAME[name], found) for name, found in candidates.items() if name not in _SELECTOR}
    return Settings(
        roots=rest["roots"], selector=selector, learn=rest["learn"], cache_dir=rest["cache_dir"],
        idle_timeout=rest["idle_timeout"], trail=rest["trail"], trail_prompts=rest["trail_prompts"],
        agent_keywords=rest["agent_keywords"], daemon_enrich=rest["daemon_enrich"],
        enrich_calls_per_minute=rest["enrich_calls_per_minute"], files=files, warnings=tuple(warnings), problems=problems,
    )


_SELECTOR = ("base_url", "api_key", "model", "timeout")  # resolved together: which key goes where


def _tables(file: ConfigFile | None, which: str, problems: dict[str, str]) -> dict[str, Mapping[str, Any]]:
    """A file's tables by name ("" for its top level); a declared table that is not one is a problem of ``which``."""
    if file is None:
        return {}
    tables: dict[str, Mapping[str, Any]] = {"": file.data}
    for name in sorted(_TABLES - {""}):
        table = file.data.get(name, {})
        if not isinstance(table, dict):
            problems.setdefault(which, f"{file.path}: [{name}] must be a table")
            table = {}
        tables[name] = table
    return tables


def unknown_keys(file: ConfigFile | None, *, user: bool) -> list[str]:
    """One line per key of ``file`` recall-kit does not know, or finds in the wrong table, naming
    the key it most likely meant (``user``: the user's own file, which also holds [[trusted]])."""
    if file is None:
        return []
    declared = {d.key: d for d in DECLARATIONS if d.table is not None}
    lines = []
    for table in sorted(_TABLES):
        section = file.data if not table else file.data.get(table, {})
        if not isinstance(section, dict):
            continue
        for key in section:
            spelled = f"[{table}] {key}" if table else key
            if spelled in declared or (not table and (key in _TABLES or (user and key == "trusted"))):
                continue
            import difflib  # only a file with a misspelt key needs it

            if not table and isinstance(section[key], dict):  # a table of its own: [selectr]
                close = [f"[{t}]" for t in difflib.get_close_matches(key, sorted(_TABLES - {""}), n=1, cutoff=0.6)]
                what = f"table [{key}]"
            else:
                same_name = [d.key for d in DECLARATIONS if d.name == key and d.table is not None]
                here = [d.name for d in DECLARATIONS if d.table == table]
                near = difflib.get_close_matches(key, here, n=1, cutoff=0.6) or difflib.get_close_matches(
                    key, [d.name for d in declared.values()], n=1, cutoff=0.6)
                close = same_name or [BY_NAME[n].key for n in near]
                what = f"key [{table}] {key!r}" if table else f"key {key!r} at the top level"
            hint = f"; did you mean {close[0]}?" if close else f"; known: {', '.join(declared)}"
            lines.append(f"{file.path}: unknown {what} ignored{hint}")
    return lines


def environment_setting(name: str, environ: Mapping[str, str] | None = None) -> Setting[Any]:
    """One declared setting from its ``RECALL_KIT_*`` variable alone (no file read), else its default:
    the one way ``open_recaller`` reads the environment (``learn`` when it is not given, the cache
    folder when none is given). ConfigError in one line for a value that cannot be used."""
    decl = BY_NAME[name]
    env = os.environ if environ is None else environ
    if decl.env and env.get(decl.env, "").strip():
        origin = f"environment variable {decl.env}"
        return Setting(decl.check(Raw(env[decl.env], origin, text=True), name), origin)
    return Setting(decl.default(), "default")


def load_selector_config(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,
    config_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    lenient: bool = False,
) -> SelectorConfig:
    """The model endpoint as ``load_settings`` resolves it (see there): arguments, ``RECALL_KIT_*``,
    the user's file, ``OPENAI_*``, the project file (``config_path``, default ``./recall-kit.toml``).
    Raises ConfigError only for invalid values or an unreadable file, unless ``lenient``."""
    arguments = {"base_url": base_url, "model": model, "api_key": api_key, "timeout": timeout}
    settings = load_settings(arguments, environ=environ, project_path=config_path)
    return settings.selector if lenient else settings.required(*_SELECTOR).selector
