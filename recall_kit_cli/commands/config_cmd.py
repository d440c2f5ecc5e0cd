"""`recall-kit config`: every effective setting and where it came from; the key is never shown."""

from __future__ import annotations

import os

import click

from recall_kit import CACHE_DIR_ENV, default_cache_dir
from recall_kit_cli._format import InputError
from recall_kit_cli._output import clean, echo_json, echo_rows
from recall_kit_cli._config_file import ROOTS_ENV, config_file, resolve_roots, selector_config



@click.command("config")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def config(as_json: bool) -> None:
    """Show every effective setting with its source (argument, environment variable or file).

    The API key shows only as set or not set.

    \b
    Example:
      RECALL_KIT_MODEL=gpt-4o-mini recall-kit config
    """
    settings: list[tuple[str, str | None, str]] = []
    path = config_file()
    settings.append(("config_file", str(path) if path else None, "./recall-kit.toml" if path else "none found"))
    try:
        roots = resolve_roots(())
        settings.append(("roots", os.pathsep.join(roots.paths), roots.source))
    except InputError:
        settings.append(("roots", None, f"not set (--root, {ROOTS_ENV} or roots = [...])"))
    selector = selector_config()
    sources = selector.sources
    settings += [
        ("base_url", selector.shown_base_url, sources.get("base_url", "not set")),
        ("model", selector.model, sources.get("model", "not set")),
        ("api_key", "***" if selector.api_key else None, sources.get("api_key", "not set")),
        ("timeout", f"{selector.timeout:g}", sources.get("timeout", "default")),
    ]
    source = f"environment variable {CACHE_DIR_ENV}" if os.environ.get(CACHE_DIR_ENV) else "default"
    settings.append(("cache_dir", str(default_cache_dir()), source))
    if as_json:
        echo_json({name: {"value": value, "source": source} for name, value, source in settings})
        return
    echo_rows(f"{name:<12} {clean(value) if value is not None else '-'}  ({clean(source)})"
              for name, value, source in settings)
