"""`bench delivery` reports as typed values; ``as_dict()`` gives the JSON object."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recall_kit_bench._datasets import EvalDataset
from recall_kit_bench._evaluation import (
    Metrics,
    Percentiles,
    QueryOutcome,
    metrics,
    metrics_by_fold,
    metrics_by_kind,
    percentiles,
)
from recall_kit_bench._lifecycle import LifecycleReport
from recall_kit.turns import ObservedTurn
from recall_kit_bench._turn_metrics import RefinementSummary, turn_outcomes

FOLDS = 5
METRIC_KEYS = ("strict_delivery", "loose_delivery", "negative_silence", "precision")


@dataclass(frozen=True, slots=True)
class Spread:
    """The lowest, highest and median value of one metric over the folds (None when no fold has it)."""

    min: float | None
    max: float | None
    median: float | None = None

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        """The spread of the ``values`` that are not None."""
        present = [v for v in values if v is not None]
        return cls(min(present), max(present), statistics.median(present)) if present else cls(None, None)

    def as_dict(self) -> dict[str, float | None]:
        """median, min and max as a JSON object."""
        return {"median": self.median, "min": self.min, "max": self.max}


def _by_kind_dict(by_kind: Mapping[str, Metrics]) -> dict[str, dict[str, Any]]:
    return {kind: m.as_dict() for kind, m in by_kind.items()}


@dataclass(frozen=True, slots=True)
class DeliveryReport:
    """Delivery metrics at one point of the turn, overall, per kind and per fold, with the costs."""

    dataset: str
    docs: int
    overall: Metrics
    by_kind: dict[str, Metrics]
    folds: dict[str, Spread] | None  # by metric name; None where the run has no fold split
    fast_ms: Percentiles
    initial_wait_ms: Percentiles
    load_errors: tuple[str, ...]
    waits_ms: tuple[float, ...] = ()  # every initial wait, for the plot (not in as_dict)

    @classmethod
    def of(cls, dataset: EvalDataset, outcomes: Sequence[QueryOutcome], folds_n: int = FOLDS) -> DeliveryReport:
        """The report on the ``outcomes`` of ``dataset``'s queries, with the spread of each metric over ``folds_n`` folds."""
        folds = metrics_by_fold(outcomes, folds_n)
        return cls(
            dataset=str(dataset.root),
            docs=len(dataset.snapshot.docs),
            overall=metrics(outcomes),
            by_kind=metrics_by_kind(outcomes),
            folds={key: Spread.of([getattr(m, key) for m in folds]) for key in METRIC_KEYS},
            fast_ms=percentiles([o.fast_ms for o in outcomes]),
            initial_wait_ms=percentiles([o.wait_ms for o in outcomes]),
            load_errors=_load_errors(dataset),
            waits_ms=tuple(o.wait_ms for o in outcomes),
        )

    @classmethod
    def of_lifecycle(cls, dataset: EvalDataset, lifecycle: LifecycleReport) -> DeliveryReport:
        """The tool-free turns of the lifecycle bench, at the initial point."""
        free = lifecycle.tool_free
        return cls(
            dataset=str(dataset.root),
            docs=len(dataset.snapshot.docs),
            overall=free.overall,
            by_kind=free.by_kind,
            folds=None,
            fast_ms=lifecycle.fast_ms,
            initial_wait_ms=lifecycle.initial_wait_ms,
            load_errors=_load_errors(dataset),
        )

    def as_dict(self) -> dict[str, Any]:
        """The overall metrics as a JSON object, with the rest of the report but ``waits_ms`` (``fast_ms``: p50, p99)."""
        data: dict[str, Any] = {"dataset": self.dataset, "docs": self.docs, **self.overall.as_dict()}
        data["by_kind"] = _by_kind_dict(self.by_kind)
        if self.folds is not None:
            data["folds"] = {key: {"min": s.min, "max": s.max} for key, s in self.folds.items()}
        data["fast_ms"] = self.fast_ms.head()
        data["initial_wait_ms"] = self.initial_wait_ms.as_dict()
        data["load_errors"] = list(self.load_errors)
        return data


def _load_errors(dataset: EvalDataset) -> tuple[str, ...]:
    return tuple(f"{e.ref}: {e.reason}" for e in dataset.snapshot.errors)


@dataclass(frozen=True, slots=True)
class RefinedReport:
    """The refined phase: the settled selection at the first tool-result turn."""

    endpoint: str
    refined: Metrics  # the settled selection in full
    by_kind: dict[str, Metrics]
    tool_result: Metrics  # what the tool-result point delivered
    turn: Metrics  # everything by the first tool result
    summary: RefinementSummary

    @classmethod
    def of(cls, dataset: EvalDataset, turns: Sequence[ObservedTurn], endpoint: str) -> RefinedReport:
        """The report on the tool-using ``turns`` of ``dataset``'s queries, run against ``endpoint``."""
        refined = turn_outcomes(dataset.queries, turns, "refined")
        return cls(
            endpoint=endpoint,
            refined=metrics(refined),
            by_kind=metrics_by_kind(refined),
            tool_result=metrics(turn_outcomes(dataset.queries, turns, "tool_result")),
            turn=metrics(turn_outcomes(dataset.queries, turns, "turn")),
            summary=RefinementSummary.of(turns),
        )

    def as_dict(self) -> dict[str, Any]:
        """The refined metrics as a JSON object, with the rest of the report and the summary's keys."""
        return {
            **self.refined.as_dict(),
            "by_kind": _by_kind_dict(self.by_kind),
            "tool_result": self.tool_result.as_dict(),
            "turn": self.turn.as_dict(),
            **self.summary.as_dict(),
            "endpoint": self.endpoint,
        }


@dataclass(frozen=True, slots=True)
class DeliveryBenchReport:
    """All of `bench delivery`: ours at the initial point, the plain baseline, and whichever of
    the refined phase (a real endpoint) or the lifecycle bench (a latency profile) ran.

    ``baseline`` is None when the plain BM25 baseline could not run; ``baseline_absent`` then says
    why, in one line naming the extra that installs it."""

    delivery: DeliveryReport
    baseline: DeliveryReport | None
    refined: RefinedReport | None = None
    lifecycle: LifecycleReport | None = None
    unenriched: DeliveryReport | None = None  # the same store without its enrichment sidecar
    sidecar: str | None = None  # the enrichment sidecar ``delivery`` was measured with
    enriched_docs: int = 0
    baseline_absent: str | None = None
    placement: str = "sidecar"  # where ``delivery`` read the sidecar's words: the sidecar itself, or each memory's frontmatter

    def as_dict(self) -> dict[str, Any]:
        """The delivery report's JSON object, with the enrichment, each other report that ran, and the
        baseline (null, with ``baseline_absent`` saying why, when it could not run)."""
        data = self.delivery.as_dict()
        data["enrichment"] = {"sidecar": self.sidecar, "enriched_docs": self.enriched_docs, "placement": self.placement}
        if self.unenriched is not None:
            data["unenriched"] = self.unenriched.as_dict()
        if self.refined is not None:
            data["refined"] = self.refined.as_dict()
        if self.lifecycle is not None:
            data["lifecycle"] = self.lifecycle.as_dict()
        data["baseline"] = None if self.baseline is None else self.baseline.as_dict()
        if self.baseline is None:
            data["baseline_absent"] = self.baseline_absent
        return data
