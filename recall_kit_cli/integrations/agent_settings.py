"""`recall-kit hook install|uninstall claude-code|qwen-code`: our hook entries in an agent's settings JSON.

Both agents read one settings shape (``hooks.<event>[].hooks[]``); what differs (where the file
is, the timeout's unit, the hook's name) is the agent's record in ``agents``. An entry is ours only
when it has the exact shape ``hook_command`` writes (``type: command``, the command
``/abs/recall-kit hook <agent> [--root /abs/dir ...]``); nothing else is ever touched.
The file is edited in place (``_json_edit``): every byte but our entries stays as the user wrote it,
comments included where the agent reads them (Qwen Code).
A symlinked file keeps its link: the target is rewritten, atomically, in the target's folder. A
read-only file is refused. Before each change the file is copied to ``settings.json.recall-kit-backup``;
the first change of a file we had never edited also keeps it as ``settings.json.recall-kit-original``,
which is never overwritten. A dry run only shows the diff.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import os
import shlex
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from memory_store import PRIVATE_FILE_MODE, MemoryStoreError, RecallKitError, atomic_write, broad_root_refusal, open_private
from recall_kit_cli.integrations.agents import MAX_SETTINGS_BYTES, Agent
from recall_kit_cli.integrations._json_edit import (
    Array,
    JsonTextError,
    Node,
    Object,
    Scalar,
    Splice,
    apply,
    edit_children,
    holds_comments,
    parse,
    replace,
    string_value,
)

TOOL_EVENTS = frozenset({"PostToolUse"})  # events whose entries carry a tool-name matcher ("*": every tool)
BACKUP_SUFFIX = ".recall-kit-backup"  # the file as it was before our last change
ORIGINAL_SUFFIX = ".recall-kit-original"  # the file as it was before our first change; never overwritten


class SettingsError(RecallKitError):
    """The settings file cannot be read, parsed or written, or a root to install is not a folder."""


@dataclass(frozen=True, slots=True)
class InstallResult:
    """What an install or uninstall did or, in a dry run, would do: the settings file, whether it
    changes, the diff, the backups written, and the roots installed that do not exist yet."""

    path: Path
    changed: bool
    diff: str
    backup: Path | None = None
    original: Path | None = None
    missing_roots: tuple[str, ...] = ()


def settings_path(agent: Agent, scope: str, cwd: Path | None = None) -> Path:
    """The agent's settings file: the project's (under ``cwd``) for scope "project", else the user's."""
    return Path(agent.settings_path(scope, str(cwd or Path.cwd()), str(Path.home())))


def hook_command(agent: Agent, roots: tuple[str, ...] | list[str], executable: str | None = None) -> str:
    """The shell command of our hook entries: this recall-kit's ``hook <agent>`` with each root made
    absolute (no root: the agent's own folders, worked out at each prompt)."""
    exe = executable or _recall_kit_executable()
    parts = [exe, "hook", agent.name]
    for root in roots:
        parts += ["--root", os.path.abspath(os.path.expanduser(root))]
    return " ".join(shlex.quote(p) for p in parts)


def is_our_command(agent: Agent, command: str) -> bool:
    """Whether ``command`` is exactly what ``hook_command`` writes for ``agent``, so a user's own hook
    that merely mentions ``hook claude-code`` is never taken for ours."""
    try:
        argv = shlex.split(command)
    except ValueError:
        return False
    exe, roots = (argv[0], argv[3:]) if len(argv) >= 3 else ("", [])
    if argv[1:3] != ["hook", agent.name] or os.path.basename(exe) != "recall-kit":
        return False
    if not (exe == "recall-kit" or os.path.isabs(exe)) or len(roots) % 2:
        return False
    if any(flag != "--root" for flag in roots[::2]) or not all(os.path.isabs(root) for root in roots[1::2]):
        return False
    return command == " ".join(shlex.quote(p) for p in argv)


def with_our_hooks(agent: Agent, text: str, command: str) -> str:
    """``text`` with exactly one entry of ours, running ``command``, per hook event; older entries of
    ours replaced or dropped, every other byte kept. JsonTextError or SettingsError when it cannot be."""
    if not text.strip():
        return json.dumps({"hooks": {event: [_group(agent, event, command)] for event in agent.events}}, indent=2) + "\n"
    return _edited(agent, text, command)


def without_our_hooks(agent: Agent, text: str) -> str:
    """``text`` without any entry of ours, and without a group, event or ``hooks`` table that only
    our entries filled; every other byte kept."""
    return _edited(agent, text, None) if text.strip() else text


def install_hooks(
    agent: Agent,
    scope: str,
    roots: tuple[str, ...],
    *,
    dry_run: bool = False,
    cwd: Path | None = None,
    allow_missing: bool = False,
) -> InstallResult:
    """Put our hook entries into ``agent``'s settings file of ``scope`` and, unless ``dry_run`` or
    nothing changes, write it. No ``roots``: the hook recalls from the agent's own folders. SettingsError when a root is not a folder (or does not exist, unless
    ``allow_missing``), or the file cannot be read, parsed or written; nothing is changed then."""
    missing = checked_roots(agent, roots, allow_missing)
    command = hook_command(agent, roots)
    result = _edit_settings(agent, scope, cwd, lambda text: with_our_hooks(agent, text, command), dry_run)
    return dataclasses.replace(result, missing_roots=missing)


def uninstall_hooks(agent: Agent, scope: str, *, dry_run: bool = False, cwd: Path | None = None) -> InstallResult:
    """Remove exactly our hook entries from ``agent``'s settings file of ``scope``; as ``install_hooks`` otherwise."""
    return _edit_settings(agent, scope, cwd, lambda text: without_our_hooks(agent, text), dry_run)


def installed_commands(agent: Agent, text: str) -> list[str]:
    """The commands of our entries in settings ``text``, once each, in the order written; [] when
    there are none or the text is not a JSON object."""
    try:
        root = parse(text, comments=agent.settings_comments)
    except JsonTextError:
        return []
    hooks = root.get("hooks") if isinstance(root, Object) else None
    found: list[str] = []
    for member in hooks.members if isinstance(hooks, Object) else []:
        for group in member.value.items if isinstance(member.value, Array) else []:
            entries = group.get("hooks") if isinstance(group, Object) else None
            for entry in entries.items if isinstance(entries, Array) else []:
                if _is_ours(entry, agent):
                    found.append(str(string_value(entry.get("command"))))
    return list(dict.fromkeys(found))


def checked_roots(agent: Agent, roots: tuple[str, ...], allow_missing: bool) -> tuple[str, ...]:
    """The roots that do not exist yet (allowed only with ``allow_missing``); SettingsError for a root
    that is not a folder, is missing without ``allow_missing``, or whose path is not UTF-8."""
    missing = []
    for given in roots:
        path = os.path.abspath(os.path.expanduser(given))
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            raise SettingsError(f"memory root {path} is not UTF-8, which {agent.title}'s settings cannot hold") from None
        if (refusal := broad_root_refusal(path)) is not None:
            raise SettingsError(f"{refusal}; nothing was changed")
        if os.path.isdir(path):
            continue
        if os.path.exists(path):
            raise SettingsError(f"memory root is not a folder: {path}; nothing was changed")
        if not allow_missing:
            raise SettingsError(
                f"memory root does not exist: {path}; nothing was changed (check the path, "
                "or pass --allow-missing to install it anyway)"
            )
        missing.append(path)
    return tuple(missing)


# --- the text: which entries are ours, and the edit --------------------------------------------------


def _entry(agent: Agent, command: str) -> dict[str, Any]:
    return {"type": "command", "command": command, "timeout": agent.hook_timeout}


def _group(agent: Agent, event: str, command: str) -> dict[str, Any]:
    group: dict[str, Any] = {"matcher": "*"} if event in TOOL_EVENTS else {}
    group["hooks"] = [_entry(agent, command)]
    return group


def _is_ours(entry: Node, agent: Agent) -> TypeGuard[Object]:  # TypeGuard narrows the first argument
    if not isinstance(entry, Object) or string_value(entry.get("type")) != "command":
        return False
    command = string_value(entry.get("command"))
    return command is not None and is_our_command(agent, command)


def _is_current(agent: Agent, entry: Object, command: str) -> bool:
    """Whether an entry of ours already reads exactly as ``_entry(agent, command)`` would write it."""
    timeout = entry.get("timeout")
    return (
        len(entry.members) == 3
        and string_value(entry.get("command")) == command
        and isinstance(timeout, Scalar)
        and not timeout.is_string
        and timeout.value == str(agent.hook_timeout)
    )


def _edited(agent: Agent, text: str, command: str | None) -> str:
    """``text`` with one entry of ours per hook event running ``command``, or with none when it is None."""
    root = parse(text, comments=agent.settings_comments)
    if not isinstance(root, Object):
        raise SettingsError("the file does not hold a JSON object")
    positions = [i for i, member in enumerate(root.members) if member.key == "hooks"]
    if not positions:
        if command is None:
            return text
        table = {event: [_group(agent, event, command)] for event in agent.events}
        return apply(text, edit_children(text, root, set(), [("hooks", table)]))
    hooks_at = positions[-1]  # as the agents read it: the last of duplicate keys wins
    hooks = root.members[hooks_at].value
    if not isinstance(hooks, Object):
        raise SettingsError("'hooks' in the settings file is not an object")
    effective = {member.key: i for i, member in enumerate(hooks.members)}
    splices: list[Splice] = []
    emptied: set[int] = set()
    for i, member in enumerate(hooks.members):
        wanted = command if member.key in agent.events and effective[member.key] == i else None
        if not isinstance(member.value, Array):
            if wanted is not None:
                raise SettingsError(f"'hooks.{member.key}' in the settings file is not a list")
            continue
        event_splices, now_empty = _edited_event(agent, text, member.value, member.key, wanted)
        if now_empty:
            emptied.add(i)
        else:
            splices += event_splices
    added = [(event, [_group(agent, event, command)]) for event in agent.events if event not in effective] if command else []
    if emptied and len(emptied) == len(hooks.members) and not added and not holds_comments(text, hooks):
        return apply(text, edit_children(text, root, {hooks_at}))  # only ours were in it: it goes with them
    return apply(text, splices + edit_children(text, hooks, emptied, added))


def _edited_event(agent: Agent, text: str, groups: Array, event: str, command: str | None) -> tuple[list[Splice], bool]:
    """The splices for one event's list of groups, and whether the list is left empty by dropping ours."""
    ours: list[tuple[int, int, Object]] = []
    for g, group in enumerate(groups.items):
        entries = group.get("hooks") if isinstance(group, Object) else None
        if isinstance(entries, Array):
            ours += [(g, e, entry) for e, entry in enumerate(entries.items) if _is_ours(entry, agent)]
    splices: list[Splice] = []
    kept: tuple[int, int] | None = None
    if command is not None and ours:
        g, e, first = ours[0]
        kept = (g, e)
        if not _is_current(agent, first, command):
            splices.append(replace(text, first, _entry(agent, command)))
    dropped: dict[int, set[int]] = {}
    for g, e, _node in ours:
        if (g, e) != kept:
            dropped.setdefault(g, set()).add(e)
    emptied_groups: set[int] = set()
    for g, indices in dropped.items():
        entries = _entries(groups.items[g])
        if len(indices) == len(entries.items):
            emptied_groups.add(g)  # nothing of the user's in it: the group goes too
        else:
            splices += edit_children(text, entries, indices)
    added = [_group(agent, event, command)] if command is not None and not ours else []
    if emptied_groups and len(emptied_groups) == len(groups.items) and not added and not holds_comments(text, groups):
        return [], True  # a list only ours filled goes with them (one a comment of the user's is in stays)
    return splices + edit_children(text, groups, emptied_groups, added), False


def _entries(group: Node) -> Array:
    """A group's list of hook entries, once known to be one."""
    entries = group.get("hooks") if isinstance(group, Object) else None
    assert isinstance(entries, Array)
    return entries


# --- the file: where it is, reading it, the backups, writing it --------------------------------------


def _edit_settings(
    agent: Agent, scope: str, cwd: Path | None, change: Callable[[str], str], dry_run: bool
) -> InstallResult:
    path = settings_path(agent, scope, cwd)
    target = _target(path, (cwd or Path.cwd()) if scope == "project" else None)
    old = _read(target, path)
    old_text = old or ""
    try:
        new_text = change(old_text)
    except JsonTextError as exc:
        raise SettingsError(f"{path} is not valid JSON ({exc}); fix it first, nothing was changed") from None
    except SettingsError as exc:
        raise SettingsError(f"{path}: {exc}; nothing was changed") from None
    if new_text == old_text:
        return InstallResult(path, False, "")
    if old is not None:
        _refuse_read_only(target, path)
        _refuse_hard_linked(target, path)
    diff = "".join(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            new_text.splitlines(keepends=True),
            fromfile=f"{path} (now)",
            tofile=f"{path} (after)",
        )
    )
    if dry_run:
        return InstallResult(path, True, diff)
    backup = original = None
    try:
        if old is None:
            _refuse_dangling_link(path, target)
            target.parent.mkdir(parents=True, exist_ok=True)
        else:
            backup, original = _keep_copies(agent, path, old)
        if _read(target, path) != old:  # the agent (or an editor) wrote it meanwhile: theirs wins
            raise SettingsError(f"{path} changed while recall-kit was editing it; nothing was changed, run it again")
        atomic_write(target, new_text)
    except MemoryStoreError as exc:
        raise SettingsError(f"cannot write {path}: {exc}") from None
    except OSError as exc:
        failed = exc.filename if exc.filename and os.path.abspath(exc.filename) != str(target) else path  # a backup in the way
        raise SettingsError(f"cannot write {failed}: {exc.strerror}; {path} was not changed") from None
    return InstallResult(path, True, diff, backup, original)


def read_settings(path: Path, project: Path | None) -> str | None:
    """The text of the settings file at ``path`` (None when there is none), read as an edit would
    read it: through its symlinks, inside ``project`` when it is a project's. SettingsError otherwise."""
    return _read(_target(path, project), path)


def _target(path: Path, project: Path | None) -> Path:
    """The file to rewrite: ``path`` with every symlink resolved, so a link (to a dotfiles repo, say)
    stays a link. A project's settings must stay inside the project."""
    target = Path(os.path.realpath(path))
    if project is not None and not target.is_relative_to(os.path.realpath(project)):
        raise SettingsError(f"{path} leads to {target}, outside this project; nothing was changed")
    return target


def _refuse_dangling_link(path: Path, target: Path) -> None:
    """SettingsError when the file, or the nearest folder on its way that is there, is a link to
    nowhere: its target's folders are not ours to make (as root, anywhere at all). Folders missing
    below a real one (a first install, a home reached through a link) are made as before."""
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if (path.is_symlink() and not target.parent.is_dir()) or (folder.is_symlink() and not folder.is_dir()):
        raise SettingsError(f"{path} leads to {target}, whose folder does not exist; nothing was changed")


def _read(target: Path, path: Path) -> str | None:
    """The settings text (None when there is no file); SettingsError unless a regular UTF-8 file of at
    most MAX_SETTINGS_BYTES (a clone's settings are not the user's: never read whole, never waited on)."""
    try:
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SettingsError(f"{path} is not a regular file; nothing was changed")
        data = b""
        while info.st_size <= MAX_SETTINGS_BYTES and len(data) <= MAX_SETTINGS_BYTES:  # a short read is not the end
            if not (chunk := os.read(fd, MAX_SETTINGS_BYTES + 1 - len(data))):
                break
            data += chunk
        if info.st_size > MAX_SETTINGS_BYTES or len(data) > MAX_SETTINGS_BYTES:  # grown since the fstat too
            raise SettingsError(f"{path} is over {MAX_SETTINGS_BYTES:,} bytes, more than a settings file holds; nothing was changed")
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path} is not UTF-8 (invalid byte at offset {exc.start}); nothing was changed") from None


def _refuse_read_only(target: Path, path: Path) -> None:
    """A file its owner made read-only is a decision to keep: refused, even where root could write it."""
    info = os.stat(target)
    if not info.st_mode & stat.S_IWUSR or not os.access(target, os.W_OK):
        shown = str(path) if target == path else f"{path} (-> {target})"
        raise SettingsError(f"{shown} is read-only; nothing was changed (make it writable first)")


def _refuse_hard_linked(target: Path, path: Path) -> None:
    """A file with a second hard link (a dotfiles copy) would be split from it by the atomic rename:
    refused, as a symlink is followed instead."""
    links = os.stat(target).st_nlink
    if links > 1:
        shown = str(path) if target == path else f"{path} (-> {target})"
        raise SettingsError(f"{shown} has {links} hard links, and a rewrite would split them; nothing was changed "
                            "(make it a symlink, or one file, first)")


def _keep_copies(agent: Agent, path: Path, old_text: str) -> tuple[Path, Path | None]:
    """Copy the file as it is to the backup beside ``path``, and to the original when there is none
    yet and the file holds nothing of ours (it is then the user's own); the paths written."""
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    _write_private(backup, old_text)
    original = path.with_name(path.name + ORIGINAL_SUFFIX)
    if os.path.lexists(original) or _holds_ours(agent, old_text):
        return backup, None
    _write_private(original, old_text)
    return backup, original


def _holds_ours(agent: Agent, text: str) -> bool:
    try:
        return without_our_hooks(agent, text) != text
    except (JsonTextError, SettingsError):
        return False


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, as a regular file of this user's only they can read
    (settings may hold keys, in an "env" table).

    Whatever was at ``path`` is never followed or kept as it was: a symlink, a hard link or another
    user's file there is removed (the link itself, never its target) and a new file made; a file of
    ours is made 0600 before the write, since ``atomic_write`` keeps an existing file's mode."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    ours = info is not None and stat.S_ISREG(info.st_mode) and info.st_nlink == 1 and info.st_uid == os.getuid()
    if info is not None and not ours:
        os.unlink(path)  # a folder there fails here, as an OSError the caller reports
    created = not ours
    fd = open_private(path, os.O_WRONLY, create=True)  # made 0600; refuses a symlink that appeared meanwhile
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    finally:
        os.close(fd)
    try:
        atomic_write(path, text)
    except MemoryStoreError:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


def _recall_kit_executable() -> str:
    """The absolute path of this recall-kit, so the hook works without it on the agent's PATH."""
    candidate = Path(sys.executable).parent / "recall-kit"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which("recall-kit") or "recall-kit"
