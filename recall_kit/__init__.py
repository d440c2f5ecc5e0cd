"""recall-kit: the right memories at the right moment, without making the user wait.

The engine: a fast lexical heuristic, a model selector over any OpenAI-compatible endpoint, and the
per-conversation session that delivers what is ready at the agent's two safe points.

Everything an agent author needs is exported here; tuning and low-level types live in the documented
submodules ``recall_kit.tuning``, ``recall_kit.limits``, ``recall_kit.selection`` and
``recall_kit.turns``. The ``_`` modules may change freely.

The names load on first use, so ``import recall_kit.limits`` (the hook does it on every prompt)
does not load the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_store import MemoryParseError as MemoryParseError
    from memory_store import MemoryStoreError as MemoryStoreError
    from memory_store import RecallKitError as RecallKitError
    from recall_kit._config import SelectorConfig as SelectorConfig
    from recall_kit._config import load_selector_config as load_selector_config
    from recall_kit._config import read_config_toml as read_config_toml
    from recall_kit._errors import ConfigError as ConfigError
    from recall_kit._errors import UsageError as UsageError
    from recall_kit._handle import AbortSignal as AbortSignal
    from recall_kit._heuristic import MAX_FAST_DOCS as MAX_FAST_DOCS
    from recall_kit._heuristic import Evidence as Evidence
    from recall_kit._heuristic import FastHeuristic as FastHeuristic
    from recall_kit._heuristic import FastResult as FastResult
    from recall_kit._heuristic import GateSettings as GateSettings
    from recall_kit._heuristic import ScoredDoc as ScoredDoc
    from recall_kit._heuristic import SlotMatch as SlotMatch
    from recall_kit._heuristic import SnapshotSource as SnapshotSource
    from recall_kit._open import IndexedStore as IndexedStore
    from recall_kit._open import open_recaller as open_recaller
    from recall_kit._open import WatchedStore as WatchedStore
    from recall_kit._open import open_indexed as open_indexed
    from recall_kit._open import open_watched as open_watched
    from recall_kit._kinds import ConsumePoint as ConsumePoint
    from recall_kit._kinds import Phase as Phase
    from recall_kit._kinds import Placement as Placement
    from recall_kit._kinds import Strategy as Strategy
    from recall_kit.limits import BODY_BUDGET as BODY_BUDGET
    from recall_kit._render import render_memories as render_memories
    from recall_kit._secrets import display_url as display_url
    from recall_kit.limits import MAX_MODEL_DOCS as MAX_MODEL_DOCS
    from recall_kit._background_enrichment import BackgroundEnrichment as BackgroundEnrichment
    from recall_kit._enricher import docs_to_enrich as docs_to_enrich
    from recall_kit._enricher import Enricher as Enricher
    from recall_kit._enricher import EnrichmentResult as EnrichmentResult
    from recall_kit._selector import ModelSelector as ModelSelector
    from recall_kit._selector import Selection as Selection
    from recall_kit._recaller import Recaller as Recaller
    from recall_kit._session import INITIAL_WAIT_MS as INITIAL_WAIT_MS
    from recall_kit._session import Delivery as Delivery
    from recall_kit._session import RecallSession as RecallSession
    from recall_kit._sync_session import SyncRecallSession as SyncRecallSession
    from recall_kit.turns import ObservedTurn as ObservedTurn
    from recall_kit.turns import ToolCall as ToolCall
    from recall_kit.turns import TurnRunner as TurnRunner
    from recall_kit.turns import UntilSettled as UntilSettled
    from recall_kit._telemetry import CallbackSink as CallbackSink
    from recall_kit._telemetry import DeliveryEvent as DeliveryEvent
    from recall_kit._telemetry import EnrichEvent as EnrichEvent
    from recall_kit._telemetry import Event as Event
    from recall_kit._telemetry import JsonLinesSink as JsonLinesSink
    from recall_kit._telemetry import LoggingSink as LoggingSink
    from recall_kit._telemetry import RecallEvent as RecallEvent
    from recall_kit._telemetry import Sink as Sink
    from recall_kit._telemetry import Telemetry as Telemetry

# Each public name and the module that defines it.
_EXPORTS: dict[str, str] = {
    "AbortSignal": "recall_kit._handle",
    "BODY_BUDGET": "recall_kit.limits",
    "BackgroundEnrichment": "recall_kit._background_enrichment",
    "CallbackSink": "recall_kit._telemetry",
    "ConfigError": "recall_kit._errors",
    "ConsumePoint": "recall_kit._kinds",
    "Delivery": "recall_kit._session",
    "DeliveryEvent": "recall_kit._telemetry",
    "EnrichEvent": "recall_kit._telemetry",
    "Enricher": "recall_kit._enricher",
    "EnrichmentResult": "recall_kit._enricher",
    "Event": "recall_kit._telemetry",
    "Evidence": "recall_kit._heuristic",
    "FastHeuristic": "recall_kit._heuristic",
    "FastResult": "recall_kit._heuristic",
    "GateSettings": "recall_kit._heuristic",
    "INITIAL_WAIT_MS": "recall_kit._session",
    "IndexedStore": "recall_kit._open",
    "JsonLinesSink": "recall_kit._telemetry",
    "LoggingSink": "recall_kit._telemetry",
    "MAX_FAST_DOCS": "recall_kit._heuristic",
    "MAX_MODEL_DOCS": "recall_kit.limits",
    "MemoryParseError": "memory_store",
    "MemoryStoreError": "memory_store",
    "ModelSelector": "recall_kit._selector",
    "ObservedTurn": "recall_kit.turns",
    "Phase": "recall_kit._kinds",
    "Placement": "recall_kit._kinds",
    "RecallEvent": "recall_kit._telemetry",
    "RecallKitError": "memory_store",
    "RecallSession": "recall_kit._session",
    "Recaller": "recall_kit._recaller",
    "ScoredDoc": "recall_kit._heuristic",
    "Selection": "recall_kit._selector",
    "SelectorConfig": "recall_kit._config",
    "Sink": "recall_kit._telemetry",
    "SlotMatch": "recall_kit._heuristic",
    "SnapshotSource": "recall_kit._heuristic",
    "Strategy": "recall_kit._kinds",
    "SyncRecallSession": "recall_kit._sync_session",
    "Telemetry": "recall_kit._telemetry",
    "UsageError": "recall_kit._errors",
    "ToolCall": "recall_kit.turns",
    "TurnRunner": "recall_kit.turns",
    "UntilSettled": "recall_kit.turns",
    "WatchedStore": "recall_kit._open",
    "display_url": "recall_kit._secrets",
    "docs_to_enrich": "recall_kit._enricher",
    "load_selector_config": "recall_kit._config",
    "open_indexed": "recall_kit._open",
    "open_recaller": "recall_kit._open",
    "open_watched": "recall_kit._open",
    "read_config_toml": "recall_kit._config",
    "render_memories": "recall_kit._render",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'recall_kit' has no attribute {name!r}")
    _load_all()
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def _load_all() -> None:
    """Bind every public name, each class and function shown as ``recall_kit.Name``."""
    namespace = globals()
    for name, module in _EXPORTS.items():
        value = getattr(importlib.import_module(module), name)
        if module.startswith("recall_kit._") and getattr(value, "__module__", None) == module:
            try:
                value.__module__ = __name__
            except (AttributeError, TypeError):  # a constant or an alias: nothing to rename
                pass
        namespace[name] = value
