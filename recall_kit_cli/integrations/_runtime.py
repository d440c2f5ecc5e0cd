"""Per-user places: the daemon's socket and lock, and the state folder the hook logs to (XDG rules)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from recall_kit.limits import HOOK_LOG_MAX_BYTES

APP = "recall-kit"


@dataclass(frozen=True, slots=True)
class RuntimePaths:
    """Where one user's daemon listens and locks, and where the hook and the daemon log."""

    folder: Path  # 0700, the user's own
    state: Path

    @property
    def socket(self) -> Path:
        return self.folder / "daemon.sock"

    @property
    def lock(self) -> Path:
        return self.folder / "daemon.lock"

    @property
    def hook_log(self) -> Path:
        return self.state / "hook.log"

    @property
    def daemon_log(self) -> Path:
        return self.state / "daemon.log"


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


def private_folder(folder: Path) -> Path:
    """Create ``folder`` as 0700 and check it is ours: a socket must not sit where others can swap it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid():
        raise PermissionError(f"{folder} belongs to uid {info.st_uid}, not to us")
    if info.st_mode & 0o077:
        os.chmod(folder, 0o700)
    return folder


def append_log(path: Path, message: str) -> None:
    """One timestamped line; never raises (logging must not become the failure)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.stat().st_size > HOOK_LOG_MAX_BYTES:
                os.replace(path, path.with_name(path.name + ".1"))
        except FileNotFoundError:
            pass
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{stamp} pid={os.getpid()} {' '.join(message.split())}\n")
    except OSError:
        pass
