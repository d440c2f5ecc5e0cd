"""The integration commands: `serve`, `hook claude-code|qwen-code`, `hook install|uninstall|status|log`, `mcp`.

Only click, the standard library and the agents' table at import time: each command imports its
machinery when it runs.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpCommand, HelpGroup
from recall_kit_cli._output import clean, clean_block, echo, warn
from recall_kit_cli.integrations.agents import AGENTS  # the agents' table: standard library only

if TYPE_CHECKING:
    from recall_kit import SelectorConfig
    from recall_kit.settings import Settings
    from recall_kit_cli.integrations._runtime import RuntimePaths
    from recall_kit_cli.integrations.agent_settings import InstallResult


@click.command("serve", cls=HelpCommand)
@click.option(
    "--idle-timeout",
    type=float,
    default=None,
    help="Exit after this many seconds without a request (default 1800; or RECALL_KIT_IDLE_TIMEOUT).",
)
@click.option("--fast-only", is_flag=True, help="No model at all (no refinement, no enrichment), even when one is configured.")
@click.option("--debounce-ms", type=float, default=None, help="Debounce window for file events.")
@click.option("--no-cache", is_flag=True, help="Open memory folders without the index cache.")
@click.option("--learn", is_flag=True, default=None, help="Learn from the model (or RECALL_KIT_LEARN=1).")
@click.option(
    "--trail/--no-trail", default=None,
    help="Keep the trail `hook log` reads (default on).",
)
@click.option(
    "--trail-prompts", is_flag=True, default=None,
    help="Keep prompt heads in the trail too.",
)
@click.option("--status", "show_status", is_flag=True, help="Show how the running daemon is, instead.")
@click.option("--stop", is_flag=True, help="Stop the running daemon; wait until it exits.")
@click.option("--json", "as_json", is_flag=True, help="With --status or --stop: JSON output.")
def serve(
    idle_timeout: float | None, fast_only: bool, debounce_ms: float | None, no_cache: bool, learn: bool | None,
    trail: bool | None, trail_prompts: bool | None, show_status: bool, stop: bool, as_json: bool,
) -> None:
    """Run the per-user recall daemon the hooks talk to (the first hook starts it).

    It prints one JSON line once it listens, then serves until SIGTERM or idle.

    \b
    Examples:
      recall-kit serve --idle-timeout 600
      recall-kit serve --status          # or --stop
    """
    from memory_store import RecallKitError
    from recall_kit_cli.integrations._runtime import runtime_paths

    paths = runtime_paths()
    if show_status or stop:
        if show_status and stop:
            raise InputError("use --status or --stop, not both")
        _control(paths, stop=stop, as_json=as_json)
        return
    if as_json:
        raise InputError("--json goes with --status or --stop")
    from memory_store import debounce_refusal

    if debounce_ms is not None and (refusal := debounce_refusal(debounce_ms)) is not None:
        raise InputError(f"--debounce-ms: {refusal}")
    from recall_kit_cli._config_file import load
    from recall_kit_cli.integrations._runtime import append_log
    from recall_kit_cli.integrations.daemon import AlreadyRunning, RecallDaemon, run_daemon, status_line
    from recall_kit_cli.integrations.trail import Trail

    try:
        settings = load(idle_timeout=idle_timeout, learn=learn, trail=trail, trail_prompts=trail_prompts)
        daemon = RecallDaemon(
            paths, idle_timeout_s=settings.idle_timeout.value, selector_config=_selector_config(fast_only, settings),
            debounce_ms=debounce_ms, use_cache=not no_cache, cache_dir=settings.cache_dir.value,
            learn=settings.learn.value,
            trail=Trail(paths.trail, keep_prompts=settings.trail_prompts.value) if settings.trail.value else None,
            enrich=settings.daemon_enrich.value, enrich_calls_per_minute=settings.enrich_calls_per_minute.value,
            agent_keywords=settings.agent_keywords.value,
        )
        try:
            daemon.acquire()
        except AlreadyRunning as exc:
            click.echo(f"recall-kit: {exc}", err=True)
            return
        except RecallKitError as exc:
            raise InputError(f"refusing to serve: {exc}") from None
        except OSError as exc:
            raise InputError(f"cannot use {paths.folder}: {exc.strerror or exc}") from None
    except InputError as exc:  # the hook that started it may have given up waiting: its log says why, too
        append_log(paths.hook_log, f"serve (pid {os.getpid()}) refused to start: {exc.format_message()}")
        raise

    def ready() -> None:
        click.echo(status_line(paths))
        sys.stdout.flush()

    reason = run_daemon(daemon, ready)
    click.echo(f"recall-kit: daemon stopped ({reason})", err=True)


NOT_RUNNING_EXIT = 3  # `serve --status` with no daemon, as an init script's `status` says "not running"


def _control(paths: RuntimePaths, *, stop: bool, as_json: bool) -> None:
    """`serve --status` and `serve --stop`: one-line errors when no daemon runs or it cannot be asked."""
    from recall_kit_cli._output import clean, echo, echo_json
    from recall_kit_cli.integrations._control import STOP_TIMEOUT_S, NoDaemon, daemon_status, status_lines, stop_daemon
    from recall_kit_cli.integrations.protocol import DaemonError

    try:
        if stop:
            pid = stop_daemon(paths, STOP_TIMEOUT_S)
        else:
            status = daemon_status(paths)
    except NoDaemon as exc:  # a state, not bad input: --stop has nothing to do, --status exits 3 ("not running")
        if as_json:
            echo_json({"running": False, "reason": str(exc)} if not stop else {"stopped": False, "reason": str(exc)})
        else:
            echo(clean(f"{exc}: nothing to stop" if stop else str(exc)))
        if not stop:
            raise click.exceptions.Exit(NOT_RUNNING_EXIT) from None
        return
    except DaemonError as exc:
        raise InputError(str(exc)) from None
    if stop:
        if as_json:
            echo_json({"stopped": True, "pid": pid})
        else:
            echo(f"stopped the daemon (pid {pid})")
    elif as_json:
        echo_json(status)
    else:
        echo(*(clean(line) for line in status_lines(status)))


@click.group("hook", cls=HelpGroup)
def hook() -> None:
    """Agent hooks that hand memories over through the daemon.

    \b
    Examples:
      recall-kit hook install claude-code --user     # or qwen-code
      recall-kit hook status
      recall-kit hook log
    """


def _agent_hook_command(name: str, title: str) -> click.Command:
    """`recall-kit hook <agent>`, for its --help: the installed hook runs it without click (``main``)."""

    @click.command(name, cls=HelpCommand, context_settings={"ignore_unknown_options": True}, help=(
        f"Answer one {title} hook event (JSON on stdin). It prints nothing and exits 0 on any failure.\n\n"
        f"Without --root, the prompt recalls from {title}'s own memory folders for the event's project.\n\n"
        f"\b\nExample (what the installed hook runs):\n  recall-kit hook {name} < event.json"
    ))
    @click.option("--root", "roots", multiple=True, help="A memory folder (repeatable); replaces the agent's folders.")
    def answer(roots: tuple[str, ...]) -> None:
        from recall_kit_cli.integrations.hook import run_hook

        raise SystemExit(run_hook(name, [f"--root={r}" for r in roots]))

    return answer


for _agent in AGENTS.values():
    hook.add_command(_agent_hook_command(_agent.name, _agent.title))

_AGENT = click.Choice(list(AGENTS))


@hook.command("install")
@click.argument("agent", type=_AGENT)
@click.option("--project", "scope", flag_value="project", help="This project's settings (.claude/ or .qwen/settings.json).")
@click.option("--user", "scope", flag_value="user", default=True, help="Your own settings in ~/.claude or ~/.qwen (default).")
@click.option("--root", "roots", multiple=True, help="A memory folder (repeatable); replaces the agent's own folders.")
@click.option("--allow-missing", is_flag=True, help="Install a --root that does not exist yet (with a warning).")
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
def hook_install(agent: str, scope: str, roots: tuple[str, ...], allow_missing: bool, dry_run: bool) -> None:
    """Add the recall hooks to the agent's settings JSON. Idempotent; the original is kept.

    Without --root, each prompt recalls from the agent's own memory folders for its project.

    \b
    Examples:
      recall-kit hook install claude-code --user
      recall-kit hook install qwen-code --project --root ~/memories
    """
    from recall_kit_cli.integrations.agent_settings import SettingsError, install_hooks

    spec = AGENTS[agent]
    try:
        result = install_hooks(spec, scope, roots, dry_run=dry_run, allow_missing=allow_missing)
    except SettingsError as exc:
        raise InputError(str(exc)) from None
    for root in result.missing_roots:
        warn(f"memory root {root} does not exist: until it does, the hook recalls nothing (the daemon refuses it)")
    _report(result, dry_run, "updated", "already up to date")
    if not roots:
        echo(f"each prompt recalls from {spec.title}'s own memory folders for its project; "
             "see them with `recall-kit hook status`")
    echo(f"{spec.title} is asked for keywords and usage_scenarios in each memory it saves, {spec.writing_note_at} "
         "(off: agent_keywords = false in your recall-kit.toml, or RECALL_KIT_AGENT_KEYWORDS=0)")
    if spec.install_note:
        echo(f"note: {spec.install_note}")


@hook.command("uninstall")
@click.argument("agent", type=_AGENT)
@click.option("--project", "scope", flag_value="project", help="This project's settings (.claude/ or .qwen/settings.json).")
@click.option("--user", "scope", flag_value="user", default=True, help="Your own settings in ~/.claude or ~/.qwen (default).")
@click.option("--dry-run", is_flag=True, help="Show the diff; write nothing.")
def hook_uninstall(agent: str, scope: str, dry_run: bool) -> None:
    """Remove the recall hooks from the agent's settings JSON. The rest stays as it is.

    \b
    Example:
      recall-kit hook uninstall claude-code --user
    """
    from recall_kit_cli.integrations.agent_settings import SettingsError, uninstall_hooks

    try:
        result = uninstall_hooks(AGENTS[agent], scope, dry_run=dry_run)
    except SettingsError as exc:
        raise InputError(str(exc)) from None
    _report(result, dry_run, "removed the recall hooks from", "no recall hooks in it, nothing to remove")
    if not dry_run:
        echo(_daemon_after_uninstall())


def _daemon_after_uninstall() -> str:
    """Whether the daemon still runs once the hooks are gone (it serves every agent's hook, so
    uninstalling one never stops it), and how to stop it."""
    from memory_store import RecallKitError
    from recall_kit_cli.integrations._runtime import runtime_paths
    from recall_kit_cli.integrations.protocol import listening

    try:
        socket_path = runtime_paths().socket
        running = listening(socket_path)
    except (OSError, RecallKitError):
        return "the daemon's state is unknown; recall-kit serve --status tells"
    if running:
        return ("the daemon still runs (for any other agent's hook, until it has been idle for its timeout); "
                "recall-kit serve --stop stops it now")
    return "no daemon runs"


def _report(result: InstallResult, dry_run: bool, done: str, nothing: str) -> None:
    """What an install or uninstall did: the diff in a dry run, else one line."""
    path = clean(result.path)
    if not result.changed:
        echo(f"{path}: {nothing}")
    elif dry_run:
        echo(clean_block(result.diff.rstrip("\n")))
    else:
        kept = [f"backup {clean(result.backup)}"] if result.backup else []
        kept += [f"the original kept as {clean(result.original)}"] if result.original else []
        echo(f"{done} {path}" + (f" ({'; '.join(kept)})" if kept else ""))


@hook.command("status")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def hook_status(as_json: bool) -> None:
    """What is installed where and whether the daemon runs. Also what a prompt here would recall from.

    \b
    Example:
      recall-kit hook status
    """
    from recall_kit_cli._config_file import load
    from recall_kit_cli._output import echo_json
    from recall_kit_cli.integrations.hook_status import collect_status, status_text

    settings = load(lenient=True)  # what a daemon started here would ask the agent
    status = collect_status(os.getcwd(), dict(os.environ), agent_keywords=bool(settings.agent_keywords.value))
    if as_json:
        echo_json(status)
    else:
        echo(*(clean(line) for line in status_text(status)))


@hook.command("log")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=20, show_default=True, help="The last this many prompts.")
@click.option("--session", default=None, help="Only this agent session's prompts.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def hook_log(limit: int, session: str | None, as_json: bool) -> None:
    """What was recalled for your recent prompts, where and why. It reads the daemon's trail.

    Off with RECALL_KIT_TRAIL=0; prompt heads kept only with RECALL_KIT_TRAIL_PROMPTS=1.

    \b
    Example:
      recall-kit hook log -n 5
    """
    from memory_store import UnsafePathError
    from recall_kit_cli._output import echo_json
    from recall_kit_cli.integrations._runtime import runtime_paths
    from recall_kit_cli.integrations.trail import (
        describe, describe_enrichment, read_enrichments, read_trail, trail_sessions,
    )

    path = runtime_paths().trail
    try:
        prompts = read_trail(path, limit=limit, session=session)
        enriched = read_enrichments(path, limit=limit) if session is None else []
    except UnsafePathError as exc:
        raise InputError(f"refusing to read the trail: {exc}") from None
    if as_json:
        echo_json({"trail": str(path), "prompts": [p.to_dict() for p in prompts], "enrichment": enriched})
        return
    if session is not None and not prompts:
        others = trail_sessions(path)
        if others:
            echo(f"the trail knows no session {clean(repr(session))}: {clean(path)} holds prompts of "
                 f"{len(others)} other session{'s' if len(others) != 1 else ''} (`recall-kit hook log` lists them)")
            return
    if not prompts and not enriched:
        echo(f"no prompts in {clean(path)} yet (the daemon writes it; RECALL_KIT_TRAIL=0 turns it off)")
        return
    for prompt in prompts:
        echo(*(clean(line) for line in describe(prompt)))
    if enriched:
        echo(f"background enrichment (the last {len(enriched)}):", *(f"  {clean(describe_enrichment(r))}" for r in enriched))


@click.command("mcp", cls=HelpCommand)
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
        raise InputError(f"the MCP server needs the mcp extra: pip install -e '.[mcp]' in recall-kit's folder ({exc})") from None
    from memory_store import MemoryStoreError
    from recall_kit_cli._config_file import load, roots_of

    settings = load(roots=roots)
    paths = roots_of(settings).paths
    config = _selector_config(fast_only, settings)
    try:
        serve_stdio(list(paths), selector_config=config, use_cache=not no_cache, cache_dir=settings.cache_dir.value,
                    learn=settings.learn.value and config is not None)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None


def _selector_config(fast_only: bool, settings: Settings) -> SelectorConfig | None:
    """The model settings the daemon or server refines with, or None (fast path only); a key
    withheld from the endpoint is said in one warning line."""
    if fast_only:
        return None
    loaded = settings.selector
    if loaded.refusal:
        warn(f"model stage off: {loaded.refusal}")
    return loaded if loaded.configured else None
