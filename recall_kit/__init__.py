"""recall-kit: the right memories at the right moment, without making the user wait."""

from recall_kit._errors import (
    ConfigError,
    MemoryParseError,
    MemoryStoreError,
    RecallKitError,
    SelectorError,
)
from recall_kit._config import SelectorConfig, load_selector_config
from recall_kit._selector import MAX_MODEL_DOCS, ModelSelector, Selection
from recall_kit._heuristic import FastHeuristic, FastResult, ScoredDoc

__all__ = [
    "MAX_MODEL_DOCS",
    "ModelSelector",
    "Selection",
    "SelectorConfig",
    "load_selector_config",
    "ConfigError",
    "FastHeuristic",
    "FastResult",
    "MemoryParseError",
    "MemoryStoreError",
    "RecallKitError",
    "ScoredDoc",
    "SelectorError",
]
