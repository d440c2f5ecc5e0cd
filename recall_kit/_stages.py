"""What a session runs, as one frozen value: its stages, its telemetry and its delivery settings.

A Recaller builds one and every session it makes takes it. A wrapper that runs a session with a
stage of its own (``recall_kit.turns.TurnRunner`` records each stage's result) derives its value
with ``dataclasses.replace``, so no stage, the learner included, can be left behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory_store import MemoryDoc, Snapshot
from recall_kit._errors import UsageError
from recall_kit._telemetry import Telemetry
from recall_kit.limits import BODY_BUDGET

if TYPE_CHECKING:
    from recall_kit._heuristic import SnapshotSource
    from recall_kit._learn import Learner
    from recall_kit._after_turn import AfterTurnSlots
    from recall_kit._pace import ModelPace
    from recall_kit._protocols import FastStage, Selector

INITIAL_WAIT_MS = 100  # the initial point's ceiling: a bound on the wait, not a cost
MAX_INITIAL_WAIT_MS = 10_000  # a wait the user sees on every prompt: ten seconds is already the old blocking design's four
# Skip the model stage when the fast answer is certain (GateSettings.certain: one unique, strong
# match). Off: `recall-kit bench replay --repeat --passes 2 --skip-certain` (2026-12-02) skipped
# 0.13-0.46 of the training turns with nothing lost on agent-memories, multilingual and hard-cases,
# but on coding-memories and locomo-dev 17 and 23 skipped turns delivered other than the oracle, and
# locomo-dev's repeat silence fell 0.230 -> 0.229 (docs/benchmarks.md).
SKIP_MODEL_WHEN_CERTAIN = False


def check_delivery(initial_wait_ms: object, body_budget: object) -> None:
    """The one check of the delivery settings, whoever takes them (``open_recaller`` before it opens
    anything, ``Recaller``, ``Stages``): UsageError for a wait that is not 0 to MAX_INITIAL_WAIT_MS
    milliseconds (a NaN wait compared false everywhere) or a body budget that is not a count."""
    wait = initial_wait_ms
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= MAX_INITIAL_WAIT_MS:
        raise UsageError(f"initial_wait_ms must be from 0 to {MAX_INITIAL_WAIT_MS:,} milliseconds, got {wait!r}")
    if isinstance(body_budget, bool) or not isinstance(body_budget, int) or body_budget < 0:
        raise UsageError(f"body_budget must be a whole number of characters, 0 or more, got {body_budget!r}")


def check_clients(selector: object, enrich: object, telemetry: object, *, configs: bool = False) -> None:
    """The one check of the model clients and the telemetry sink a Recaller is given (``configs``: a
    SelectorConfig is taken too, as ``open_recaller`` takes one): UsageError for what is none of them,
    a model's name given for its config, say, which failed only at the first prompt, with a traceback."""
    from recall_kit._config import SelectorConfig

    for name, value, method in (("selector", selector, "select"), ("enrich", enrich, "enrich")):
        if value is None or (configs and isinstance(value, SelectorConfig)) or callable(getattr(value, method, None)):
            continue
        wanted = "a SelectorConfig, " if configs else ""
        raise UsageError(f"{name} must be {wanted}a client with {method}() or None, got {type(value).__name__}")
    if telemetry is not None and not callable(telemetry) and not callable(getattr(telemetry, "emit", None)):
        raise UsageError(f"telemetry must be a Telemetry, a callable or None, got {type(telemetry).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Stages:
    """What a session runs: the fast stage, the model stage, the learner, telemetry and delivery settings.

    ``source`` is where the model stage's candidates come from (the store the heuristic follows,
    or a fixed snapshot). The value owns nothing: whoever made the stages closes them.
    """

    source: SnapshotSource | Snapshot
    heuristic: FastStage
    selector: Selector | None = None
    learner: Learner | None = None  # fed each validated model answer
    telemetry: Telemetry = field(default_factory=Telemetry)
    initial_wait_ms: float = INITIAL_WAIT_MS  # the initial point's ceiling
    body_budget: int = BODY_BUDGET  # characters of memory bodies in one rendered block
    skip_certain: bool = SKIP_MODEL_WHEN_CERTAIN  # settle a certain fast answer without the model

    def __post_init__(self) -> None:
        check_delivery(self.initial_wait_ms, self.body_budget)

    @property
    def pace(self) -> ModelPace | None:
        """The model stage's record of how soon it answers (``ModelSelector.pace``), which decides whether
        the initial point waits for it; None without a model stage or for a selector that keeps none
        (the initial point then always spends its bound)."""
        return getattr(self.selector, "pace", None)

    @property
    def after_turn(self) -> AfterTurnSlots | None:
        """The model stage's slots for refinements that go on after their turn, for learning only
        (``ModelSelector.after_turn``); None for a selector that keeps none (then none goes on)."""
        return getattr(self.selector, "after_turn", None)

    def candidates(self) -> Sequence[MemoryDoc]:
        """Every document of the source's current snapshot: the model stage's candidates."""
        snapshot = self.source if isinstance(self.source, Snapshot) else self.source.snapshot()
        return list(snapshot.docs.values())
