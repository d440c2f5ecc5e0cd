"""The root of every error recall-kit raises on purpose, and the store's own errors.

The root lives in the bottom layer so that every package above can derive from it:
``except RecallKitError`` catches what any of them raises. ``recall_kit`` re-exports it.
"""


class RecallKitError(Exception):
    """Base of every error recall-kit raises on purpose, whichever package raised it."""


class MemoryStoreError(RecallKitError):
    """The store could not be opened or written."""


class MemoryParseError(RecallKitError):
    """A memory file could not be parsed (the store reports these in its snapshot, it does not raise them)."""


class MemoryPathError(MemoryStoreError):
    """A memory path was refused: outside its root, through a symlink, or not a memory file name."""


class MemoryExistsError(MemoryStoreError, FileExistsError):
    """A new memory would replace a file that is already there."""


class MemoryNotFoundError(MemoryStoreError, FileNotFoundError):
    """No memory file at that path."""


class StoreTimeoutError(MemoryStoreError, TimeoutError):
    """A snapshot the caller waited for was not published in time."""


class UnsafePathError(MemoryStoreError):
    """A state, cache or run path another user could control, a symlink, or not a regular file."""
