"""The two recall-kit.toml files and the project files the user trusted.

The project file, ``./recall-kit.toml``, comes with whatever folder the user is in (a repo just
cloned): it is not trusted. The user's own file (``RECALL_KIT_CONFIG``, else ``recall-kit.toml`` in
the user's config folder) is read only when it is a regular file of this user's that others cannot
write. `recall-kit config trust` records a project file in the user's file by its real path and the
SHA-256 of its bytes; a trusted file whose bytes change is untrusted again (as direnv and mise do).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

import platformdirs

from memory_store import MemoryStoreError, UnsafePathError, atomic_write, open_private, private_folder, private_lock
from recall_kit._errors import ConfigError
from recall_kit.limits import CONFIG_MAX_BYTES

CONFIG_FILE_NAME = "recall-kit.toml"
USER_CONFIG_ENV = "RECALL_KIT_CONFIG"
_BLOCK_START = "# >>> trusted project files: written by `recall-kit config trust` and `recall-kit config untrust`"
_BLOCK_END = "# <<< trusted project files"

TrustState = Literal["trusted", "untrusted", "changed"]
TRUST_LABELS: dict[TrustState, str] = {
    "trusted": "trusted", "untrusted": "untrusted", "changed": "untrusted: changed since you trusted it",
}  # as `recall-kit config` and every source string show them


@dataclass(frozen=True, slots=True)
class ConfigFile:
    """A recall-kit.toml as it was read: its path, the SHA-256 of its bytes, and its content."""

    path: Path
    sha256: str
    data: Mapping[str, Any]
    text: str


def read_project_file(path: str | os.PathLike[str]) -> ConfigFile:
    """A recall-kit.toml read once: the bytes hashed are the bytes parsed. ConfigError when it
    cannot be read or parsed, is not a regular file (a FIFO or a device is opened without
    blocking and never read) or is over ``CONFIG_MAX_BYTES``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path}: not a regular file")
        os.set_blocking(fd, True)
        raw = _read_bounded(f, path)
    return _parse(Path(path), raw)


def _read_bounded(f: Any, path: str | os.PathLike[str]) -> bytes:
    try:
        raw: bytes = f.read(CONFIG_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    if len(raw) > CONFIG_MAX_BYTES:
        raise ConfigError(f"{path}: over {CONFIG_MAX_BYTES >> 20} MiB, not a config file")
    return raw


def _parse(path: Path, raw: bytes) -> ConfigFile:
    import tomllib  # only a folder with a config file needs it

    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (invalid byte at offset {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses once per level of nesting: [[[[...]]]] 600 deep
        raise ConfigError(f"{path}: not valid TOML (nested too deeply)") from None
    return ConfigFile(path, hashlib.sha256(raw).hexdigest(), data, text)


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the user's own config file is: ``RECALL_KIT_CONFIG`` (an absolute path, else ConfigError),
    else ``recall-kit.toml`` in the user's config folder (``~/.config/recall-kit`` on Linux)."""
    env = os.environ if environ is None else environ
    given = env.get(USER_CONFIG_ENV)
    if given:
        path = os.path.expanduser(given)
        if not os.path.isabs(path):  # relative to a cloned repo, it would make the repo's file the user's own
            raise ConfigError(f"environment variable {USER_CONFIG_ENV}: must be an absolute path, got {given!r}")
        return Path(path)
    return Path(platformdirs.user_config_dir("recall-kit")) / CONFIG_FILE_NAME


def read_user_file(path: Path) -> ConfigFile | None:
    """The user's own file, or None when there is none. ConfigError when it is not a regular file
    of this user's (a symlink is followed to one), or when others can write to it."""
    real = Path(os.path.realpath(path))
    try:
        fd = open_private(real)
    except FileNotFoundError:
        return None
    except (UnsafePathError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: not used as your config file ({reason})") from None
    with os.fdopen(fd, "rb") as f:
        mode = stat.S_IMODE(os.fstat(f.fileno()).st_mode)
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ConfigError(
                f"{path}: not used as your config file (others can write to it, mode {mode:04o}; run chmod go-w on it)"
            )
        raw = _read_bounded(f, path)
    return _parse(path, raw)


def trusted_files(user: ConfigFile | None) -> dict[str, str]:
    """The project files the user trusted: ``trust_key`` -> SHA-256. ConfigError for a malformed record."""
    if user is None:
        return {}
    records = user.data.get("trusted", [])
    if not isinstance(records, list) or not all(
        isinstance(r, dict) and isinstance(r.get("path"), str) and isinstance(r.get("sha256"), str) for r in records
    ):
        raise ConfigError(f"{user.path}: every [[trusted]] entry needs a path and a sha256 (strings)")
    return {r["path"]: r["sha256"] for r in records}


def trust_key(path: str | os.PathLike[str]) -> str:
    """Where a project file is, as its trust is recorded: its folders resolved, never the file itself.
    A symlink a clone ships to a file the user trusted elsewhere is not that file: its settings (relative
    roots, learning) would apply to the clone's folder, which the user never trusted."""
    path = os.path.abspath(os.fspath(path))
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def trust_state(project: ConfigFile, trusted: Mapping[str, str]) -> TrustState:
    """Whether the user trusted this project file as it is now, never did, or did before it changed."""
    recorded = trusted.get(trust_key(project.path))
    if recorded is None:
        return "untrusted"
    return "trusted" if recorded == project.sha256 else "changed"


@dataclass(frozen=True, slots=True)
class SettingsFiles:
    """The two recall-kit.toml files, each read once: what a command resolves its settings from."""

    user_path: Path | None  # where the user's file is (None: RECALL_KIT_CONFIG is unusable)
    user_source: str  # "environment variable RECALL_KIT_CONFIG" or "default"
    user: ConfigFile | None
    project_path: Path
    project: ConfigFile | None
    trust: TrustState | None  # the project file's, when there is one
    problems: Mapping[str, str] = field(default_factory=dict)  # "user_config" / "config_file" -> why unusable


def read_settings_files(
    environ: Mapping[str, str] | None = None, project_path: str | os.PathLike[str] | None = None
) -> SettingsFiles:
    """Read the user's file and the project file (``./recall-kit.toml`` unless ``project_path``)
    once each. Never raises: a file that cannot be used is a problem of ``user_config`` or ``config_file``."""
    env = os.environ if environ is None else environ
    problems: dict[str, str] = {}
    project_file = Path(project_path) if project_path is not None else Path.cwd() / CONFIG_FILE_NAME
    project = None
    if project_path is not None or project_file.is_file():
        try:
            project = read_project_file(project_file)
        except ConfigError as exc:
            problems["config_file"] = str(exc)
    user_source = f"environment variable {USER_CONFIG_ENV}" if env.get(USER_CONFIG_ENV) else "default"
    user, user_path, trusted = None, None, {}
    try:
        user_path = user_config_path(env)
        user = read_user_file(user_path)
        trusted = trusted_files(user)
    except ConfigError as exc:
        problems["user_config"] = str(exc)
    trust = trust_state(project, trusted) if project is not None else None
    return SettingsFiles(user_path, user_source, user, project_file, project, trust, problems)


def project_file_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The project file ``path`` names (a folder means its recall-kit.toml); ``./recall-kit.toml`` by default."""
    given = Path(os.path.abspath(os.fspath(path) if path is not None else CONFIG_FILE_NAME))
    return given / CONFIG_FILE_NAME if given.is_dir() else given


def trust_config_file(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> ConfigFile:
    """Record the project file ``path`` (default ``./recall-kit.toml``), as it is now, as trusted in
    the user's config file: its endpoint may then receive the user's API key. Returns the file trusted."""
    project = read_project_file(project_file_path(path))
    _edit_trusted(environ, lambda trusted: {**trusted, trust_key(project.path): project.sha256})
    return project


def untrust_config_file(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> tuple[Path, bool]:
    """Remove the project file ``path`` (default ``./recall-kit.toml``) from the trusted files: the
    file meant, and whether it was trusted. The file itself need not exist any more."""
    project = project_file_path(path)
    key = trust_key(project)
    if key not in trusted_files(read_user_file(user_config_path(environ))):
        return project, False
    _edit_trusted(environ, lambda trusted: {p: h for p, h in trusted.items() if p != key})
    return project, True


def _edit_trusted(environ: Mapping[str, str] | None, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    """Rewrite the trusted block of the user's file (at its end), keeping every other byte; read, changed
    and replaced under a lock beside it, so that two at once never lose each other's change (an untrust
    undone by a trust of another file would leave the project file trusted)."""
    path = user_config_path(environ)
    real = Path(os.path.realpath(path))
    try:
        if not real.parent.exists():
            private_folder(real.parent)
        with private_lock(real.with_name(real.name + ".lock")):
            _edit_locked(path, real, change)
    except (MemoryStoreError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{path}: cannot record trust ({reason})") from None


def _edit_locked(path: Path, real: Path, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    user = read_user_file(path)
    wanted = change(trusted_files(user))
    text = _with_trusted_block(path, user.text if user else "", wanted)
    if trusted_files(_parse(path, text.encode("utf-8"))) != wanted:  # e.g. [[trusted]] written by hand elsewhere
        raise ConfigError(f"{path}: has [[trusted]] entries outside the block recall-kit writes; edit them by hand")
    if user is None:
        os.close(open_private(real, os.O_WRONLY, create=True))  # 0600 before anything is in it
    atomic_write(real, text)


def _with_trusted_block(path: Path, text: str, trusted: Mapping[str, str]) -> str:
    """``text`` without the block recall-kit wrote, then the block for ``trusted`` (if any) at the end,
    where its [[trusted]] tables cannot capture keys the user wrote. Every other byte is kept as the
    user wrote it (line endings, blank lines, a final newline or its absence): the block uses the
    file's line ending, and trusting then untrusting gives back the same bytes. ConfigError when the
    block has lost its end line: what follows its start could be the user's own lines."""
    lines = text.splitlines(keepends=True)
    first_end = next((line[len(line.rstrip("\r\n")):] for line in lines if line.endswith("\n")), "\n")
    newline = "\r\n" if first_end == "\r\n" else "\n"
    bare = [line.rstrip("\r\n") for line in lines]
    if _BLOCK_START in bare:
        start = bare.index(_BLOCK_START)
        if _BLOCK_END not in bare[start:]:
            raise ConfigError(
                f"{path}: the trusted block's end line ({_BLOCK_END!r}) is missing; put it back after the block's"
                " last [[trusted]] entry, or delete the block, by hand"
            )
        end = bare.index(_BLOCK_END, start)
        before, after = "".join(lines[:start]), "".join(lines[end + 1 :])
        if not after and not lines[end].endswith("\n") and before.endswith("\n"):
            before = before[: -len(newline)] if before.endswith(newline) else before[:-1]  # the newline we added
        text = before + after
    if not trusted:
        return text
    block = [_BLOCK_START]
    for real, sha256 in sorted(trusted.items()):
        block += ["[[trusted]]", f"path = {_toml_string(real)}", f'sha256 = "{sha256}"']
    block.append(_BLOCK_END)
    if not text or text.endswith("\n"):
        return text + "".join(line + newline for line in block)
    return text + newline + newline.join(block)  # no final newline before: none after


def _toml_string(value: str) -> str:
    """``value`` as a TOML basic string; ConfigError for a path that is not text (undecodable bytes)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"cannot record {value!r}: its path is not UTF-8 text") from None
    escaped = "".join(
        "\\" + ch if ch in '"\\' else f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch for ch in value
    )
    return f'"{escaped}"'
