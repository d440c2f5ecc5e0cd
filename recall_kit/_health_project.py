"""The project a memory folder describes, as doctor checks its references: which paths exist, which
make targets, just recipes and package scripts it defines, which identifiers its files use.

The project is its git top, given by the caller. Paths are probed with ``lstat`` relative to it (a
path leaving it is not probed). The rest comes from one walk that never follows a symlink, never
enters a hidden folder or ``node_modules``, and reads only regular files, without blocking, within
``PROJECT_MAX_FILES`` files and ``PROJECT_MAX_TEXT_BYTES`` of text; past those bounds the symbols and
the folder-less file names it could not see are not judged, and the report says so.
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass, field

PROJECT_MAX_FILES = 50_000  # files and folders walked; a larger tree is a monorepo doctor only samples
PROJECT_MAX_TEXT_BYTES = 64 << 20  # of text read for identifiers (about 1 s of scanning)
PROJECT_MAX_FILE_BYTES = 1 << 20  # a larger file is data or generated, not code a memory names
MAX_PATH_FOLDERS = 12  # folders of one path whose runs are kept: a memory names a path a few folders deep
_SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__"})
_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]{3,}")
_MAKE_TARGET = re.compile(r"^([A-Za-z0-9_.\-/%][A-Za-z0-9_.\-/% ]*?)\s*::?(?!=)", re.M)
_JUST_RECIPE = re.compile(r"^@?([A-Za-z_][A-Za-z0-9_\-]*)(?:\s+[^:=\n]*)?:(?!=)", re.M)
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
    text_complete: bool = True
    make_targets: set[str] | None = None  # None: no Makefile
    just_recipes: set[str] | None = None
    scripts: set[str] | None = None  # package.json scripts, of every package.json walked

    def has_path(self, path: str) -> bool | None:
        """Whether ``path`` (relative, '/'-separated; a trailing '/' for a folder) names something in
        the project: at its top, or as the end of a walked file's path (a memory may name
        ``src/app.py`` of a package inside a monorepo), or as folders on one's way; None when it is
        not at the top and the walk stopped at its bounds."""
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
        return False if self.complete else None

    def has_identifier(self, name: str) -> bool | None:
        """Whether some project file uses ``name``; None when the walk could not read them all."""
        self._read_texts()
        if name.encode("utf-8", "replace") in self.identifiers:
            return True
        return None if not (self.complete and self.text_complete) else False

    def has_command(self, runner: str, target: str) -> bool | None:
        """Whether ``runner`` (make, just, npm) has ``target``; None when the project has no such file."""
        self._read_texts()
        known = {"make": self.make_targets, "just": self.just_recipes, "npm": self.scripts}[runner]
        if known is None:
            return None
        return target in known

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
                    listed = [(e.name, e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in listing]
            except OSError:
                listed = []
            for name, is_dir, is_file in listed:
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
                        pass
                    continue
                self._add_file(rel)
                if is_file:
                    self.text_files.append(rel)
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

    def _read_texts(self) -> None:
        """Read the walked files once, for the identifiers they use and the commands they define."""
        self._walk()
        if self._read:
            return
        self._read = True
        budget = PROJECT_MAX_TEXT_BYTES
        for rel in self.text_files:
            data = _read_text(self.top, rel, min(PROJECT_MAX_FILE_BYTES, budget))
            if data is None:
                continue
            if len(data) >= budget:
                self.text_complete = False
                break
            budget -= len(data)
            if b"\0" in data[:8192]:
                continue  # binary
            self.identifiers.update(_IDENTIFIER.findall(data))
            name = rel.rpartition("/")[2]
            text = data.decode("utf-8", "replace")
            if "/" not in rel and name in ("Makefile", "makefile", "GNUmakefile"):
                self.make_targets = (self.make_targets or set()) | _make_targets(text)
            elif "/" not in rel and name.lower() in ("justfile", ".justfile"):
                self.just_recipes = (self.just_recipes or set()) | set(_JUST_RECIPE.findall(text))
            elif name == "package.json":
                self.scripts = (self.scripts or set()) | _scripts(text)


def _make_targets(text: str) -> set[str]:
    targets: set[str] = set()
    for match in _MAKE_TARGET.finditer(text):
        targets.update(part for part in match.group(1).split() if "%" not in part)
    return targets


def _scripts(text: str) -> set[str]:
    try:
        package = json.loads(text)
    except ValueError:
        return set()
    scripts = package.get("scripts") if isinstance(package, dict) else None
    return {str(k) for k in scripts} if isinstance(scripts, dict) else set()


def _read_text(top: str, rel: str, limit: int) -> bytes | None:
    """A regular file's first ``limit`` bytes, opened from ``top`` one folder at a time without following
    a symlink or blocking on a FIFO (None when it is not one, is larger, or cannot be read)."""
    if limit <= 0:
        return None
    parts = rel.split("/")
    try:
        folder = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
        fd = os.open(parts[-1], _FLAGS, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > PROJECT_MAX_FILE_BYTES:
            return None
        return os.read(fd, min(limit, info.st_size))
    except OSError:
        return None
    finally:
        os.close(fd)
