"""Delivery-rate evaluation: datasets, metrics, the plain baseline, folds.

The delivery step is a callable, ``deliver(query) -> (delivered refs, wait_ms[, fast_ms])``, so
the same metrics measure the plain baseline and the bare heuristic; the session lifecycle is
measured through ``recall_kit_bench._turn_metrics``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rank_bm25 import BM25Okapi

from memory_store import MemoryDoc, MemoryStore, Snapshot, sidecar_path

DATASET_SCOPE = "memories"  # the scope label a dataset's memories/ folder is opened under
BASELINE_TOP = 2

Deliver = Callable[[str], Sequence[Any]]  # -> (refs, wait_ms) or (refs, wait_ms, fast_ms)


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One line of queries.jsonl; ``relevant`` holds refs (scope/path)."""

    id: str
    query: str
    relevant: frozenset[str]
    kind: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvalDataset:
    """A dataset folder: its memories as one snapshot and its queries."""

    root: Path
    snapshot: Snapshot
    queries: tuple[EvalQuery, ...]


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
        return asdict(self)


def load_dataset(path: str | Path, *, enrichment: bool | str | Path = True) -> EvalDataset:
    """Read ``memories/**/*.md`` and ``queries.jsonl`` from a dataset folder.

    ``enrichment``: True attaches the dataset's own sidecar when it has one
    (``memories/.recall-kit/enrichment.jsonl``), False none, a path that sidecar file instead.
    """
    root = Path(path)
    memories = root / "memories"
    if not memories.is_dir() or not (root / "queries.jsonl").is_file():
        raise FileNotFoundError(f"{root} is not a dataset (needs memories/ and queries.jsonl)")
    if not isinstance(enrichment, bool) and not Path(enrichment).is_file():
        raise FileNotFoundError(f"enrichment sidecar not found: {enrichment}")
    snapshot = _load_memories(memories, enrichment)
    queries = []
    with open(root / "queries.jsonl", encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            item = json.loads(line)
            queries.append(
                EvalQuery(
                    id=str(item["id"]),
                    query=item["query"],
                    relevant=frozenset(f"{DATASET_SCOPE}/{rel}" for rel in item["relevant"]),
                    kind=str(item.get("kind", "")),
                    extra={k: v for k, v in item.items() if k not in _QUERY_KEYS},
                )
            )
    return EvalDataset(root, snapshot, tuple(queries))


_QUERY_KEYS = frozenset({"id", "query", "relevant", "kind"})


def _load_memories(memories: Path, enrichment: bool | str | Path) -> Snapshot:
    sidecars = enrichment if isinstance(enrichment, bool) else {DATASET_SCOPE: Path(enrichment)}
    with MemoryStore.open((DATASET_SCOPE, memories), watch=False, enrichment=sidecars) as store:
        return store.snapshot()


def dataset_sidecar(path: str | Path) -> Path | None:
    """The dataset's own enrichment sidecar, when it has one."""
    sidecar = sidecar_path(Path(path) / "memories")
    return sidecar if sidecar.is_file() else None


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
    groups: dict[str, list[QueryOutcome]] = {}
    for outcome in outcomes:
        groups.setdefault(outcome.query.kind, []).append(outcome)
    return {kind: metrics(group) for kind, group in sorted(groups.items())}


def fold_of(query_id: str, folds: int) -> int:
    """A stable fold for a query, from a hash of its id."""
    return int(hashlib.sha256(query_id.encode()).hexdigest(), 16) % folds


def metrics_by_fold(outcomes: Iterable[QueryOutcome], folds: int = 5) -> list[Metrics]:
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
    """rank-bm25 BM25Okapi over name + description + body; top 2 with a score above 0."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.refs = sorted(snapshot.docs)
        corpus = [plain_text(snapshot.docs[ref]) for ref in self.refs]
        self.bm25 = BM25Okapi([plain_tokens(text) or [""] for text in corpus])

    def deliver(self, query: str) -> tuple[list[str], float]:
        started = time.perf_counter()
        scores = self.bm25.get_scores(plain_tokens(query))
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
