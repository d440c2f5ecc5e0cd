"""The engine's errors. The root, ``RecallKitError``, comes from the store layer below."""

from memory_store import RecallKitError


class ConfigError(RecallKitError):
    """Configuration (arguments, environment, recall-kit.toml) is invalid."""


class UsageError(RecallKitError, ValueError):
    """The API was called in a way it does not support (an unknown option value, a wrong thread)."""


class BackgroundError(RecallKitError):
    """A background worker (enrichment) could not start."""


class SessionClosedError(UsageError):
    """A call on a session (or a sync session's loop) that was already closed."""
