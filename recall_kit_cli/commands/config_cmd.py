"""`recall-kit config`: every effective setting and where it came from (the key is never shown), and
`config trust|untrust`: whether a project file's endpoint may receive the user's API key."""

from __future__ import annotations

import os
from typing import Any

import click

from recall_kit import ConfigError, SelectorConfig
from recall_kit.settings import ROOTS_ENV, trust_config_file, untrust_config_file, user_config_path
from recall_kit_cli._config_file import load
from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpGroup
from recall_kit_cli._output import clean, echo, echo_json, echo_rows

Setting = dict[str, Any]  # {"value": ..., "source": ...} and, when flagged, "problem" or "withheld"


@click.group("config", cls=HelpGroup, invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.pass_context
def config(ctx: click.Context, as_json: bool) -> None:
    """Show every effective setting with its source (argument, environment variable or file).

    The API key shows only as set or not set. An invalid setting is flagged in its line (and in
    "problem" with --json), the others still shown; the exit status is 0 either way.

    \b
    Example:
      RECALL_KIT_MODEL=gpt-4o-mini recall-kit config
      recall-kit config trust    # its base_url may then get your API key
    """
    if ctx.invoked_subcommand is not None:
        return
    settings = _settings()
    if as_json:
        echo_json(settings)
        return
    echo_rows(_row(name, setting) for name, setting in settings.items())
    for setting in settings.values():
        if "withheld" in setting:
            echo(f"model stage off: {clean(setting['withheld'])}")


@config.command("trust")
@click.argument("path", required=False)
def trust(path: str | None) -> None:
    """Trust a project's recall-kit.toml as it is now. Its base_url may then receive your API key
    (default ./recall-kit.toml). Recorded in your own config file with the file's SHA-256; once the
    file changes it is untrusted again.

    \b
    Example:
      recall-kit config trust ~/src/team-repo
    """
    try:
        trusted = trust_config_file(path)
        recorded_in = user_config_path()
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    table = trusted.data.get("selector")
    base_url = table.get("base_url") if isinstance(table, dict) else None
    endpoint = (f"its base_url {SelectorConfig(base_url=base_url, model=None).shown_base_url} may receive your API key"
                if isinstance(base_url, str) and base_url else "it names no base_url")
    echo(f"trusted {clean(trusted.path)} (sha256 {trusted.sha256[:12]}): {clean(endpoint)}; "
         f"recorded in {clean(recorded_in)}")


@config.command("untrust")
@click.argument("path", required=False)
def untrust(path: str | None) -> None:
    """Stop trusting a project's recall-kit.toml. Default: ./recall-kit.toml.

    \b
    Example:
      recall-kit config untrust ~/src/team-repo
    """
    try:
        project, removed = untrust_config_file(path)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    echo(f"untrusted {clean(project)}" if removed else f"{clean(project)} was not trusted")


def _settings() -> dict[str, Setting]:
    """Every setting as `recall-kit config` shows it, in display order."""
    loaded = load(lenient=True)
    selector, files, problems = loaded.selector, loaded.files, loaded.problems
    settings: dict[str, Setting] = {}
    if files.project is None and "config_file" not in problems:
        settings["config_file"] = {"value": None, "source": "none found"}
    else:
        trust = f", {selector.project_trust_shown}" if selector.project_trust_shown else ""
        settings["config_file"] = {"value": str(files.project_path), "source": f"project file{trust}"}
    user_path = files.user_path
    found = files.user is not None or "user_config" in problems
    settings["user_config"] = {
        "value": str(user_path) if user_path is not None and found else None,
        "source": files.user_source if found else f"none at {user_path}",
    }
    roots = loaded.roots
    if roots.value is None and roots.problem is None:
        settings["roots"] = {"value": None, "source": f"not set (--root, {ROOTS_ENV} or roots = [...])"}
    else:
        settings["roots"] = {"value": os.pathsep.join(roots.value or ()), "source": roots.source}
    settings["base_url"] = {"value": selector.shown_base_url, "source": loaded["base_url"].source}
    settings["model"] = {"value": selector.model, "source": loaded["model"].source}
    withheld_key = selector.refusal is not None and "api_key" in selector.sources
    settings["api_key"] = {"value": "***" if selector.api_key or withheld_key else None,
                           "source": loaded["api_key"].source}
    settings["timeout"] = {"value": f"{selector.timeout:g}", "source": loaded["timeout"].source}
    settings["learn"] = {"value": "on" if loaded.learn.value else "off", "source": loaded.learn.source}
    settings["cache_dir"] = {"value": str(loaded.cache_dir.value), "source": loaded.cache_dir.source}
    settings["idle_timeout"] = {"value": f"{loaded.idle_timeout.value:g}", "source": loaded.idle_timeout.source}
    for name in ("trail", "trail_prompts", "agent_keywords", "daemon_enrich"):
        settings[name] = {"value": "on" if loaded[name].value else "off", "source": loaded[name].source}
    rate = loaded.enrich_calls_per_minute
    settings["enrich_calls_per_minute"] = {"value": f"{rate.value:g}", "source": rate.source}
    for name, problem in problems.items():
        settings[name]["problem"] = problem
    if selector.refusal:  # beside the key withheld, else beside the base_url that gets nothing
        settings["api_key" if withheld_key else "base_url"]["withheld"] = selector.refusal
    return settings


def _row(name: str, setting: Setting) -> str:
    value = setting["value"]
    shown = clean(value) if value is not None else "-"
    if "problem" in setting:
        return f"{name:<13} invalid  ({clean(setting['problem'])})"
    if "withheld" in setting:
        return f"{name:<13} {shown}  ({clean(setting['source'])}; model stage off, see below)"
    return f"{name:<13} {shown}  ({clean(setting['source'])})"
