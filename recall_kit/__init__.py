"""recall-kit: the right memories at the right moment, without making the user wait."""

from recall_kit._errors import (
    ConfigError,
    MemoryParseError,
    MemoryStoreError,
    RecallKitError,
    SelectorError,
)

__all__ = [
    "ConfigError",
    "MemoryParseError",
    "MemoryStoreError",
    "RecallKitError",
    "SelectorError",
]
