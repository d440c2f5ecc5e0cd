"""recall-kit: the right memories at the right moment, without making the user wait.

The engine: a fast lexical heuristic, a model selector over any OpenAI-compatible endpoint, and the
per-conversation session that delivers what is ready at the agent's two safe points. Everything public
is exported here; the ``_`` modules may change freely.
"""

from memory_store import MemoryParseError, MemoryStoreError, RecallKitError
from recall_kit._config import SelectorConfig, load_selector_config, read_config_toml
from recall_kit._errors import ConfigError
from recall_kit._handle import AbortSignal
from recall_kit._gate import MAX_FAST_DOCS
from recall_kit._heuristic import FastHeuristic, FastResult, SnapshotSource
from recall_kit._open import IndexedStore, WatchedStore, open_indexed, open_watched
from recall_kit._kinds import ConsumePoint, Phase, Placement, Strategy
from recall_kit._render import BODY_BUDGET, render_memories
from recall_kit._secrets import display_url
from recall_kit._answer import MAX_MODEL_DOCS
from recall_kit._background_enrichment import BackgroundEnrichment
from recall_kit._enrich_sidecar import docs_to_enrich, record_enrichment
from recall_kit._enricher import Enricher, EnrichmentResult
from recall_kit._selector import ModelSelector, Selection
from recall_kit._recaller import Recaller
from recall_kit._session import INITIAL_WAIT_MS, Delivery, RecallSession
from recall_kit._sync_session import SyncRecallSession
from recall_kit.turns import ObservedTurn, ToolCall, TurnRunner, UntilSettled
from recall_kit._telemetry import (
    CallbackSink,
    DeliveryEvent,
    EnrichEvent,
    Event,
    JsonLinesSink,
    LoggingSink,
    RecallEvent,
    Sink,
    Telemetry,
)

__all__ = [
    "AbortSignal",
    "BODY_BUDGET",
    "BackgroundEnrichment",
    "CallbackSink",
    "ConfigError",
    "ConsumePoint",
    "Delivery",
    "DeliveryEvent",
    "EnrichEvent",
    "Enricher",
    "EnrichmentResult",
    "Event",
    "FastHeuristic",
    "FastResult",
    "INITIAL_WAIT_MS",
    "IndexedStore",
    "JsonLinesSink",
    "LoggingSink",
    "MAX_FAST_DOCS",
    "MAX_MODEL_DOCS",
    "MemoryParseError",
    "MemoryStoreError",
    "ObservedTurn",
    "ModelSelector",
    "Phase",
    "Placement",
    "RecallEvent",
    "RecallKitError",
    "RecallSession",
    "Recaller",
    "Selection",
    "SelectorConfig",
    "Sink",
    "SnapshotSource",
    "Strategy",
    "SyncRecallSession",
    "Telemetry",
    "ToolCall",
    "TurnRunner",
    "UntilSettled",
    "WatchedStore",
    "docs_to_enrich",
    "display_url",
    "load_selector_config",
    "open_indexed",
    "open_watched",
    "read_config_toml",
    "record_enrichment",
    "render_memories",
]
