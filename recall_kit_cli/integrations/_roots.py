"""Which root sets the daemon opens for a client: folders of memories, not the file system or a home.

A client names any paths it likes, and each root set it names becomes a watched store (an inotify
watch per folder, every memory read and indexed). So before anything is opened, a root set is
refused when it is too many folders, when a root is the file system root, the home folder or a
folder above it, not a folder, or when the set holds more files and folders than a memory folder
would: counted as the store walks (hidden entries skipped, symlinked folders not followed) and
only up to the limit.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence

from memory_store import RecallKitError, broad_root_refusal, count_entries
from recall_kit.limits import DAEMON_MAX_ROOT_ENTRIES, DAEMON_MAX_ROOTS


class RootRefused(RecallKitError):
    """A root set the daemon will not open for a client: not folders of memories."""


def check_root_set(
    roots: Sequence[str], *, home: str | None = None, max_entries: int = DAEMON_MAX_ROOT_ENTRIES
) -> None:
    """RootRefused, with the reason, unless ``roots`` (absolute paths) look like folders of memories.

    A root that does not exist is left to the store, which says so (or watches for it).
    """
    if len(roots) > DAEMON_MAX_ROOTS:
        raise RootRefused(f"{len(roots)} roots in one set; the daemon opens at most {DAEMON_MAX_ROOTS}")
    home_real = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    existing = []
    for root in roots:
        refusal = broad_root_refusal(root, home_real)  # first: a path holding NUL cannot even be looked at
        if refusal is not None:
            raise RootRefused(refusal)
        try:
            info = os.stat(root)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RootRefused(f"root {root} cannot be used: {exc.strerror}") from None
        if not stat.S_ISDIR(info.st_mode):
            raise RootRefused(f"root {root} is not a folder")
        existing.append(root)
    left = max_entries
    for root in existing:
        left -= count_entries(root, left + 1)
        if left < 0:
            raise RootRefused(
                f"the roots hold more than {max_entries:,} files and folders, more than a folder of memories would; "
                f"name the memory folder itself (first too large: {root})"
            )
