"""The error tree. Callers catch exactly what they mean."""


class RecallKitError(Exception):
    """Base of every error recall-kit raises on purpose."""


class MemoryStoreError(RecallKitError):
    """The store could not be opened or written."""


class MemoryParseError(RecallKitError):
    """A memory file could not be parsed (the store reports these, it does not raise them)."""


class SelectorError(RecallKitError):
    """The model selector could not produce a usable answer."""


class ConfigError(RecallKitError):
    """Configuration (arguments, environment, recall-kit.toml) is invalid."""
