"""Telemetry: `recall`, `delivery`, `enrich` and `learn` events fanned out to sinks that can never break recall."""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Protocol, Union

from recall_kit._kinds import DiscardReason, Fallback, FallbackKind, Phase, Strategy

_log = logging.getLogger("recall_kit.telemetry")

Point = Literal["initial", "tool_result", "discarded"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallEvent:
    """One per handle: what the recall did (emitted when it settles or is cancelled)."""

    session_id: str
    handle_id: int
    query_chars: int
    docs_scanned: int
    docs_selected: int  # in the settled result; the fast result's count when not settled
    strategy: Strategy
    fast_ms: float | None
    model_ms: float | None  # None when there is no model stage or it never finished
    settled: bool
    fallback: Fallback | None = None  # why the model stage fell back, when it did
    model_skipped: bool = False  # the fast answer was certain, so the model stage did not run
    kind: Literal["recall"] = field(default="recall", init=False)

    @property
    def fallback_reason(self) -> str | None:
        """The fallback's one-line reason, or None."""
        return self.fallback.reason if self.fallback is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON values (the fallback as its kind and reason)."""
        data = asdict(self)
        data.pop("fallback")
        data["fallback_kind"] = self.fallback.kind if self.fallback is not None else None
        data["fallback_reason"] = self.fallback_reason
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class DeliveryEvent:
    """A delivery (fast or refined) or a discard; ``terminal`` marks the handle's last event."""

    session_id: str
    handle_id: int
    phase: Phase | None  # None for a discard before anything settled
    point: Point
    reason: DiscardReason | None  # the discard reason when point == "discarded"
    strategy: Strategy
    docs: tuple[str, ...]  # refs delivered (or discarded)
    latency_ms: float  # since the handle's fired_at
    terminal: bool
    kind: Literal["delivery"] = field(default="delivery", init=False)

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON values (``docs`` as a list)."""
        data = asdict(self)
        data["docs"] = list(self.docs)
        return data


@dataclass(frozen=True, slots=True, kw_only=True)
class EnrichEvent:
    """One memory version enriched in the background, or the reason it was not (``preempted``: a
    prompt needed the model; the version is asked for again)."""

    ref: str
    sha256: str
    outcome: Literal["enriched", "failed", "preempted"]
    reason: str | None  # why it failed or was preempted, one line (a model server's words included)
    keywords: int  # terms written
    usage_scenarios: int
    duration_ms: float  # of the model call and the sidecar write
    response_mode: str | None = None
    failure: FallbackKind | None = None  # the model call's kind of failure, when it was the call that failed
    kind: Literal["enrich"] = field(default="enrich", init=False)

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON values."""
        return asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class LearnEvent:
    """One refined selection fed back to the fast stage (learning on), or the reason it taught nothing."""

    outcome: Literal["learned", "skipped", "failed"]
    reason: str | None  # why it taught nothing, one line
    taught: tuple[str, ...]  # refs that gained the prompt's words as learned keys
    suppressed: tuple[str, ...]  # refs the fast stage delivered and the model left out
    words: int  # words kept from the prompt (secret-shaped and overlong ones never are)
    dropped: int  # words dropped as secret-shaped or overlong
    duration_ms: float  # of the sidecar update
    waiting: int = 0  # keys and suppressors kept in memory until their words come in another turn
    kind: Literal["learn"] = field(default="learn", init=False)

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON values (refs as lists)."""
        data = asdict(self)
        data["taught"], data["suppressed"] = list(self.taught), list(self.suppressed)
        return data


Event = Union[RecallEvent, DeliveryEvent, EnrichEvent, LearnEvent]


class Sink(Protocol):
    """Where Telemetry sends events: anything with ``emit(event)`` (and, if it holds a resource, ``close()``)."""

    def emit(self, event: Event) -> None:
        """Record one event (Telemetry logs and skips a sink that raises)."""


class LoggingSink:
    """Writes each event as one `key=value` line to a Python logger."""

    def __init__(self, logger: logging.Logger | str = "recall_kit.events", level: int = logging.INFO):
        self.logger = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.level = level

    def emit(self, event: Event) -> None:
        """Log the event as one ``kind key=value ...`` line, when the logger is enabled for the level."""
        if self.logger.isEnabledFor(self.level):
            fields = " ".join(f"{k}={v!r}" for k, v in event.to_dict().items() if k != "kind")
            self.logger.log(self.level, "%s %s", event.kind, fields)


class JsonLinesSink:
    """Appends each event as one JSON object a line; safe to share across threads."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._file = self.path.open("a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()

    def emit(self, event: Event) -> None:
        """Append the event as one JSON line (the file is line-buffered: it is written at once)."""
        line = json.dumps(event.to_dict(), ensure_ascii=False)
        with self._lock:
            self._file.write(line + "\n")

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._file.close()


class CallbackSink:
    """Calls ``callback(event)`` for each event."""

    def __init__(self, callback: Callable[[Event], object]):
        self.callback = callback

    def emit(self, event: Event) -> None:
        """Call the callback with the event."""
        self.callback(event)


class Telemetry:
    """Fans events out to sinks. A sink that raises is logged once per call and skipped."""

    def __init__(self, *sinks: Sink | Callable[[Event], object]):
        self.sinks: list[Sink] = [s if hasattr(s, "emit") else CallbackSink(s) for s in sinks]

    def emit(self, event: Event) -> None:
        """Send the event to every sink in turn; a sink that raises is logged and skipped."""
        for sink in self.sinks:
            try:
                sink.emit(event)
            except Exception:  # a broken sink must never break recall
                _log.warning("telemetry sink %r failed", sink, exc_info=True)

    def close(self) -> None:
        """Close every sink that has a ``close()``; one that raises is logged and skipped."""
        for sink in self.sinks:
            close = getattr(sink, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:
                    _log.warning("closing telemetry sink %r failed", sink, exc_info=True)



