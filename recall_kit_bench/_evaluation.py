"""Delivery-rate evaluation: metrics, the plain baseline, folds (datasets: ``recall_kit_bench._datasets``).

The delivery step is a callable, ``deliver(query) -> (delivered refs, wait_ms[, fast_ms])``, so
the same metrics measure the plain baseline and the bare heuristic; the session lifecycle is
measured through ``recall_kit_bench._turn_metrics``.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memory_store import MemoryDoc, Snapshot
from recall_kit_bench._datasets import EvalDataset, EvalQuery
from recall_kit_bench._errors import BENCH_EXTRA, BaselineUnavailable

BASELINE_TOP = 2

Deliver = Callable[[str], Sequence[Any]]  # -> (refs, wait_ms) or (refs, wait_ms, fast_ms)


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What one query received."""

    query: EvalQuery
    delivered: tuple[str, ...]
    wait_ms: float
    fast_ms: float


@dataclass(frozen=True, slots=True)
class Metrics:
    """The delivery metrics over a set of outcomes (strict and loose delivery, silence, precision)."""

    queries: int
    answerable: int
    negatives: int
    strict_delivery: float | None
    loose_delivery: float | None
    negative_silence: float | None
    precision: float | None
    delivered_docs: int

    def as_dict(self) -> dict[str, Any]:
        """The metrics as a JSON object, one key per field."""
        return asdict(self)


def enriched_docs(dataset: EvalDataset) -> int:
    """How many of the dataset's memories carry fresh enrichment."""
    return sum(doc.enrichment is not None for doc in dataset.snapshot.docs.values())


def run(
    dataset: EvalDataset,
    deliver: Deliver,
    *,
    on_query: Callable[[QueryOutcome], None] | None = None,
) -> list[QueryOutcome]:
    """Send every query through ``deliver`` in file order."""
    outcomes = []
    for query in dataset.queries:
        result = deliver(query.query)
        wait_ms = float(result[1])
        fast_ms = float(result[2]) if len(result) > 2 else wait_ms
        outcome = QueryOutcome(query, tuple(result[0]), wait_ms, fast_ms)
        outcomes.append(outcome)
        if on_query is not None:
            on_query(outcome)
    return outcomes


def metrics(outcomes: Iterable[QueryOutcome]) -> Metrics:
    """The delivery metrics over ``outcomes``; a share is None when no query counts toward it."""
    outcomes = list(outcomes)
    answerable = [o for o in outcomes if o.query.relevant]
    negatives = [o for o in outcomes if not o.query.relevant]
    delivered = sum(len(o.delivered) for o in outcomes)
    hits = sum(len(set(o.delivered) & o.query.relevant) for o in outcomes)
    return Metrics(
        queries=len(outcomes),
        answerable=len(answerable),
        negatives=len(negatives),
        strict_delivery=_share(sum(bool(set(o.delivered) & o.query.relevant) for o in answerable), len(answerable)),
        loose_delivery=_share(sum(bool(o.delivered) for o in answerable), len(answerable)),
        negative_silence=_share(sum(not o.delivered for o in negatives), len(negatives)),
        precision=_share(hits, delivered),
        delivered_docs=delivered,
    )


def metrics_by_kind(outcomes: Iterable[QueryOutcome]) -> dict[str, Metrics]:
    """``metrics`` per query kind, in the kinds' sorted order."""
    groups: dict[str, list[QueryOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.query.kind, []).append(outcome)
    return {kind: metrics(group) for kind, group in sorted(groups.items())}


def fold_of(query_id: str, folds: int) -> int:
    """A stable fold for a query, from a hash of its id."""
    return int(hashlib.sha256(query_id.encode()).hexdigest(), 16) % folds


def metrics_by_fold(outcomes: Iterable[QueryOutcome], folds: int = 5) -> list[Metrics]:
    """``metrics`` per fold (see ``fold_of``), fold 0 first."""
    groups: list[list[QueryOutcome]] = [[] for _ in range(folds)]
    for outcome in outcomes:
        groups[fold_of(outcome.query.id, folds)].append(outcome)
    return [metrics(group) for group in groups]


@dataclass(frozen=True, slots=True)
class Percentiles:
    """p50, p99 and max (nearest rank) of a set of timings, in milliseconds."""

    p50: float
    p99: float
    max: float

    def as_dict(self) -> dict[str, float]:
        """p50, p99 and max as a JSON object."""
        return {"p50": self.p50, "p99": self.p99, "max": self.max}

    def head(self) -> dict[str, float]:
        """p50 and p99 only: the fast stage's figures in the delivery report."""
        return {"p50": self.p50, "p99": self.p99}


def percentiles(values: Sequence[float]) -> Percentiles:
    """p50, p99 and max (nearest rank) of ``values``; zeros when empty."""
    if not values:
        return Percentiles(0.0, 0.0, 0.0)
    ordered = sorted(values)
    return Percentiles(_nearest_rank(ordered, 0.50), _nearest_rank(ordered, 0.99), ordered[-1])


def _nearest_rank(ordered: Sequence[float], q: float) -> float:
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


_PLAIN_WORD = re.compile(r"\w+")


def plain_tokens(text: str) -> list[str]:
    """The baseline's tokenizer: lower-cased word runs, nothing else."""
    return _PLAIN_WORD.findall(text.lower())


class PlainBaseline:
    """rank-bm25 BM25Okapi over name + description + body; top 2 with a score above 0.

    Raises BaselineUnavailable without rank-bm25 (the ``bench`` extra): the one place that imports it.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        try:
            from rank_bm25 import BM25Okapi
        except ImportError:
            raise BaselineUnavailable(
                f"the plain BM25 baseline needs rank-bm25, which is not installed: pip install '{BENCH_EXTRA}'"
            ) from None
        self.refs = sorted(snapshot.docs)
        corpus = [plain_text(snapshot.docs[ref]) for ref in self.refs]
        self.bm25 = BM25Okapi([plain_tokens(text) or [""] for text in corpus])

    def scores(self, query: str) -> Sequence[float]:
        """BM25Okapi's score of each doc for ``query``, in ``refs`` order."""
        scores: Sequence[float] = self.bm25.get_scores(plain_tokens(query))
        return scores

    def deliver(self, query: str) -> tuple[list[str], float]:
        """The top docs for ``query`` and the milliseconds it took."""
        started = time.perf_counter()
        scores = self.scores(query)
        order = sorted(range(len(self.refs)), key=lambda i: (-scores[i], self.refs[i]))
        chosen = [self.refs[i] for i in order[:BASELINE_TOP] if scores[i] > 0]
        return chosen, (time.perf_counter() - started) * 1000.0


def plain_text(doc: MemoryDoc) -> str:
    return f"{doc.name}\n{doc.description}\n{doc.body}"


def fast_deliver(heuristic: Any) -> Deliver:
    """The fast path alone: what ``FastHeuristic.recall`` delivers, and what it cost."""

    def deliver(query: str) -> tuple[list[str], float, float]:
        result = heuristic.recall(query)
        return [scored.doc.ref for scored in result.docs], result.elapsed_ms, result.elapsed_ms

    return deliver
