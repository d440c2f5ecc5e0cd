"""Where the selector's endpoint comes from: arguments, environment, then recall-kit.toml.

Precedence, highest first: explicit arguments, ``RECALL_KIT_*`` variables, the ``[selector]``
table of ``recall-kit.toml``, then the generic ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (a file
written for recall-kit is more specific than variables set for every OpenAI client).
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from recall_kit._errors import ConfigError
from recall_kit._secrets import clean_api_key, display_url

CONFIG_FILE_NAME = "recall-kit.toml"
DEFAULT_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class SelectorConfig:
    """A resolved endpoint. ``api_key`` is kept out of ``repr``."""

    base_url: str | None
    model: str | None
    api_key: str | None = field(default=None, repr=False)
    timeout: float = DEFAULT_TIMEOUT_S
    config_file: Path | None = None  # the recall-kit.toml that was read, if any
    # setting -> where its value came from ("argument", "environment variable RECALL_KIT_MODEL", ...)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def configured(self) -> bool:
        """Whether both a base URL and a model name are set."""
        return bool(self.base_url and self.model)

    @property
    def shown_base_url(self) -> str | None:
        """The base URL with any credentials in it masked: safe to print, log or put in JSON."""
        return display_url(self.base_url)

    def missing(self) -> list[str]:
        """The settings ``configured`` needs that are unset: "base URL", "model", both or neither."""
        return [name for name, v in (("base URL", self.base_url), ("model", self.model)) if not v]


def read_config_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The whole of a recall-kit.toml; ConfigError in one line when it cannot be read or parsed."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None


def _read_toml(path: Path) -> Mapping[str, Any]:
    data = read_config_toml(path)
    table = data.get("selector", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [selector] must be a table")
    return table


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


def load_selector_config(
    *,
    base_url: str | None = None,
    model: str | None = None,
    api_key: str | None = None,
    timeout: float | None = None,
    config_path: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> SelectorConfig:
    """Resolve the endpoint; raises ConfigError only for invalid values or an unreadable file.

    Without ``config_path``, ``./recall-kit.toml`` is read when it exists.
    """
    env = os.environ if environ is None else environ
    path = Path(config_path) if config_path is not None else Path.cwd() / CONFIG_FILE_NAME
    read_file = config_path is not None or path.is_file()
    file_table: Mapping[str, Any] = _read_toml(path) if read_file else {}
    sources: dict[str, str] = {}

    def pick(name: str, arg: Any, env_name: str, generic_env: str | None = None) -> tuple[Any, str]:
        """The value for setting ``name`` and where it came from, highest precedence first."""
        candidates = [
            (arg, f"argument {name}"),
            (env.get(env_name), f"environment variable {env_name}"),
            (file_table.get(name), f"{path} [selector] {name}"),
        ]
        if generic_env:
            candidates.append((env.get(generic_env), f"environment variable {generic_env}"))
        for value, origin in candidates:
            if value not in (None, ""):
                sources[name] = origin
                return value, origin
        return None, "default"

    url, url_origin = pick("base_url", base_url, "RECALL_KIT_BASE_URL", "OPENAI_BASE_URL")
    name, model_origin = pick("model", model, "RECALL_KIT_MODEL")
    key, key_origin = pick("api_key", api_key, "RECALL_KIT_API_KEY", "OPENAI_API_KEY")
    raw_timeout, timeout_origin = pick("timeout", timeout, "RECALL_KIT_TIMEOUT")
    return SelectorConfig(
        base_url=_text(url, url_origin, "base_url"),
        model=_text(name, model_origin, "model"),
        api_key=clean_api_key(_text(key, key_origin, "api_key"), key_origin),
        timeout=DEFAULT_TIMEOUT_S if raw_timeout is None else _timeout(raw_timeout, timeout_origin),
        config_file=path if read_file else None,
        sources=sources,
    )
