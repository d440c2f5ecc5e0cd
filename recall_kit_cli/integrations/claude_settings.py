"""`recall-kit hook install claude-code`: merge our hook entries into Claude Code's settings JSON.

Idempotent (our entries are found by their command and replaced in place), everything else in the
file is kept, the previous file is copied to ``settings.json.bak``, and a dry run only shows the diff.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_store import MemoryStoreError, RecallKitError, atomic_write

HOOK_EVENTS = ("UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd")
TOOL_EVENTS = frozenset({"PostToolUse"})  # events whose entries carry a tool-name matcher
HOOK_TIMEOUT_S = 5  # Claude Code's own limit for our command; the hook gives up well before it
_MARKER = " hook claude-code"  # how an entry of ours is recognised on a later run


class SettingsError(RecallKitError):
    """The settings file cannot be read, parsed or written."""


@dataclass(frozen=True, slots=True)
class InstallResult:
    """What an install did or, in a dry run, would do: the settings file, whether it changes, the diff, the backup."""

    path: Path
    changed: bool
    diff: str
    backup: Path | None


def settings_path(scope: str, cwd: Path | None = None) -> Path:
    """Claude Code's settings file: the project's (under ``cwd``) for scope "project", else the user's."""
    if scope == "project":
        return (cwd or Path.cwd()) / ".claude" / "settings.json"
    return Path.home() / ".claude" / "settings.json"


def hook_command(roots: tuple[str, ...] | list[str], executable: str | None = None) -> str:
    """The shell command of our hook entries: this recall-kit's ``hook claude-code`` with each root made absolute."""
    exe = executable or _recall_kit_executable()
    parts = [exe, "hook", "claude-code"]
    for root in roots:
        parts += ["--root", os.path.abspath(os.path.expanduser(root))]
    return " ".join(shlex.quote(p) for p in parts)


def merge_hooks(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """A copy of ``settings`` with one entry of ours per event (replacing older ones of ours)."""
    merged: dict[str, Any] = json.loads(json.dumps(settings))
    hooks = merged.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsError("'hooks' in the settings file is not an object")
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise SettingsError(f"'hooks.{event}' in the settings file is not a list")
        ours: dict[str, Any] = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT_S}
        placed = False
        for group in groups:
            entries = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(entries, list):
                continue
            for i, entry in enumerate(entries):
                if isinstance(entry, dict) and _MARKER in str(entry.get("command", "")):
                    if placed:
                        entries[i] = None  # a duplicate of ours from an older install
                    else:
                        entries[i] = ours
                        placed = True
            group["hooks"] = [e for e in entries if e is not None]
        hooks[event] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not placed:
            group = {"matcher": "*", "hooks": [ours]} if event in TOOL_EVENTS else {"hooks": [ours]}
            hooks[event].append(group)
    return merged


def install_claude_code(
    scope: str, roots: tuple[str, ...], *, dry_run: bool = False, cwd: Path | None = None
) -> InstallResult:
    """Merge our hook entries into the settings file of ``scope`` and, unless ``dry_run`` or nothing changes,
    write it, keeping the old file as ``settings.json.bak``. SettingsError when it cannot be read, parsed or written."""
    path = settings_path(scope, cwd)
    try:
        old_text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old_text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"cannot read {path}: {exc}") from None
    try:
        settings = json.loads(old_text) if old_text.strip() else {}
    except ValueError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
    if not isinstance(settings, dict):
        raise SettingsError(f"{path} does not hold a JSON object; nothing was changed")
    merged = merge_hooks(settings, hook_command(roots))
    new_text = json.dumps(merged, indent=2, ensure_ascii=False) + "\n"
    changed = merged != settings
    diff = "".join(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"{path} (now)",
            tofile=f"{path} (after install)",
        )
    ) if changed else ""
    if dry_run or not changed:
        return InstallResult(path, changed, diff, None)
    backup = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if old_text:
            backup = path.with_name(path.name + ".bak")
            shutil.copy2(path, backup)
        atomic_write(path, new_text)
    except (OSError, MemoryStoreError) as exc:
        raise SettingsError(f"cannot write {path}: {exc}") from None
    return InstallResult(path, True, diff, backup)


def _recall_kit_executable() -> str:
    """The absolute path of this recall-kit, so the hook works without it on Claude Code's PATH."""
    candidate = Path(sys.executable).parent / "recall-kit"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("recall-kit") or "recall-kit"
