"""The project a memory folder describes, as doctor checks its references: which paths exist, which
make targets, just recipes and package scripts it defines, which identifiers its files use.

The project is its git top, given by the caller. Paths are probed with ``lstat`` relative to it (a
path leaving it is not probed). The rest comes from one walk that never follows a symlink, never
enters a hidden folder or ``node_modules``, and reads only regular files, without blocking, within
``PROJECT_MAX_FILES`` files and ``PROJECT_MAX_TEXT_BYTES`` of text; a text file over
``PROJECT_MAX_FILE_BYTES`` is read only once a name is in no smaller file. What it could not see (past
those bounds; a FIFO, a socket or a device; a file or folder it could not open) is not judged: a
symbol, command or folder-less file name that only it could hold is not called gone, and the report
says why (``not_seen``).
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field

from memory_store import parse_json

PROJECT_MAX_FILES = 50_000  # files and folders walked; a larger tree is a monorepo doctor only samples
PROJECT_MAX_TEXT_BYTES = 64 << 20  # of text read for identifiers (about 1 s of scanning)
PROJECT_MAX_FILE_BYTES = 1 << 20  # a larger file is mostly data or generated: read only when a name is in no smaller one
_BINARY_PEEK = 8192  # a file with a NUL byte in its first bytes is binary, and holds no name
MAX_PATH_FOLDERS = 12  # folders of one path whose runs are kept: a memory names a path a few folders deep
_SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__"})
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{3,}")
_MAKE_TARGET = re.compile(r"^([A-Za-z0-9_.\-/%][A-Za-z0-9_.\-/% ]*?)\s*::?(?!=)", re.M)
_JUST_RECIPE = re.compile(r"^@?([A-Za-z_][A-Za-z0-9_\-]*)(?:\s+[^:=\n]*)?:(?!=)", re.M)
# Why a file was not read, as the report says it; _LARGER is no reason: such a file is read when needed.
_NOT_REGULAR = "FIFO, socket or device"
_UNREADABLE = "unreadable file"
_FOLDER_NOT_OPENED = "folder that could not be opened"
_LARGER = "larger than asked"
_NOT_JSON = "package.json that is not JSON"
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Project:
    """One project's checkable facts, gathered lazily: paths are probed on demand, the walk runs
    once, when something first needs it."""

    top: str
    _walked: bool = False
    _read: bool = False
    complete: bool = True  # the walk saw the whole tree within its bounds
    text_files: list[str] = field(default_factory=list)  # relative paths of the regular files walked
    file_suffixes: set[str] = field(default_factory=set)  # every walked file's path and its endings (b/c.py, c.py)
    folder_runs: set[str] = field(default_factory=set)  # every run of folders on a walked file's way (a/b, b)
    identifiers: set[bytes] = field(default_factory=set)
    text_complete: bool = True  # the text read stayed within PROJECT_MAX_TEXT_BYTES
    not_seen: dict[str, int] = field(default_factory=dict)  # why -> how many files or folders were not read
    _larger: list[str] = field(default_factory=list)  # text files over PROJECT_MAX_FILE_BYTES, not read yet
    _unread_runners: set[str] = field(default_factory=set)  # runners with a file that was not read
    _budget: int = PROJECT_MAX_TEXT_BYTES
    make_targets: set[str] | None = None  # None: no Makefile
    just_recipes: set[str] | None = None
    scripts: set[str] | None = None  # package.json scripts, of every package.json walked

    def has_path(self, path: str) -> bool | None:
        """Whether ``path`` (relative, '/'-separated; a trailing '/' for a folder) names something in
        the project: at its top, or as the end of a walked file's path (a memory may name
        ``src/app.py`` of a package inside a monorepo), or as folders on one's way; None when it is
        not at the top and the walk stopped at its bounds or met a folder it could not open."""
        folder = path.endswith("/")
        rel = path.rstrip("/")
        target = os.path.normpath(os.path.join(self.top, rel))
        if target != self.top and not target.startswith(self.top.rstrip("/") + "/"):
            return True  # outside the project: not ours to judge
        if os.path.lexists(target):
            return True
        self._walk()
        if rel in (self.folder_runs if folder else self.file_suffixes):
            return True
        return False if self.complete and _FOLDER_NOT_OPENED not in self.not_seen else None

    def has_identifier(self, name: str) -> bool | None:
        """Whether some project file uses ``name``; None when the walk could not read them all."""
        wanted = name.encode("utf-8", "replace")
        self._read_texts()
        if wanted not in self.identifiers:
            self._read_larger()
        if wanted in self.identifiers:
            return True
        return None if not (self.complete and self.text_complete and not self.not_seen) else False

    def has_command(self, runner: str, target: str) -> bool | None:
        """Whether ``runner`` (make, just, npm) has ``target``; None when the project has no such file.
        True as well when a file that could define it was not read: not ours to judge."""
        self._read_texts()
        if target not in (self._commands(runner) or ()):
            self._read_larger()
        known = self._commands(runner)
        if known is not None and target in known:
            return True
        if runner in self._unread_runners:
            return True
        return None if known is None else False

    def _commands(self, runner: str) -> set[str] | None:
        return {"make": self.make_targets, "just": self.just_recipes, "npm": self.scripts}[runner]

    def _walk(self) -> None:
        if self._walked:
            return
        self._walked = True
        try:
            top_fd = os.open(self.top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            self.complete = False
            return
        entries = 0
        pending: list[tuple[int, str]] = [(top_fd, "")]
        while pending:
            fd, folder = pending.pop()
            try:
                with os.scandir(fd) as listing:
                    listed = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False),
                               e.is_symlink()) for e in listing]
            except OSError:
                listed = []
                self._not_read(folder or ".", _FOLDER_NOT_OPENED)
            for name, is_dir, is_file, is_link in listed:
                entries += 1
                if entries > PROJECT_MAX_FILES:
                    self.complete = False
                    break
                rel = f"{folder}/{name}" if folder else name
                if is_dir:
                    if name.startswith(".") or name in _SKIPPED_FOLDERS:
                        continue
                    try:
                        pending.append((os.open(name, _DIR_FLAGS, dir_fd=fd), rel))
                    except OSError:
                        self._not_read(rel, _FOLDER_NOT_OPENED)
                    continue
                self._add_file(rel)
                if is_file:
                    self.text_files.append(rel)
                elif not is_link:  # a symlink is never followed, by design; a FIFO or a socket cannot be read
                    self._not_read(rel, _NOT_REGULAR)
            os.close(fd)
            if not self.complete:
                for rest, _ in pending:
                    os.close(rest)
                pending.clear()

    def _add_file(self, rel: str) -> None:
        parts = rel.split("/")
        for start in range(len(parts)):
            self.file_suffixes.add("/".join(parts[start:]))
        folders = parts[:-1][:MAX_PATH_FOLDERS]
        for start in range(len(folders)):
            for end in range(start + 1, len(folders) + 1):
                self.folder_runs.add("/".join(folders[start:end]))

    def _not_read(self, rel: str, why: str) -> None:
        self.not_seen[why] = self.not_seen.get(why, 0) + 1
        runner = _runner_of(rel)
        if runner is not None:
            self._unread_runners.add(runner)

    def _read_texts(self) -> None:
        """Read the walked files once, for the identifiers they use and the commands they define."""
        self._walk()
        if self._read:
            return
        self._read = True
        for rel in self.text_files:
            data = _read_text(self.top, rel, PROJECT_MAX_FILE_BYTES)
            if data == _LARGER:
                self._larger.append(rel)
            elif not self._take(rel, data):
                break

    def _read_larger(self) -> None:
        """Read the text files over PROJECT_MAX_FILE_BYTES, once a name is in no smaller file (within
        what is left of PROJECT_MAX_TEXT_BYTES)."""
        larger, self._larger = self._larger, []
        for rel in larger:
            if not self.text_complete or not self._take(rel, _read_text(self.top, rel, self._budget)):
                self.text_complete = False
                break

    def _take(self, rel: str, data: bytes | str) -> bool:
        """Keep what one file's ``data`` (or why it was not read) holds; False once the text budget is spent."""
        if isinstance(data, str):
            if data == _LARGER:
                return False  # larger than the text budget left
            self._not_read(rel, data)
            return True
        if len(data) >= self._budget:
            self.text_complete = False
            return False
        self._budget -= len(data)
        if b"\0" in data[:_BINARY_PEEK]:
            return True  # binary
        self.identifiers.update(_IDENTIFIER.findall(data))
        runner = _runner_of(rel)
        if runner is not None:
            text = data.decode("utf-8", "replace")
            if runner == "make":
                self.make_targets = (self.make_targets or set()) | _make_targets(text)
            elif runner == "just":
                self.just_recipes = (self.just_recipes or set()) | set(_JUST_RECIPE.findall(text))
            else:
                scripts = _scripts(text)
                if scripts is None:
                    self._not_read(rel, _NOT_JSON)  # its scripts are unknown: none of npm's is called gone
                else:
                    self.scripts = (self.scripts or set()) | scripts
        return True


def _runner_of(rel: str) -> str | None:
    """The runner whose commands the file at ``rel`` defines: a Makefile or a justfile at the top, any package.json."""
    name = rel.rpartition("/")[2]
    if "/" not in rel and name in ("Makefile", "makefile", "GNUmakefile"):
        return "make"
    if "/" not in rel and name.lower() in ("justfile", ".justfile"):
        return "just"
    return "npm" if name == "package.json" else None


def _make_targets(text: str) -> set[str]:
    targets: set[str] = set()
    for match in _MAKE_TARGET.finditer(text):
        targets.update(part for part in match.group(1).split() if "%" not in part)
    return targets


def _scripts(text: str) -> set[str] | None:
    """The scripts a package.json defines; None when it is not JSON (a cloned repo's may be anything,
    [[[[... 100,000 deep too)."""
    try:
        package = parse_json(text)
    except ValueError:
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    return {str(k) for k in scripts} if isinstance(scripts, dict) else set()


def _read_text(top: str, rel: str, limit: int) -> bytes | str:
    """A regular file's bytes, opened from ``top`` one folder at a time without following a symlink or
    blocking on a FIFO; over ``limit`` bytes, its first bytes when they are binary, else ``_LARGER``;
    why it was not read (``_NOT_REGULAR``, ``_UNREADABLE``) when it cannot be."""
    parts = rel.split("/")
    try:
        folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return _UNREADABLE
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(parts[-1], _FLAGS, dir_fd=folder)
    except OSError as exc:
        return _NOT_REGULAR if exc.errno == errno.ELOOP else _UNREADABLE  # ELOOP: a symlink swapped in
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _NOT_REGULAR
        if info.st_size > limit:
            head = os.read(fd, _BINARY_PEEK)
            return head if b"\0" in head else _LARGER
        return os.read(fd, info.st_size)
    except OSError:
        return _UNREADABLE
    finally:
        os.close(fd)
