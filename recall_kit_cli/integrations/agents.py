"""Each agent recall-kit hooks into, as one frozen record: where its settings are, how it reads a
hook's timeout, which events it sends, and which folders it keeps its memory in.

The folder rules are the agents' own, read from their bundles (Claude Code 2.1.197, Qwen Code
0.24.4) and restated here, once: the hook applies them to each event's ``cwd`` and
``transcript_path``; ``hook status`` applies them to the current folder. Standard library only:
the hook imports this on every prompt.

What the rules may reach is bounded before the daemon's own checks: a ``cwd`` or
``transcript_path`` that is not an absolute path of at most ``MAX_PATH_CHARS`` characters (no NUL)
is ignored, ``..`` is resolved lexically first, a project's folder name is made of letters, digits
and ``-`` only (so it is one folder under the agent's ``projects``), and the files read on the way
(``.git``, a worktree's ``commondir`` and ``gitdir``, the user's settings) are regular files read
without blocking, at most ``MAX_SETTINGS_BYTES`` each.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Mapping
from typing import NamedTuple

from memory_store import parse_json  # the JSON reader alone: cheap

MAX_PATH_CHARS = 4096  # PATH_MAX: a longer cwd or transcript_path is no path the agent could have
MAX_SETTINGS_BYTES = 1 << 20  # a settings file or a git pointer file; anything larger is not one
_CLAUDE_MAX_KEY_CHARS = 200  # Claude Code cuts a longer project folder name and appends a hash
# SessionStart only starts the daemon, so that the session's first prompt finds it warm
HOOK_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd")
# The records are NamedTuples, frozen like a dataclass but made ten times faster (0.2 ms against 2 ms
# each, measured by timing the class statements): the hook imports this module on every prompt.


class MemoryFolder(NamedTuple):
    """One folder an agent keeps memories in: its path and what it is (project, user, team)."""

    kind: str
    path: str


class EventContext(NamedTuple):
    """What a folder rule reads: the event's ``cwd`` and ``transcript_path`` (None when unusable),
    the environment the agent gave its hook, and the home folder."""

    cwd: str | None
    transcript_path: str | None
    environ: Mapping[str, str]
    home: str


class Agent(NamedTuple):
    """One agent: its settings files, its hook timeout (in its own unit), its events and its folders."""

    name: str  # as on the command line: `recall-kit hook <name>`
    title: str
    config_dir: str  # under the home folder (user scope) and under the project (project scope)
    timeout_unit: str  # what a hook entry's "timeout" counts
    hook_timeout: int  # in timeout_unit: the agent's limit for our command; the hook gives up well before
    events: tuple[str, ...]
    tested_version: str
    folders: Callable[[EventContext], tuple[MemoryFolder, ...]]
    # How much of a folder's MEMORY.md the agent loads into its context: the trimmed text's first
    # index_lines lines, then cut at the last line break before index_chars (UTF-16 code units)
    index_lines: int
    index_chars: int
    install_note: str = ""  # said after `hook install`: what the user should also set
    # where the note asking for keywords reaches the agent's memory writer: at SessionStart (the
    # session's first prompt when the daemon could not answer then), or with the first prompt only
    writing_note_at_start: bool = True
    writing_note_at: str = "at each session's start"
    settings_comments: bool = False  # its settings reader takes // and /* */ comments and a byte-order mark

    def settings_path(self, scope: str, cwd: str, home: str) -> str:
        """The settings file of ``scope`` ("user" or "project", the project being ``cwd``)."""
        return os.path.join(cwd if scope == "project" else home, self.config_dir, "settings.json")


def event_context(payload: Mapping[str, object], environ: Mapping[str, str]) -> EventContext:
    """The hook event's ``cwd`` and ``transcript_path`` as a rule may use them (None when not a
    plausible absolute path), with ``..`` resolved lexically."""
    home = environ.get("HOME") or os.path.expanduser("~")
    return EventContext(_usable_path(payload.get("cwd")), _usable_path(payload.get("transcript_path")), environ, home)


def folders_at(agent: Agent, cwd: str, environ: Mapping[str, str]) -> tuple[MemoryFolder, ...]:
    """The memory folders a prompt in ``cwd`` recalls from, existing or not, by the hook's own rule
    (``Agent.folders`` of the event such a prompt brings): what `hook status` and `doctor` show."""
    return agent.folders(event_context({"cwd": cwd}, dict(environ)))


def existing_folders(folders: tuple[MemoryFolder, ...]) -> list[str]:
    """The paths of ``folders`` that are folders now (a folder that appears later is opened by the
    first prompt after it does), each once."""
    return list(dict.fromkeys(f.path for f in folders if os.path.isdir(f.path)))


def _usable_path(value: object) -> str | None:
    if not isinstance(value, str) or not value or len(value) > MAX_PATH_CHARS or "\0" in value:
        return None
    if not os.path.isabs(value):
        return None
    return os.path.normpath(value)


# --- files read on the way ------------------------------------------------------------------------


def _read_small(path: str) -> str | None:
    """A regular file's text, read without blocking (a FIFO never hangs the hook); None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SETTINGS_BYTES:
            return None
        return os.read(fd, MAX_SETTINGS_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    finally:
        os.close(fd)


def _user_setting(settings_file: str, *keys: str) -> object:
    """``settings[keys[0]][keys[1]]...`` of a JSON settings file; None when absent or unreadable."""
    text = _read_small(settings_file)
    if text is None:
        return None
    try:
        value: object = parse_json(text)
    except ValueError:
        return None
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def git_top(start: str) -> str | None:
    """The git work tree ``start`` is in (the nearest folder at or above it holding a ``.git``), as
    both agents find a project; None outside git."""
    return _git_root(start)


def _git_root(start: str) -> str | None:
    """The nearest folder at or above ``start`` holding a ``.git`` (folder or file), as both agents look."""
    current = start
    while True:
        try:
            info = os.stat(os.path.join(current, ".git"))
            if stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode):
                return current
        except (OSError, ValueError):
            pass
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _claude_canonical_root(root: str) -> str:
    """A git worktree's main repository, as Claude Code finds it (every link checked both ways);
    ``root`` itself when it is not a worktree."""
    pointer = _read_small(os.path.join(root, ".git"))
    if pointer is None or not pointer.strip().startswith("gitdir:"):
        return root
    gitdir = os.path.normpath(os.path.join(root, pointer.strip()[len("gitdir:") :].strip()))
    common = _read_small(os.path.join(gitdir, "commondir"))
    back = _read_small(os.path.join(gitdir, "gitdir"))
    if common is None or back is None:
        return root
    shared = os.path.normpath(os.path.join(gitdir, common.strip()))
    if os.path.dirname(gitdir) != os.path.join(shared, "worktrees"):
        return root
    if os.path.realpath(back.strip()) != os.path.join(os.path.realpath(root), ".git"):
        return root
    return shared if os.path.basename(shared) != ".git" else os.path.dirname(shared)


def _sanitized(path: str) -> str:
    """A path as one folder name, as both agents make it (a JavaScript regex over UTF-16 code units):
    every code unit but ASCII letters and digits becomes '-', so a character beyond the BMP is '--'."""
    return re.sub(r"[^a-zA-Z0-9]", lambda m: "--" if ord(m.group()) > 0xFFFF else "-", path)


def _claude_key(path: str) -> str:
    """Claude Code's project folder name: sanitised, and past 200 characters cut and followed by a hash."""
    key = _sanitized(path)
    if len(key) <= _CLAUDE_MAX_KEY_CHARS:
        return key
    return f"{key[:_CLAUDE_MAX_KEY_CHARS]}-{_base36(abs(_java_hash(path)))}"


def _java_hash(text: str) -> int:
    """JavaScript's ``h = (h << 5) - h + charCode | 0`` over UTF-16 code units (Claude Code's hash)."""
    return _java_hash_prefixes(text)[0][-1] if text else 0


def _java_hash_prefixes(text: str) -> tuple[list[int], list[int]]:
    """``_java_hash(text[:i + 1])`` and the UTF-16 length of ``text[:i + 1]``, for every ``i``, in one pass."""
    hashes, units, h, n = [], [], 0, 0
    for char in text:
        for unit in (ord(char),) if ord(char) < 0x10000 else _surrogates(ord(char)):
            h = (h * 31 + unit) & 0xFFFFFFFF
            n += 1
        hashes.append(h - (1 << 32) if h >= 1 << 31 else h)
        units.append(n)
    return hashes, units


def _surrogates(code: int) -> tuple[int, int]:
    code -= 0x10000
    return 0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


# --- Claude Code -------------------------------------------------------------------------------------


def _claude_home(ctx: EventContext) -> str:
    configured = ctx.environ.get("CLAUDE_CONFIG_DIR")
    return configured if configured and os.path.isabs(configured) else os.path.join(ctx.home, ".claude")


def _claude_custom_folder(value: object, home: str) -> str | None:
    """``autoMemoryDirectory`` as Claude Code takes it: ``~/`` expanded, absolute, not a bare root."""
    if not isinstance(value, str) or not value or "\0" in value or len(value) > MAX_PATH_CHARS:
        return None
    if value.startswith("~/"):
        rest = os.path.normpath(value[2:] or ".")
        if rest in (".", "..") or rest.startswith("../"):
            return None
        value = os.path.join(home, rest)
    folder = os.path.normpath(value).rstrip("/")
    if not os.path.isabs(folder) or len(folder) < 3 or folder.startswith("//"):
        return None
    return folder


def _claude_session_start(ctx: EventContext, projects: str) -> str | None:
    """The folder the session started in: Claude Code keeps the transcript under the folder named
    after it, and ``cwd`` moves when a command changes folder. The ``cwd`` itself, or the folder
    above it whose name matches the transcript's project folder."""
    cwd = ctx.cwd
    transcript = ctx.transcript_path
    if transcript is None or os.path.dirname(os.path.dirname(transcript)) != projects:
        return cwd  # no transcript under this agent's projects folder: the cwd is all there is
    named = os.path.basename(os.path.dirname(transcript))
    if cwd is None:
        return None
    # a folder above is a prefix of the cwd, and so are its name and its hash's state: one pass over
    # the cwd, not one per folder (a 4,096-character cwd has 2,048 folders above it)
    sanitized, (hashes, units) = _sanitized(cwd), _java_hash_prefixes(cwd)
    candidate = cwd
    while True:
        size = units[len(candidate) - 1]  # in UTF-16 code units, as the name is
        key = sanitized[:size]
        if size > _CLAUDE_MAX_KEY_CHARS:
            key = f"{key[:_CLAUDE_MAX_KEY_CHARS]}-{_base36(abs(hashes[len(candidate) - 1]))}"
        if key == named:
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return cwd
        candidate = parent


def claude_code_folders(ctx: EventContext) -> tuple[MemoryFolder, ...]:
    """Claude Code's auto-memory folder for the event's project: ``autoMemoryDirectory`` from the
    user's own settings (never a project's: a checked-in file may not move it), else
    ``<config>/projects/<project>/memory``, the project being the git repository's main folder
    (a worktree counts as its repository) or, outside git, the folder the session started in."""
    config_home = _claude_home(ctx)
    custom = _claude_custom_folder(_user_setting(os.path.join(config_home, "settings.json"), "autoMemoryDirectory"), ctx.home)
    if custom is not None:
        return (MemoryFolder("project", custom),)
    projects = os.path.join(config_home, "projects")
    start = _claude_session_start(ctx, projects)
    if start is None:
        return ()
    git_root = _git_root(start)
    project = _claude_canonical_root(git_root) if git_root is not None else start
    return (MemoryFolder("project", os.path.join(projects, _claude_key(project), "memory")),)


# --- Qwen Code ---------------------------------------------------------------------------------------


def _absolute_folder(ctx: EventContext, name: str) -> str | None:
    """The folder the variable ``name`` names, when it is an absolute path (``~`` expanded); a relative one
    would be taken from the project's folder, where a clone could put what it likes: ignored, as
    Claude Code's ``CLAUDE_CONFIG_DIR`` is."""
    value = ctx.environ.get(name)
    if not value or "\0" in value or len(value) > MAX_PATH_CHARS:
        return None
    if value == "~" or value.startswith("~/"):
        value = ctx.home + value[1:]
    return os.path.normpath(value) if os.path.isabs(value) else None


def _qwen_home(ctx: EventContext) -> str:
    return _absolute_folder(ctx, "QWEN_HOME") or os.path.join(ctx.home, ".qwen")


def _qwen_memory_base(ctx: EventContext) -> str:
    for name in ("QWEN_CODE_MEMORY_BASE_DIR", "QWEN_RUNTIME_DIR"):
        folder = _absolute_folder(ctx, name)
        if folder is not None:
            return folder
    return _qwen_home(ctx)


def _qwen_team_memory_on(ctx: EventContext) -> bool:
    """``QWEN_CODE_MEMORY_TEAM`` ('0' off, '1' on), else ``memory.enableTeamMemory`` in the user's
    own settings (a project's settings file may not turn on reading the repository's folder)."""
    override = ctx.environ.get("QWEN_CODE_MEMORY_TEAM")
    if override in ("0", "1"):
        return override == "1"
    return _user_setting(os.path.join(_qwen_home(ctx), "settings.json"), "memory", "enableTeamMemory") is True


def qwen_code_folders(ctx: EventContext) -> tuple[MemoryFolder, ...]:
    """Qwen Code's memory folders: ``<base>/projects/<project>/memory`` (the project is the git
    root above ``cwd``, or ``cwd``; a worktree is a project of its own), the user-level
    ``<base>/memories``, and, when team memory is on, ``.qwen/team-memory`` in the repository."""
    base = _qwen_memory_base(ctx)
    folders = []
    if ctx.cwd is not None:
        git_root = _git_root(ctx.cwd)
        if ctx.environ.get("QWEN_CODE_MEMORY_LOCAL") == "1":
            folders.append(MemoryFolder("project", os.path.join(ctx.cwd, ".qwen", "memory")))
        else:
            workspace = (ctx.environ.get("QWEN_CODE_MEMORY_PROJECT_SCOPE") or "").strip().lower() == "workspace"
            project = ctx.cwd if workspace or git_root is None else git_root
            folders.append(MemoryFolder("project", os.path.join(base, "projects", _sanitized(project), "memory")))
    folders.append(MemoryFolder("user", os.path.join(base, "memories")))
    if ctx.cwd is not None and _qwen_team_memory_on(ctx):
        folders.append(MemoryFolder("team", os.path.join(git_root or ctx.cwd, ".qwen", "team-memory")))
    return tuple(folders)


CLAUDE_CODE = Agent(
    name="claude-code",
    title="Claude Code",
    config_dir=".claude",
    timeout_unit="seconds",
    hook_timeout=5,
    events=HOOK_EVENTS,
    tested_version="2.1.197",
    folders=claude_code_folders,
    index_lines=200,  # "lines after 200 will be truncated" (its prompt; iX=200, Zce=25000 in 2.1.197)
    index_chars=25_000,
)

QWEN_CODE = Agent(
    name="qwen-code",
    title="Qwen Code",
    config_dir=".qwen",
    timeout_unit="seconds",  # a command timeout of 1000 or more it reads as milliseconds
    hook_timeout=5,
    events=HOOK_EVENTS,
    tested_version="0.24.4",
    folders=qwen_code_folders,
    # its memory extractor is a request of its own that reads the conversation but not the system
    # prompt SessionStart context goes into (checked with `qwen -p`, docs/integrations.md)
    writing_note_at_start=False,
    writing_note_at="with each session's first prompt (its memory extractor reads the conversation, not SessionStart context)",
    index_lines=200,  # MAX_MANAGED_AUTO_MEMORY_INDEX_LINES and _BYTES in 0.24.4's bundle
    index_chars=25_000,
    settings_comments=True,  # it reads settings.json with strip-json-comments, then JSON.parse
    install_note=(
        "Qwen Code recalls the same memory folders itself, beside this hook, so a memory can reach "
        "the model twice; its only switch, \"memory\": {\"enableManagedAutoMemory\": false} in "
        "~/.qwen/settings.json, also stops it writing new memories (see docs/integrations.md)"
    ),
)

AGENTS: dict[str, Agent] = {agent.name: agent for agent in (CLAUDE_CODE, QWEN_CODE)}
