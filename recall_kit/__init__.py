"""recall-kit: the right memories at the right moment, without making the user wait.

The engine: a fast lexical heuristic, a model selector over any OpenAI-compatible endpoint, and the
per-conversation session that delivers what is ready at the agent's two safe points::

    from recall_kit import open_recaller

    async with open_recaller(["~/memories"]) as recaller:
        session = recaller.session()
        session.begin(prompt)
        delivery = await session.consume("initial")  # waits at most 100 ms

The top level holds what an agent author needs. Tuning and low-level types live in documented
submodules: ``recall_kit.tuning`` (the gate, its explanation, field weights),
``recall_kit.settings`` (the settings loader and project files' trust, what the CLI runs with),
``recall_kit.limits`` (every size limit and the prompt policy), ``recall_kit.selection`` (the
selector's steps without HTTP), ``recall_kit.turns`` (observed turns, for tools and benchmarks) and
``recall_kit.cache`` (the index cache's files, as ``recall-kit cache`` lists and clears them).
The ``_`` modules may change freely.

Each name loads on first use, with only the module that defines it: ``import recall_kit.limits``
(the hook does it on every prompt) does not load the engine, and ``from recall_kit import
ConfigError`` loads the errors alone.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_store import MemoryParseError as MemoryParseError
    from memory_store import MemoryStoreError as MemoryStoreError
    from memory_store import RecallKitError as RecallKitError
    from recall_kit._background_enrichment import BackgroundEnrichment as BackgroundEnrichment
    from recall_kit._config import SelectorConfig as SelectorConfig
    from recall_kit._settings import load_selector_config as load_selector_config
    from recall_kit._learn import Learner as Learner
    from recall_kit._learn import learnable_words as learnable_words
    from recall_kit._enricher import Enricher as Enricher
    from recall_kit._enricher import EnrichmentResult as EnrichmentResult
    from recall_kit._enricher import docs_to_enrich as docs_to_enrich
    from recall_kit._vocabulary import keyword_vocabulary as keyword_vocabulary
    from recall_kit._vocabulary import writing_note as writing_note
    from recall_kit._errors import ConfigError as ConfigError
    from recall_kit._errors import BackgroundError as BackgroundError
    from recall_kit._errors import SessionClosedError as SessionClosedError
    from recall_kit._errors import UsageError as UsageError
    from recall_kit._handle import AbortSignal as AbortSignal
    from recall_kit._heuristic import FastHeuristic as FastHeuristic
    from recall_kit._heuristic import FastResult as FastResult
    from recall_kit._heuristic import SnapshotSource as SnapshotSource
    from recall_kit._kinds import CANCEL_REASONS as CANCEL_REASONS
    from recall_kit._kinds import CancelReason as CancelReason
    from recall_kit._kinds import ConsumePoint as ConsumePoint
    from recall_kit._kinds import DiscardReason as DiscardReason
    from recall_kit._kinds import Fallback as Fallback
    from recall_kit._kinds import FallbackKind as FallbackKind
    from recall_kit._kinds import Phase as Phase
    from recall_kit._kinds import Placement as Placement
    from recall_kit._kinds import Strategy as Strategy
    from recall_kit._open import IndexedStore as IndexedStore
    from recall_kit._open import WatchedStore as WatchedStore
    from recall_kit._open import open_indexed as open_indexed
    from recall_kit._open import open_recaller as open_recaller
    from recall_kit._open import open_watched as open_watched
    from recall_kit._recaller import Recaller as Recaller
    from recall_kit._render import render_memories as render_memories
    from recall_kit._secrets import scrub_secrets as scrub_secrets
    from recall_kit._selector import ModelSelector as ModelSelector
    from recall_kit._model_lane import ModelLane as ModelLane
    from recall_kit._selector import Selection as Selection
    from recall_kit._session import INITIAL_WAIT_MS as INITIAL_WAIT_MS
    from recall_kit._session import Delivery as Delivery
    from recall_kit._session import RecallSession as RecallSession
    from recall_kit._stages import SKIP_MODEL_WHEN_CERTAIN as SKIP_MODEL_WHEN_CERTAIN
    from recall_kit._stages import Stages as Stages
    from recall_kit._sync_session import SyncRecallSession as SyncRecallSession
    from recall_kit._telemetry import CallbackSink as CallbackSink
    from recall_kit._telemetry import DeliveryEvent as DeliveryEvent
    from recall_kit._telemetry import EnrichEvent as EnrichEvent
    from recall_kit._telemetry import LearnEvent as LearnEvent
    from recall_kit._telemetry import Event as Event
    from recall_kit._telemetry import JsonLinesSink as JsonLinesSink
    from recall_kit._telemetry import LoggingSink as LoggingSink
    from recall_kit._telemetry import RecallEvent as RecallEvent
    from recall_kit._telemetry import Sink as Sink
    from recall_kit._telemetry import Telemetry as Telemetry
    from recall_kit.limits import BODY_BUDGET as BODY_BUDGET
    from recall_kit.limits import MAX_FAST_DOCS as MAX_FAST_DOCS
    from recall_kit.limits import MAX_MODEL_DOCS as MAX_MODEL_DOCS

# Each public name and the module that defines it (the imports above say the same for type checkers;
# tests/test_public_api.py checks that the two agree).
_EXPORTS: dict[str, str] = {
    # errors
    "RecallKitError": "memory_store",
    "MemoryStoreError": "memory_store",
    "MemoryParseError": "memory_store",
    "ConfigError": "recall_kit._errors",
    "UsageError": "recall_kit._errors",
    "SessionClosedError": "recall_kit._errors",
    "BackgroundError": "recall_kit._errors",
    # opening and sessions
    "open_recaller": "recall_kit._open",
    "Recaller": "recall_kit._recaller",
    "RecallSession": "recall_kit._session",
    "Stages": "recall_kit._stages",
    "SKIP_MODEL_WHEN_CERTAIN": "recall_kit._stages",
    "SyncRecallSession": "recall_kit._sync_session",
    "Delivery": "recall_kit._session",
    "AbortSignal": "recall_kit._handle",
    "INITIAL_WAIT_MS": "recall_kit._session",
    "ConsumePoint": "recall_kit._kinds",
    "Phase": "recall_kit._kinds",
    "Placement": "recall_kit._kinds",
    "Strategy": "recall_kit._kinds",
    "CancelReason": "recall_kit._kinds",
    "CANCEL_REASONS": "recall_kit._kinds",
    "DiscardReason": "recall_kit._kinds",
    # the stages
    "FastHeuristic": "recall_kit._heuristic",
    "FastResult": "recall_kit._heuristic",
    "SnapshotSource": "recall_kit._heuristic",
    "MAX_FAST_DOCS": "recall_kit.limits",
    "ModelSelector": "recall_kit._selector",
    "ModelLane": "recall_kit._model_lane",
    "Selection": "recall_kit._selector",
    "Fallback": "recall_kit._kinds",
    "FallbackKind": "recall_kit._kinds",
    "MAX_MODEL_DOCS": "recall_kit.limits",
    "SelectorConfig": "recall_kit._config",
    "load_selector_config": "recall_kit._settings",
    "Learner": "recall_kit._learn",
    "learnable_words": "recall_kit._learn",
    "Enricher": "recall_kit._enricher",
    "EnrichmentResult": "recall_kit._enricher",
    "BackgroundEnrichment": "recall_kit._background_enrichment",
    "docs_to_enrich": "recall_kit._enricher",
    "keyword_vocabulary": "recall_kit._vocabulary",
    "writing_note": "recall_kit._vocabulary",
    # opening roots without a Recaller
    "open_indexed": "recall_kit._open",
    "open_watched": "recall_kit._open",
    "IndexedStore": "recall_kit._open",
    "WatchedStore": "recall_kit._open",
    # rendering and telemetry
    "render_memories": "recall_kit._render",
    "scrub_secrets": "recall_kit._secrets",  # what is a secret: learning, doctor and the trail ask it
    "BODY_BUDGET": "recall_kit.limits",
    "Telemetry": "recall_kit._telemetry",
    "Sink": "recall_kit._telemetry",
    "LoggingSink": "recall_kit._telemetry",
    "JsonLinesSink": "recall_kit._telemetry",
    "CallbackSink": "recall_kit._telemetry",
    "Event": "recall_kit._telemetry",
    "RecallEvent": "recall_kit._telemetry",
    "DeliveryEvent": "recall_kit._telemetry",
    "EnrichEvent": "recall_kit._telemetry",
    "LearnEvent": "recall_kit._telemetry",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recall_kit' has no attribute {name!r}")
    _bind(module)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


def _bind(module: str) -> None:
    """Import ``module`` alone and bind the public names it defines, each shown as ``recall_kit.Name``."""
    from memory_store import fixup_module_metadata

    names = [name for name, home in _EXPORTS.items() if home == module]
    loaded, namespace = importlib.import_module(module), globals()
    for name in names:
        namespace[name] = getattr(loaded, name)
    fixup_module_metadata(__name__, namespace, names)
