"""`recall-kit hook status`: what is installed where, whether the daemon runs, and which roots a
prompt in the current folder would get, with how many memories each holds.

The roots are worked out by the hook's own rule (``hook.prompt_roots`` and the agents' table) and
counted after the daemon's own checks (``_roots.check_root_set``), so what it shows is what a
prompt would get.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any

from memory_store import MemoryStore, MemoryStoreError, RecallKitError
from recall_kit_cli.integrations._control import daemon_status, enrichment_line
from recall_kit_cli.integrations._roots import check_root_set
from recall_kit_cli.integrations._runtime import runtime_paths
from recall_kit_cli.integrations.agent_settings import SettingsError, installed_commands, read_settings, settings_path
from recall_kit_cli.integrations.agents import AGENTS, Agent, folders_at
from recall_kit_cli.integrations.doctor_plan import doctor_summary
from recall_kit_cli.integrations.protocol import DaemonError, UnusableSocketPath, UntrustedSocket

SCOPES = ("user", "project")


def collect_status(cwd: str, environ: dict[str, str], *, agent_keywords: bool = True) -> dict[str, Any]:
    """The whole status as JSON values: ``agents`` (each with its installs, the roots a prompt
    here would get and how it asks its agent for keywords), ``daemon`` (with its background
    enrichment) and the trail's path. ``agent_keywords`` is the loaded setting."""
    paths = runtime_paths(environ)
    agents = [_agent_status(agent, cwd, environ) for agent in AGENTS.values()]
    for agent in agents:
        agent["keywords_note"] = {"on": agent_keywords, "when": AGENTS[agent["agent"]].writing_note_at}
    try:
        status = daemon_status(paths)
        daemon: dict[str, Any] = {
            "running": True, "pid": status.get("pid"), "sessions": status.get("sessions"),
            "stores": len(status.get("stores") or []), "socket": str(paths.socket),
            "enrichment": status.get("enrichment"),
        }
    except DaemonError as exc:
        daemon = {"running": False, "reason": str(exc), "socket": str(paths.socket),
                  "startable": not isinstance(exc, (UnusableSocketPath, UntrustedSocket))}
    return {"cwd": cwd, "agents": agents, "daemon": daemon, "trail": str(paths.trail), "doctor": doctor_summary(cwd, environ)}


def _agent_status(agent: Agent, cwd: str, environ: dict[str, str]) -> dict[str, Any]:
    installs = []
    commands: list[str] = []
    read: dict[str, str] = {}  # each settings file (resolved) -> the scope that read it
    for scope in SCOPES:
        path = settings_path(agent, scope, Path(cwd))
        entry: dict[str, Any] = {"scope": scope, "settings": str(path)}
        first = read.setdefault(os.path.realpath(path), scope)
        if first != scope:  # in the home folder the project's settings file is the user's: one file, one install
            entry.update(installed=False, same_as=first)
            installs.append(entry)
            continue
        try:
            text = read_settings(path, Path(cwd) if scope == "project" else None)
        except SettingsError as exc:
            entry.update(installed=False, error=str(exc))
        else:
            found = installed_commands(agent, text or "")
            entry.update(installed=bool(found), commands=found)
            commands += found
        installs.append(entry)
    prompts = [_prompt_roots(agent, command, cwd, environ) for command in dict.fromkeys(commands)]
    if not prompts:  # not installed: what an install without --root would give
        prompts = [_prompt_roots(agent, None, cwd, environ)]
    return {
        "agent": agent.name, "title": agent.title, "tested_version": agent.tested_version,
        "installs": installs, "installed": bool(commands), "prompts": prompts,
    }


def _prompt_roots(agent: Agent, command: str | None, cwd: str, environ: dict[str, str]) -> dict[str, Any]:
    """The roots a prompt in ``cwd`` gets from the hook ``command`` (None: the agent's own folders)."""
    given = _command_roots(command) if command is not None else []
    roots: list[dict[str, Any]]
    if given:
        roots = [{"kind": "--root", "path": os.path.abspath(os.path.join(cwd, r))} for r in given]
    else:
        roots = [{"kind": f.kind, "path": f.path} for f in folders_at(agent, cwd, environ)]
    existing = [r["path"] for r in roots if os.path.isdir(r["path"])]
    refused = None
    try:
        check_root_set(existing, home=environ.get("HOME"))
    except RecallKitError as exc:
        refused = str(exc)
    for root in roots:
        root["exists"] = os.path.isdir(root["path"])
        if root["exists"] and refused is None:
            root.update(_count(root["path"]))
    return {"command": command, "source": "--root" if given else "agent folders", "roots": roots, "refused": refused}


def _command_roots(command: str) -> list[str]:
    argv = shlex.split(command)
    return argv[4::2]  # exe hook <agent> --root R --root R ...: is_our_command checked the shape


def _count(path: str) -> dict[str, Any]:
    """How many memories ``path`` holds and how many files the store skips there."""
    try:
        with MemoryStore.open(path, watch=False, enrichment=False, learned=False) as store:
            snapshot = store.snapshot()
    except MemoryStoreError as exc:
        return {"error": str(exc)}
    return {"memories": len(snapshot.docs), "skipped": len(snapshot.errors)}


def status_text(status: dict[str, Any]) -> list[str]:
    """The status as lines for a person (each still to be cleaned for the terminal)."""
    lines = []
    for agent in status["agents"]:
        lines.append(f"{agent['title']} (tested with {agent['tested_version']}):")
        for install in agent["installs"]:
            if install.get("same_as"):
                state = f"the same file as {install['same_as']}'s"
            elif install.get("error"):
                state = f"cannot tell: {install['error']}"
            elif install["installed"]:
                state = "installed"
            else:
                state = "not installed"
            lines.append(f"  {install['scope']:<8} {install['settings']}: {state}")
        if sum(1 for install in agent["installs"] if install["installed"]) > 1:
            lines.append("  both run on every event, one session with two root sets: uninstall one of them")
        note = agent.get("keywords_note") or {}
        if note.get("on"):
            lines.append(f"  asks {agent['title']} for keywords and usage_scenarios in each memory it saves, "
                         f"{note.get('when')} (off: agent_keywords = false)")
        else:
            lines.append("  does not ask the agent for keywords (agent_keywords is off)")
        heading = "a prompt here recalls from" if agent["installed"] else "once installed, a prompt here would recall from"
        for prompt in agent["prompts"]:
            lines.append(f"  {heading} ({prompt['source']}):")
            if prompt["refused"]:
                lines.append(f"    nothing: the daemon refuses these roots ({prompt['refused']})")
            for root in prompt["roots"]:
                if not root["exists"]:
                    held = "does not exist yet (opened by the first prompt after it appears)"
                elif "error" in root:
                    held = root["error"]
                elif "memories" in root:
                    count = root["memories"]
                    held = f"{count} memor{'y' if count == 1 else 'ies'}" + (f", {root['skipped']} skipped" if root["skipped"] else "")
                else:
                    held = "not counted"
                lines.append(f"    {root['kind']:<8} {root['path']}: {held}")
    daemon = status["daemon"]
    if daemon["running"]:
        lines.append(f"daemon: running, pid {daemon['pid']}, {daemon['sessions']} sessions, {daemon['stores']} stores open")
        lines.append(f"  background enrichment: {enrichment_line(daemon.get('enrichment'))}")
    else:
        then = "the first prompt starts it" if daemon["startable"] else "no prompt can start it"
        lines.append(f"daemon: not running ({daemon['reason']}); {then}")
    lines.append(f"trail: {status['trail']} (`recall-kit hook log`)")
    lines.append(status["doctor"])
    return lines
