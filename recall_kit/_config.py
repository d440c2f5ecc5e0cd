"""Where the selector's settings come from, and which endpoint may receive which key.

Each setting, highest precedence first: an argument; ``RECALL_KIT_*``; ``[selector]`` of the user's
own file (``RECALL_KIT_CONFIG``, else ``recall-kit.toml`` in the user's config folder);
``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (set for every OpenAI client, so less specific than a file
written for recall-kit); ``[selector]`` of the project file ``./recall-kit.toml``.

The first four are the user's own. The project file is not, until the user trusts it (see
``_config_files``): it may set the model and the timeout, but the base_url it names receives
nothing, neither a key (the user's or its own) nor the prompts and memories the model stage would
send: the model stage is off for that folder and ``SelectorConfig.refusal`` says why.
"""

from __future__ import annotations

import math
import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import httpx

from recall_kit._config_files import (
    CONFIG_FILE_NAME,
    ConfigFile,
    TrustState,
    read_project_file,
    read_user_file,
    trust_state,
    trusted_files,
    user_config_path,
)
from recall_kit._errors import ConfigError
from recall_kit._secrets import Redactor, clean_api_key, display_url, split_url_credentials

DEFAULT_TIMEOUT_S = 30.0
_TRUST_LABELS: dict[TrustState, str] = {
    "trusted": "trusted", "untrusted": "untrusted", "changed": "untrusted: changed since you trusted it",
}  # as `recall-kit config` and every source string show them


@dataclass(frozen=True, slots=True)
class SelectorConfig:
    """A resolved endpoint. ``api_key`` is kept out of ``repr``."""

    base_url: str | None
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT_S
    config_file: Path | None = None  # the project's recall-kit.toml that was read, if any
    # setting -> where its value came from ("argument base_url", "environment variable RECALL_KIT_MODEL", ...)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)
    user_config_file: Path | None = None  # the user's own recall-kit.toml that was read, if any
    project_trust: TrustState | None = None  # whether the user trusted config_file as it is now
    refusal: str | None = None  # why the model stage is off: its base_url is an untrusted project file's
    # setting -> what is wrong with it; only with load_selector_config(lenient=True), which never raises
    problems: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def configured(self) -> bool:
        """Whether a model can be asked: a base URL and a model name, no key withheld, nothing invalid."""
        return bool(self.base_url and self.model) and self.refusal is None and not self.problems

    @property
    def shown_base_url(self) -> str | None:
        """The base URL with any credentials in it masked: safe to print, log or put in JSON."""
        return display_url(self.base_url)

    @property
    def project_trust_shown(self) -> str | None:
        """``project_trust`` for people: "trusted", "untrusted" or "untrusted: changed since you trusted it"."""
        return None if self.project_trust is None else _TRUST_LABELS[self.project_trust]

    def missing(self) -> list[str]:
        """The settings ``configured`` needs that are unset: "base URL", "model", both or neither."""
        return [name for name, v in (("base URL", self.base_url), ("model", self.model)) if not v]


@dataclass(frozen=True, slots=True)
class _Candidate:
    value: Any
    origin: str
    users: bool  # the user's own setting, or one from a project file the user trusted


def check_base_url(url: str, origin: str) -> str:
    """``url`` when an HTTP client can use it (http or https, a host, a port from 1 to 65535);
    otherwise ConfigError in one line naming ``origin`` and the URL, its credentials masked."""
    shown = display_url(url)
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        redact = Redactor(split_url_credentials(url).secrets)
        problem: str | None = f"it does not parse ({redact(str(exc))})"
    else:
        problem = None
        if parsed.scheme not in ("http", "https"):
            problem = "it must start with http:// or https://"
        elif not parsed.host:
            problem = "it names no host"
        elif parsed.port is not None and not 1 <= parsed.port <= 65535:
            problem = f"port {parsed.port} is out of range (1-65535)"
    if problem:
        raise ConfigError(f"{origin}: {shown} is not a usable base URL: {problem}")
    return url


def _timeout(value: Any, origin: str) -> float:
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{origin}: timeout must be a number of seconds, got {value!r}") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ConfigError(f"{origin}: timeout must be positive, got {value!r}")
    return seconds


def _text(value: Any, origin: str, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{origin}: {name} must be a string")
    return value


def _selector_table(file: ConfigFile | None) -> Mapping[str, Any]:
    table = file.data.get("selector", {}) if file else {}
    if not isinstance(table, dict):
        raise ConfigError(f"{file.path if file else ''}: [selector] must be a table")
    return table


def _key_for(url: _Candidate | None, keys: list[_Candidate]) -> tuple[_Candidate | None, _Candidate | None]:
    """The key sent to ``url`` (the first of the user's own, a trusted project's included), and for
    an untrusted project's url none: the user's key, if any, is then returned second, as withheld."""
    users = [k for k in keys if k.users]  # an untrusted project's own key is never sent anywhere
    first = users[0] if users else None
    return (first, None) if url is None or url.users else (None, first)


def _refusal(withheld: _Candidate | None, url: str, project: Path, trust: TrustState) -> str:
    command = f"`recall-kit config trust {shlex.quote(str(project))}`"
    why = (f"which changed since you trusted it: review it, then run {command}" if trust == "changed"
           else f"which you have not trusted: if you do, run {command}")
    what = f"your API key ({withheld.origin}) is" if withheld else "your prompts are"
    return f"{what} not sent to {display_url(url)}, the base_url of {project}, {why}"


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
    """Resolve the endpoint; raises ConfigError only for invalid values or an unreadable file.

    ``config_path`` is the project file (default ``./recall-kit.toml``, read when it exists); the
    user's own file is ``RECALL_KIT_CONFIG`` of ``environ``, else the one in the user's config folder.
    With ``lenient``, nothing raises: each invalid setting is left unset and described in ``problems``
    (for `recall-kit config`, which shows every other setting).
    """
    env = os.environ if environ is None else environ
    problems: dict[str, str] = {}

    def attempt(setting: str, read: Callable[[], Any]) -> Any:
        try:
            return read()
        except ConfigError as exc:
            if not lenient:
                raise
            problems.setdefault(setting, str(exc))
            return None

    project_path = Path(config_path) if config_path is not None else Path.cwd() / CONFIG_FILE_NAME
    project: ConfigFile | None = None
    if config_path is not None or project_path.is_file():
        project = attempt("config_file", lambda: read_project_file(project_path))
    user_path = user_config_path(env)
    user: ConfigFile | None = attempt("user_config", lambda: read_user_file(user_path))
    trusted: dict[str, str] = attempt("user_config", lambda: trusted_files(user)) or {}
    trust = trust_state(project, trusted) if project is not None else None
    user_table = attempt("user_config", lambda: _selector_table(user)) or {}
    project_table = attempt("config_file", lambda: _selector_table(project)) or {}

    def candidates(name: str, arg: Any, env_name: str, generic_env: str | None = None) -> list[_Candidate]:
        """Every value given for setting ``name``, highest precedence first."""
        found = [
            _Candidate(arg, f"argument {name}", True),
            _Candidate(env.get(env_name), f"environment variable {env_name}", True),
            _Candidate(user_table.get(name), f"user file {user_path} [selector] {name}", True),
        ]
        if generic_env:
            found.append(_Candidate(env.get(generic_env), f"environment variable {generic_env}", True))
        if trust is not None:
            label = _TRUST_LABELS[trust]
            found.append(_Candidate(project_table.get(name), f"project file {project_path} ({label}) [selector] {name}",
                                    trust == "trusted"))
        return [c for c in found if c.value not in (None, "")]

    sources: dict[str, str] = {}

    def resolve(name: str, chosen: _Candidate | None, check: Callable[[Any, str], Any]) -> Any:
        if chosen is None:
            return None
        sources[name] = chosen.origin
        return attempt(name, lambda: check(chosen.value, chosen.origin))

    urls = candidates("base_url", base_url, "RECALL_KIT_BASE_URL", "OPENAI_BASE_URL")
    url = urls[0] if urls else None
    key, withheld = _key_for(url, candidates("api_key", api_key, "RECALL_KIT_API_KEY", "OPENAI_API_KEY"))
    models = candidates("model", model, "RECALL_KIT_MODEL")
    timeouts = candidates("timeout", timeout, "RECALL_KIT_TIMEOUT")

    resolved_url = resolve("base_url", url, lambda v, o: check_base_url(_text(v, o, "base_url") or "", o))
    resolved_model = resolve("model", models[0] if models else None, lambda v, o: _text(v, o, "model"))
    resolved_key = resolve("api_key", key, lambda v, o: clean_api_key(_text(v, o, "api_key"), o))
    resolved_timeout = resolve("timeout", timeouts[0] if timeouts else None, _timeout)
    refusal = None
    if url is not None and not url.users and trust is not None:  # the base_url of an untrusted project file
        if withheld is not None:
            sources["api_key"] = withheld.origin
        refusal = _refusal(withheld, str(url.value), project_path, trust)
    return SelectorConfig(
        base_url=resolved_url,
        model=resolved_model,
        api_key=resolved_key,
        timeout=DEFAULT_TIMEOUT_S if resolved_timeout is None else resolved_timeout,
        config_file=project_path if project is not None else None,
        sources=sources,
        user_config_file=user_path if user is not None else None,
        project_trust=trust,
        refusal=refusal,
        problems=problems,
    )


LEARN_ENV = "RECALL_KIT_LEARN"


def learning_setting(
    *, config_path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> tuple[bool, str]:
    """Whether learning is on, and where that came from: ``RECALL_KIT_LEARN`` (1/true/yes or
    0/false/no), else ``learn = true|false`` at the top of the user's own recall-kit.toml, else of the
    project's; off by default. ConfigError in one line for a value that is not a boolean."""
    env = os.environ if environ is None else environ
    value = env.get(LEARN_ENV)
    if value is not None and value.strip():
        word = value.strip().lower()
        if word in ("1", "true", "yes", "on"):
            return True, f"environment variable {LEARN_ENV}"
        if word in ("0", "false", "no", "off"):
            return False, f"environment variable {LEARN_ENV}"
        raise ConfigError(f"environment variable {LEARN_ENV}: {value[:40]!r} is not 1 or 0 (true or false)")
    project_path = Path(config_path) if config_path is not None else Path.cwd() / CONFIG_FILE_NAME
    files = [read_user_file(user_config_path(env))]
    if config_path is not None or project_path.is_file():
        files.append(read_project_file(project_path))
    for file in files:
        if file is not None and "learn" in file.data:
            if not isinstance(file.data["learn"], bool):
                raise ConfigError(f"{file.path}: learn must be true or false")
            return file.data["learn"], str(file.path)
    return False, "default"
