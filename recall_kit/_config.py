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

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    def missing(self) -> list[str]:
        return [name for name, v in (("base URL", self.base_url), ("model", self.model)) if not v]


def _read_toml(path: Path) -> Mapping[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
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
    origin = str(path)

    def pick(arg: Any, env_name: str, key: str, generic_env: str | None = None) -> Any:
        for value in (arg, env.get(env_name), file_table.get(key)):
            if value not in (None, ""):
                return value
        return env.get(generic_env) if generic_env else None

    raw_timeout = pick(timeout, "RECALL_KIT_TIMEOUT", "timeout")
    return SelectorConfig(
        base_url=_text(pick(base_url, "RECALL_KIT_BASE_URL", "base_url", "OPENAI_BASE_URL"), origin, "base_url"),
        model=_text(pick(model, "RECALL_KIT_MODEL", "model"), origin, "model"),
        api_key=_text(pick(api_key, "RECALL_KIT_API_KEY", "api_key", "OPENAI_API_KEY"), origin, "api_key"),
        timeout=DEFAULT_TIMEOUT_S if raw_timeout is None else _timeout(raw_timeout, origin),
        config_file=path if read_file else None,
    )
