"""Which folders a store opens at all: never the file system root, the home folder or a folder above
it. One rule for every door (the library's ``MemoryStore.open``, and before it the settings loader and
the daemon, which refuse a root set before anything is opened, with the same words)."""

from __future__ import annotations

import os


def broad_root_refusal(root: str, home: str | None = None) -> str | None:
    """Why ``root`` is no folder of memories (the file system root, the home folder or a folder
    above it, or a path holding NUL), in one line naming it; None for any other path."""
    if "\0" in root:  # no path can hold one; os.path would raise
        return f"root {root!r} holds a NUL character, which no folder's path can"
    real = os.path.realpath(os.path.expanduser(root))
    home_real = os.path.realpath(home if home is not None else os.path.expanduser("~"))
    if real == os.sep:
        return f"root {root} is the file system root, not a folder of memories"
    if real == home_real:
        return f"root {root} is the home folder, not a folder of memories"
    if home_real.startswith(real.rstrip(os.sep) + os.sep):
        return f"root {root} holds the home folder, not a folder of memories"
    return None
