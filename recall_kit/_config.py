"""The model endpoint resolved, and which endpoint may receive which key.

The settings loader (``_settings``) collects every value given for base_url, api_key, model and
timeout, highest precedence first; ``resolve_selector`` pairs them. A project file is not the
user's own until the user trusts it (see ``_config_files``): the base_url it names receives
nothing, neither a key (the user's or its own) nor the prompts and memories the model stage would
send: the model stage is off for that folder and ``SelectorConfig.refusal`` says why.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recall_kit._config_files import TRUST_LABELS, SettingsFiles, TrustState
from recall_kit._errors import ConfigError
from recall_kit._secrets import Redactor, clean_api_key, display_url, split_url_credentials

DEFAULT_TIMEOUT_S = 30.0  # the model's, when no setting gives one


@dataclass(frozen=True, slots=True)
class Raw:
    """One value given for a setting, before it is checked: where from, and what it is relative to."""

    value: Any
    origin: str  # "argument --root", "environment variable RECALL_KIT_TIMEOUT", "user file P [selector] timeout"
    text: bool  # given as text (an argument or a variable), not as a TOML value
    base: Path | None = None  # the folder of the file it was read from, for relative paths
    users: bool = True  # the user's own setting, or one from a project file the user trusted


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
    # setting -> what is wrong with it (a file that could not be used included): the model stage is off
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
        return None if self.project_trust is None else TRUST_LABELS[self.project_trust]

    def missing(self) -> list[str]:
        """The settings ``configured`` needs that are unset: "base URL", "model", both or neither."""
        return [name for name, v in (("base URL", self.base_url), ("model", self.model)) if not v]


def check_base_url(url: str, origin: str) -> str:
    """``url`` when an HTTP client can use it (http or https, a host, a port from 1 to 65535);
    otherwise ConfigError in one line naming ``origin`` and the URL, its credentials masked."""
    import httpx  # only a configured endpoint needs it: settings without one load no HTTP client

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


def _key_for(url: Raw | None, keys: list[Raw]) -> tuple[Raw | None, Raw | None]:
    """The key sent to ``url`` (the first of the user's own, a trusted project's included), and for
    an untrusted project's url none: the user's key, if any, is then returned second, as withheld."""
    users = [k for k in keys if k.users]  # an untrusted project's own key is never sent anywhere
    first = users[0] if users else None
    return (first, None) if url is None or url.users else (None, first)


def _refusal(withheld: Raw | None, url: str, project: Path, trust: TrustState) -> str:
    command = f"`recall-kit config trust {shlex.quote(str(project))}`"
    why = (f"which changed since you trusted it: review it, then run {command}" if trust == "changed"
           else f"which you have not trusted: if you do, run {command}")
    what = f"your API key ({withheld.origin}) is" if withheld else "your prompts are"
    return f"{what} not sent to {display_url(url)}, the base_url of {project}, {why}"


def resolve_selector(
    given: Mapping[str, Sequence[Raw]],
    check: Callable[[str, Raw], Any],
    *,
    files: SettingsFiles,
    file_problems: Mapping[str, str],
) -> SelectorConfig:
    """The endpoint from the values given for base_url, api_key, model and timeout (each highest
    precedence first, as the settings loader collected them; ``check`` is each one's declared check).

    The key sent is the first of the user's own, and only to a base_url of the user's own (or of a
    project file the user trusted): for an untrusted project file's base_url the model stage is off
    and ``refusal`` says why, naming the key withheld. An unusable value is left unset and described
    in ``problems``, beside ``file_problems`` (a file that could not be used), which turn it off too."""
    problems: dict[str, str] = dict(file_problems)
    sources: dict[str, str] = {}

    def resolve(name: str, chosen: Raw | None, finish: Callable[[Any, str], Any] = lambda v, o: v) -> Any:
        if chosen is None:
            return None
        sources[name] = chosen.origin
        try:
            return finish(check(name, chosen), chosen.origin)
        except ConfigError as exc:
            problems.setdefault(name, str(exc))
            return None

    urls = given["base_url"]
    url = urls[0] if urls else None
    key, withheld = _key_for(url, list(given["api_key"]))
    models, timeouts = given["model"], given["timeout"]
    resolved_url = resolve("base_url", url, lambda v, o: check_base_url(v or "", o))
    resolved_model = resolve("model", models[0] if models else None)
    resolved_key = resolve("api_key", key, lambda v, o: clean_api_key(v, o))
    resolved_timeout = resolve("timeout", timeouts[0] if timeouts else None)
    refusal = None
    if url is not None and not url.users and files.trust is not None:  # the base_url of an untrusted project file
        if withheld is not None:
            sources["api_key"] = withheld.origin
        refusal = _refusal(withheld, str(url.value), files.project_path, files.trust)
    return SelectorConfig(
        base_url=resolved_url,
        model=resolved_model,
        api_key=resolved_key,
        timeout=DEFAULT_TIMEOUT_S if resolved_timeout is None else resolved_timeout,
        config_file=files.project_path if files.project is not None else None,
        sources=sources,
        user_config_file=files.user_path if files.user is not None else None,
        project_trust=files.trust,
        refusal=refusal,
        problems=problems,
    )
