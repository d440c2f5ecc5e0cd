"""What keeps the suite out of the real user's home: the XDG folders it points at throwaway ones, the
real folders recall-kit would write to, and the checks of both (used by tests/conftest.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Mapping

# every XDG variable a tool we start reads, and its folder's name under the run's throwaway folder
XDG_FOLDERS = {"XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "config", "XDG_STATE_HOME": "state",
               "XDG_DATA_HOME": "data", "XDG_RUNTIME_DIR": "run"}
MAX_LISTED = 10_000  # a folder bigger than this is not ours to walk; what was seen is enough to compare


def real_recall_kit_folders(home: Path, environ: Mapping[str, str]) -> list[Path]:
    """The real user's recall-kit folders: cache (with the daemon's run folder), config and state,
    where the environment puts them and where the defaults under ``home`` would."""
    def base(variable: str, default: Path) -> list[Path]:
        given = environ.get(variable)
        return [default, Path(given)] if given and os.path.isabs(given) else [default]

    folders = [folder / "recall-kit" for folder in (
        *base("XDG_CACHE_HOME", home / ".cache"), *base("XDG_CONFIG_HOME", home / ".config"),
        *base("XDG_STATE_HOME", home / ".local" / "state"),
    )]
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        folders.append(Path(runtime) / "recall-kit")
    return sorted(set(folders))


def folder_entries(folder: Path) -> frozenset[str]:
    """Every path under ``folder`` relative to it, symlinks not followed; empty when it does not exist."""
    if not folder.is_dir():
        return frozenset()
    seen: set[str] = set()
    for parent, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            seen.add(os.path.relpath(os.path.join(parent, name), folder))
        if len(seen) > MAX_LISTED:
            break
    return frozenset(seen)


def caches_of_ours(folder: Path, entries: frozenset[str], ours: tuple[Path, ...]) -> list[str]:
    """The index caches among ``entries`` of ``folder`` whose stamp names a root under one of
    ``ours`` (this checkout, this run's folders). Other users of the same home (a daemon, another
    checkout's tests) write there too: only a cache of our roots is this run's doing."""
    found = []
    for entry in sorted(entries):
        if not entry.endswith(".used"):
            continue
        try:
            roots = json.loads((folder / entry).read_text())["roots"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if any(Path(root) == base or base in Path(root).parents for root in roots if isinstance(root, str)
               for base in ours):
            found.append(f"{folder / entry} ({', '.join(map(str, roots))})")
    return found


def sentinel_problem(home: Path) -> str | None:
    """What a test wrote into the run's HOME, which must stay empty, or None; it is removed, so that
    the next test starts from an empty home again."""
    written = sorted(folder_entries(home))
    if not written:
        return None
    for entry in os.listdir(home):
        path = home / entry
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return (f"this test wrote into HOME, which stands for the real home ({home}): {', '.join(written[:5])}"
            f"{' ...' if len(written) > 5 else ''}; give it a home of its own")
