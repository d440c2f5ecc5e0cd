"""The integration commands: `serve`, `hook claude-code`, `hook install claude-code`, `mcp`.

Only click and the standard library at import time: each command imports its machinery when it runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from recall_kit_cli._format import InputError

if TYPE_CHECKING:
    from recall_kit import SelectorConfig


@click.command("serve")
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=30 * 60.0,
    show_default=True,
    envvar="RECALL_KIT_IDLE_TIMEOUT",
    help="Exit after this many seconds without a request (env RECALL_KIT_IDLE_TIMEOUT).",
)
@click.option("--fast-only", is_flag=True, help="No model stage, even when one is configured.")
@click.option("--debounce-ms", type=float, default=None, help="Debounce window for file events.")
@click.option("--no-cache", is_flag=True, help="Open memory folders without the per-user index cache.")
def serve(idle_timeout: float, fast_only: bool, debounce_ms: float | None, no_cache: bool) -> None:
    """Run the per-user recall daemon the hooks talk to (started by the first hook when not running).

    It prints one JSON line once it listens, then serves until SIGTERM or the idle timeout.

    \b
    Example:
      recall-kit serve --idle-timeout 600
    """
    from recall_kit_cli.integrations._runtime import runtime_paths
    from recall_kit_cli.integrations.daemon import AlreadyRunning, RecallDaemon, run_daemon, status_line

    config = _selector_config(fast_only)
    paths = runtime_paths()
    daemon = RecallDaemon(
        paths, idle_timeout_s=idle_timeout, selector_config=config, debounce_ms=debounce_ms, use_cache=not no_cache
    )
    try:
        daemon.acquire()
    except AlreadyRunning as exc:
        click.echo(f"recall-kit: {exc}", err=True)
        return
    except OSError as exc:
        raise InputError(f"cannot use {paths.folder}: {exc.strerror or exc}") from None

    def ready() -> None:
        click.echo(status_line(paths))
        sys.stdout.flush()

    reason = run_daemon(daemon, ready)
    click.echo(f"recall-kit: daemon stopped ({reason})", err=True)


@click.group("hook")
def hook() -> None:
    """Agent hooks that hand memories over through the daemon.

    \b
    Example:
      recall-kit hook install claude-code --project --root ~/memories
    """


@hook.command("claude-code", context_settings={"ignore_unknown_options": True})
@click.option("--root", "roots", multiple=True, help="A memory folder (repeatable).")
def hook_claude_code(roots: tuple[str, ...]) -> None:
    """Answer one Claude Code hook event (JSON on stdin); prints nothing and exits 0 on any failure.

    \b
    Example (what the installed hook runs):
      recall-kit hook claude-code --root ~/memories < event.json
    """
    from recall_kit_cli.integrations.hook import run_claude_code

    args = [f"--root={r}" for r in roots]
    raise SystemExit(run_claude_code(args))


@hook.command("install")
@click.argument("agent", type=click.Choice(["claude-code"]))
@click.option("--project", "scope", flag_value="project", help="This project's .claude/settings.json.")
@click.option("--user", "scope", flag_value="user", default=True, help="~/.claude/settings.json (default).")
@click.option("--root", "roots", multiple=True, required=True, help="A memory folder (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
def hook_install(agent: str, scope: str, roots: tuple[str, ...], dry_run: bool) -> None:
    """Merge the recall hooks into Claude Code's settings JSON (idempotent; keeps a .bak).

    \b
    Example:
      recall-kit hook install claude-code --project --root ~/memories
    """
    from recall_kit_cli.integrations.claude_settings import SettingsError, install_claude_code

    try:
        result = install_claude_code(scope, roots, dry_run=dry_run)
    except SettingsError as exc:
        raise InputError(str(exc)) from None
    if dry_run:
        click.echo(result.diff or f"{result.path}: already up to date", nl=not result.diff)
    elif result.changed:
        backup = f" (backup {result.backup})" if result.backup else ""
        click.echo(f"updated {result.path}{backup}")
    else:
        click.echo(f"{result.path}: already up to date")


@click.command("mcp")
@click.option("--root", "roots", multiple=True, required=True, help="A memory folder (repeatable).")
@click.option("--fast-only", is_flag=True, help="No model stage, even when one is configured.")
@click.option("--no-cache", is_flag=True, help="Open the memory folders without the per-user index cache.")
def mcp(roots: tuple[str, ...], fast_only: bool, no_cache: bool) -> None:
    """Serve the memories to any MCP client over stdio (needs the `mcp` extra).

    \b
    Example:
      claude mcp add memories -- recall-kit mcp --root ~/memories
    """
    try:
        from recall_kit_cli.integrations.mcp_server import serve_stdio
    except ImportError as exc:
        raise InputError(f"the MCP server needs the mcp extra: pip install 'recall-kit[mcp]' ({exc})") from None
    from memory_store import MemoryStoreError

    config = _selector_config(fast_only)
    try:
        serve_stdio(list(roots), selector_config=config, use_cache=not no_cache)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None


def _selector_config(fast_only: bool) -> SelectorConfig | None:
    """The model settings the daemon or server refines with, or None (fast path only); a key
    withheld from the endpoint is said in one warning line."""
    from recall_kit_cli._config_file import selector_config
    from recall_kit_cli._output import warn

    if fast_only:
        return None
    loaded = selector_config()
    if loaded.refusal:
        warn(f"model stage off: {loaded.refusal}")
    return loaded if loaded.configured else None
