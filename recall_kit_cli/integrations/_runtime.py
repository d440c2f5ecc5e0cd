"""Per-user places: the daemon's socket and lock, and the state folder the hook logs to (XDG rules).

Every folder on the way to them must be this user's alone (``memory_store.private_folder``), and
every file in them is opened through ``memory_store.open_private``: never through a symlink, never a FIFO.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from recall_kit.limits import HOOK_LOG_LINE_CHARS, HOOK_LOG_MAX_BYTES

APP = "recall-kit"


@dataclass(frozen=True, slots=True)
class RuntimePaths:
    """Where one user's daemon listens and locks, where the hook and the daemon log, and the recall trail."""

    folder: Path  # 0700, the user's own (checked by whoever uses it)
    state: Path

    @property
    def socket(self) -> Path:
        return self.folder / "daemon.sock"

    @property
    def lock(self) -> Path:
        return self.folder / "daemon.lock"

    @property
    def spawn_lock(self) -> Path:
        """Held by the hook that starts a daemon, then by that daemon for its life: one start at a time."""
        return self.folder / "spawn.lock"

    @property
    def hook_log(self) -> Path:
        return self.state / "hook.log"

    @property
    def daemon_log(self) -> Path:
        return self.state / "daemon.log"

    @property
    def trail(self) -> Path:
        return self.state / "trail.jsonl"

    @property
    def surfaced(self) -> Path:
        """What the daemon delivered in each session (``_surfaced``)."""
        return self.state / "surfaced.jsonl"


def runtime_paths(environ: "os._Environ[str] | dict[str, str] | None" = None) -> RuntimePaths:
    """$XDG_RUNTIME_DIR/recall-kit, else a per-user folder under the cache dir; state under $XDG_STATE_HOME."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        folder = Path(runtime) / APP
    else:
        cache = env.get("XDG_CACHE_HOME")
        base = Path(cache) if cache and os.path.isabs(cache) else home / ".cache"
        folder = base / APP / f"run-{os.getuid()}"
    state_home = env.get("XDG_STATE_HOME")
    state = (Path(state_home) if state_home and os.path.isabs(state_home) else home / ".local" / "state") / APP
    return RuntimePaths(folder, state)


def append_log(path: Path, message: str) -> bool:
    """One timestamped line in ``path``; whether it was written. Never raises: logging must not
    become the failure."""
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid={os.getpid()} {log_text(message)}\n"
    return append_line(path, line, rotate_at=HOOK_LOG_MAX_BYTES)


def log_text(message: str) -> str:
    """``message`` as one line of a log or of stderr: what the agent sent in it (an event's name) may
    hold terminal escapes or be a megabyte, so control and format characters are escaped and it is cut."""
    text = " ".join(message.split())
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
    return text if len(text) <= HOOK_LOG_LINE_CHARS else text[: HOOK_LOG_LINE_CHARS - 1] + "…"


def append_line(path: Path, line: str, *, rotate_at: int) -> bool:
    """``line`` appended to the private log ``path`` (``open_log``, rotated past ``rotate_at`` bytes);
    whether it was written. Never raises: a record that cannot be kept must not become the failure."""
    from memory_store import RecallKitError  # its errors module alone: cheap

    try:
        fd = open_log(path, rotate_at=rotate_at)
        try:
            end = os.fstat(fd).st_size
            if end and os.pread(fd, 1, end - 1) != b"\n":
                line = "\n" + line  # the last line was cut (kill -9, a full disk): it stays alone, unread
            os.write(fd, line.encode("utf-8", "replace"))
        finally:
            os.close(fd)
    except (OSError, RecallKitError):
        return False
    return True


def open_log(path: Path, *, rotate_at: int | None = None) -> int:
    """A descriptor appending to ``path`` in a private folder, never through a symlink, never a
    FIFO; past ``rotate_at`` bytes the file is renamed to ``<name>.1`` first. UnsafePathError or
    OSError when it cannot be used."""
    from memory_store import open_private, private_folder  # the private-path helpers alone: cheap

    private_folder(path.parent)
    fd = open_private(path, os.O_RDWR | os.O_APPEND, create=True)  # readable: append_line looks at the last byte
    try:
        too_big = rotate_at is not None and os.fstat(fd).st_size > rotate_at
    except OSError:
        os.close(fd)
        raise
    if too_big:
        os.close(fd)
        os.replace(path, path.with_name(path.name + ".1"))  # renames the file we checked, whatever it links to
        fd = open_private(path, os.O_RDWR | os.O_APPEND, create=True)
    return fd
