"""The engine's errors. The root, ``RecallKitError``, comes from the store layer below."""

from memory_store import RecallKitError


class ConfigError(RecallKitError):
    """Configuration (arguments, environment, recall-kit.toml) is invalid."""


class UsageError(RecallKitError, ValueError):
    """The API was called in a way it does not support (a closed session, an unknown option value)."""
