"""recall-kit: the right memories at the right moment, without making the user wait."""

from memory_store import MemoryParseError, MemoryStoreError, RecallKitError
from recall_kit._errors import ConfigError
from recall_kit._config import SelectorConfig, load_selector_config
from recall_kit._selector import MAX_MODEL_DOCS, ModelSelector, Selection
from recall_kit._heuristic import FastHeuristic, FastResult, ScoredDoc
from recall_kit._index_cache import IndexedStore, open_indexed
from recall_kit._render import render_memories
from recall_kit._session import INITIAL_WAIT_MS, Delivery, Recaller, RecallSession
from recall_kit._sync import SyncRecallSession
from recall_kit._telemetry import (
    CallbackSink,
    DeliveryEvent,
    JsonLinesSink,
    LoggingSink,
    RecallEvent,
    Telemetry,
)

__all__ = [
    "CallbackSink",
    "Delivery",
    "DeliveryEvent",
    "INITIAL_WAIT_MS",
    "JsonLinesSink",
    "LoggingSink",
    "RecallEvent",
    "RecallSession",
    "Recaller",
    "SyncRecallSession",
    "Telemetry",
    "render_memories",
    "MAX_MODEL_DOCS",
    "ModelSelector",
    "Selection",
    "SelectorConfig",
    "load_selector_config",
    "ConfigError",
    "FastHeuristic",
    "FastResult",
    "IndexedStore",
    "open_indexed",
    "MemoryParseError",
    "MemoryStoreError",
    "RecallKitError",
    "ScoredDoc",
]
