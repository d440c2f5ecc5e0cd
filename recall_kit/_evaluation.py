"""Delivery-rate evaluation (DESIGN.md section 6): datasets, metrics, the plain baseline, folds.

The delivery step is a callable, ``deliver(query) -> (delivered refs, wait_ms[, fast_ms])``, so
the same metrics measure the fast path alone today and the full session lifecycle later.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rank_bm25 import BM25Okapi

from memory_store import MemoryDoc, MemoryStore, Snapshot

if TYPE_CHECKING:  # the session modules import this one's siblings; only annotations need them
    from recall_kit._heuristic import FastHeuristic, FastResult
    from recall_kit._selector import ModelSelector, Selection
    from recall_kit._session import Delivery

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
    """DESIGN.md section 6's delivery metrics over a set of outcomes."""

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


def load_dataset(path: str | Path) -> EvalDataset:
    """Read ``memories/**/*.md`` and ``queries.jsonl`` from a dataset folder."""
    root = Path(path)
    memories = root / "memories"
    if not memories.is_dir() or not (root / "queries.jsonl").is_file():
        raise FileNotFoundError(f"{root} is not a dataset (needs memories/ and queries.jsonl)")
    snapshot = _load_memories(memories)
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


def _load_memories(memories: Path) -> Snapshot:
    with MemoryStore.open((DATASET_SCOPE, memories), watch=False) as store:
        return store.snapshot()


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


def percentiles(values: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max (nearest rank) of ``values``; zeros when empty."""
    if not values:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    ordered = sorted(values)
    return {
        "p50": _nearest_rank(ordered, 0.50),
        "p99": _nearest_rank(ordered, 0.99),
        "max": ordered[-1],
    }


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
        corpus = [_plain_text(snapshot.docs[ref]) for ref in self.refs]
        self.bm25 = BM25Okapi([plain_tokens(text) or [""] for text in corpus])

    def deliver(self, query: str) -> tuple[list[str], float]:
        started = time.perf_counter()
        scores = self.bm25.get_scores(plain_tokens(query))
        order = sorted(range(len(self.refs)), key=lambda i: (-scores[i], self.refs[i]))
        chosen = [self.refs[i] for i in order[:BASELINE_TOP] if scores[i] > 0]
        return chosen, (time.perf_counter() - started) * 1000.0


def _plain_text(doc: MemoryDoc) -> str:
    return f"{doc.name}\n{doc.description}\n{doc.body}"


def fast_deliver(heuristic: Any) -> Deliver:
    """The fast path alone: what ``FastHeuristic.recall`` delivers, and what it cost."""

    def deliver(query: str) -> tuple[list[str], float, float]:
        result = heuristic.recall(query)
        return [scored.doc.ref for scored in result.docs], result.elapsed_ms, result.elapsed_ms

    return deliver


def open_snapshot(roots: Sequence[str | Path]) -> Snapshot:
    """One-shot snapshot of memory roots (scope label = folder name), for the CLI."""
    with MemoryStore.open(*roots, watch=False) as store:
        return store.snapshot()


# --- latency on generated stores ---------------------------------------------------------

_SYLLABLES = (
    "ka ri to na mo se lu pe vi da ro gan tel mar sin dor bel quo fir zen "
    "pra lo ki tu ne sa po mi ve ho"
).split()
_FUNCTION_WORDS = (
    "the of and to a in is it you that he was for on are with as his they be at one have this from "
    "or had by not but what some we can out other were all there when up use your how said an each she"
).split()
ZIPF_EXPONENT = 1.07  # word frequencies in English text follow roughly 1 / rank^1.07
VOCABULARY_SIZE = 30_000


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """Fast-stage and update cost at one store size, beside rank-bm25's full scoring."""

    docs: int
    fast_ms: dict[str, float]
    fast_cpu_ms: dict[str, float]  # thread CPU time: the same calls without other processes' share
    baseline_ms: dict[str, float]
    update_ms: dict[str, float]
    query_after_update_ms: dict[str, float]
    build_s: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "docs": self.docs,
            "fast_ms": self.fast_ms,
            "fast_cpu_ms": self.fast_cpu_ms,
            "rank_bm25_ms": self.baseline_ms,
            "update_ms": self.update_ms,
            "query_after_update_ms": self.query_after_update_ms,
            "build_s": round(self.build_s, 3),
        }


def generated_vocabulary(size: int = VOCABULARY_SIZE, seed: int = 7) -> list[str]:
    """Distinct pronounceable pseudo-words, most frequent first."""
    import random

    rng = random.Random(seed)
    # The most frequent ranks of real text are function words; a tokenizer drops them.
    words: dict[str, None] = dict.fromkeys(_FUNCTION_WORDS)
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def generated_snapshot(n_docs: int, vocabulary: Sequence[str], seed: int = 11) -> Snapshot:
    """A store of ``n_docs`` memories whose words follow a Zipf distribution over ``vocabulary``."""
    import itertools
    import random

    rng = random.Random(seed)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(len(vocabulary))))

    def words(count: int) -> str:
        return " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=count))

    docs = {}
    for i in range(n_docs):
        path = f"project-{i % 40}/memory-{i}.md"
        body = "\n".join(words(rng.randint(8, 20)) for _ in range(rng.randint(3, 10)))
        docs[f"gen/{path}"] = _generated_doc(path, words(rng.randint(3, 6)), words(rng.randint(8, 16)), body)
    return Snapshot.build(1, docs, (), frozenset(docs))


def _generated_doc(path: str, name: str, description: str, body: str) -> MemoryDoc:
    return MemoryDoc(
        scope="gen",
        path=path,
        abspath=Path("/generated") / path,
        name=name,
        description=description,
        type="project",
        keywords=(),
        extra={},
        body=body,
        mtime=0.0,
        size=len(body),
        content_hash="",
    )


def generated_queries(vocabulary: Sequence[str], count: int, seed: int = 13) -> list[str]:
    """Prompts of 3-10 words: common and rare words, stop words, and one typo in five."""
    import random

    rng = random.Random(seed)
    queries = []
    for i in range(count):
        words = [rng.choice(vocabulary[50:500]) for _ in range(rng.randint(1, 3))]
        words += [rng.choice(vocabulary) for _ in range(rng.randint(2, 5))]
        words += rng.sample(["the", "how", "do", "we", "is", "what", "for"], 2)
        if i % 5 == 0:
            word = max(words, key=len)
            cut = rng.randrange(1, len(word) - 1)
            words.append(word[:cut] + word[cut + 1 :])  # a dropped letter
        rng.shuffle(words)
        queries.append(" ".join(words))
    return queries


def measure_latency(
    n_docs: int, *, queries: int = 300, baseline_queries: int = 30, updates: int = 30
) -> LatencyRow:
    """Time FastHeuristic.recall, rank-bm25's get_scores, and one-file index updates."""
    from recall_kit._heuristic import FastHeuristic

    vocabulary = generated_vocabulary()
    snapshot = generated_snapshot(n_docs, vocabulary)
    prompts = generated_queries(vocabulary, queries)
    started = time.perf_counter()
    heuristic = FastHeuristic(snapshot)
    build_s = time.perf_counter() - started
    gc.collect()  # the garbage of generating the store is not the query's to pay for
    for prompt in prompts[:20]:  # warm caches before timing
        heuristic.recall(prompt)
    fast, fast_cpu = [], []
    for prompt in prompts:
        cpu_started = time.thread_time()
        fast.append(heuristic.recall(prompt).elapsed_ms)
        fast_cpu.append((time.thread_time() - cpu_started) * 1000.0)

    refs = sorted(snapshot.docs)
    bm25 = BM25Okapi([plain_tokens(_plain_text(snapshot.docs[ref])) for ref in refs])
    baseline = []
    for prompt in prompts[:baseline_queries]:
        started = time.perf_counter()
        scores = bm25.get_scores(plain_tokens(prompt))
        sorted(range(len(refs)), key=lambda i: -scores[i])[:BASELINE_TOP]
        baseline.append((time.perf_counter() - started) * 1000.0)

    update = []
    after_update = []
    docs = dict(snapshot.docs)
    version = snapshot.version
    for i in range(updates):
        ref = refs[(i * 7919) % len(refs)]
        old = docs[ref]
        docs[ref] = _generated_doc(old.path, old.name, old.description, old.body + f"\nedit {i} {vocabulary[i]}")
        version += 1
        changed = Snapshot.build(version, docs, (), frozenset({ref}))
        started = time.perf_counter()
        heuristic.apply(changed)
        update.append((time.perf_counter() - started) * 1000.0)
        # The first query touching the edited document's (common) words right after the edit.
        after_update.append(heuristic.recall(f"{old.name} {old.description}").elapsed_ms)
    return LatencyRow(
        n_docs,
        percentiles(fast),
        percentiles(fast_cpu),
        percentiles(baseline),
        percentiles(update),
        percentiles(after_update),
        build_s,
    )


# --- the real recall path: turns through a RecallSession, with each stage observed ---------


class RecordingHeuristic:
    """Delegates to a FastHeuristic and keeps its last FastResult (scores included), so a
    caller can show what the session's own fast stage decided without a second recall."""

    def __init__(self, heuristic: FastHeuristic) -> None:
        self.heuristic = heuristic
        self.last: FastResult | None = None

    def recall(self, query: str, *, exclude: Iterable[str] = ()) -> FastResult:
        self.last = self.heuristic.recall(query, exclude=exclude)
        return self.last


class RecordingSelector:
    """Delegates to a ModelSelector and keeps its last Selection (accepted and rejected refs)."""

    def __init__(self, selector: ModelSelector) -> None:
        self.selector = selector
        self.timeout: float = selector.timeout
        self.last: Selection | None = None

    async def select(self, query: str, candidates: Sequence[MemoryDoc], **options: Any) -> Selection:
        self.last = await self.selector.select(query, candidates, **options)
        return self.last

    async def aclose(self) -> None:
        await self.selector.aclose()


SETTLE_MARGIN_S = 1.0  # beyond the selector's own deadline, before a turn stops waiting


@dataclass(frozen=True, slots=True)
class ProbedTurn:
    """One turn through a session: the initial delivery, and (tool-using) what settled after."""

    query: str
    initial: Delivery | None
    wait_ms: float  # time spent in consume("initial")
    fast: FastResult | None  # the session's own fast stage
    tool_result: Delivery | None = None  # at the first tool-result point
    selection: Selection | None = None  # when a model stage ran and finished
    settled_ms: float | None = None  # begin -> recall settled; None if it did not in time

    @property
    def initial_refs(self) -> tuple[str, ...]:
        return self.initial.refs if self.initial is not None else ()

    @property
    def tool_refs(self) -> tuple[str, ...]:
        return self.tool_result.refs if self.tool_result is not None else ()


class RecallProbe:
    """A Recaller whose heuristic and selector are observed; runs turns one at a time."""

    def __init__(
        self, store: Any, selector: ModelSelector | None = None, *, heuristic: FastHeuristic | None = None
    ) -> None:
        from recall_kit._heuristic import FastHeuristic
        from recall_kit._session import Recaller
        from recall_kit._telemetry import Telemetry

        self._owned = heuristic is None
        self.heuristic = RecordingHeuristic(heuristic if heuristic is not None else FastHeuristic(store))
        self.selector = RecordingSelector(selector) if selector is not None else None
        self._settled: dict[str, Any] = {}  # session id -> asyncio.Event
        self.recaller = Recaller(
            store, self.selector, telemetry=Telemetry(self._on_event), heuristic=self.heuristic  # type: ignore[arg-type]
        )

    def _on_event(self, event: object) -> None:
        from recall_kit._telemetry import RecallEvent

        if isinstance(event, RecallEvent) and event.settled and event.session_id in self._settled:
            self._settled[event.session_id].set()

    async def turn(
        self, query: str, *, tool_turn: bool = False, on_initial: Callable[[ProbedTurn], None] | None = None
    ) -> ProbedTurn:
        """begin, consume("initial"); tool-using: wait for the recall to settle (bounded by the
        selector's deadline) as if a tool ran, consume("tool_result"); then finish."""
        import asyncio

        session = self.recaller.session()
        settled = self._settled[session.id] = asyncio.Event()
        self.heuristic.last = None
        if self.selector is not None:
            self.selector.last = None
        try:
            session.begin(query)
            began = time.perf_counter()
            initial = await session.consume("initial")
            turn = ProbedTurn(query, initial, (time.perf_counter() - began) * 1000, self.heuristic.last)
            if on_initial is not None:
                on_initial(turn)
            if tool_turn:
                bound = (self.selector.timeout if self.selector else 0.0) + SETTLE_MARGIN_S
                try:
                    async with asyncio.timeout(bound):
                        await settled.wait()
                    settled_ms: float | None = (time.perf_counter() - began) * 1000
                except TimeoutError:
                    settled_ms = None
                tool_result = await session.consume("tool_result")
                selection = self.selector.last if self.selector else None
                turn = ProbedTurn(query, initial, turn.wait_ms, turn.fast, tool_result, selection, settled_ms)
            session.finish()
        finally:
            await session.close()
            del self._settled[session.id]
        return turn

    async def aclose(self) -> None:
        if self.selector is not None:
            await self.selector.aclose()
        close = getattr(self.heuristic.heuristic, "close", None)
        if self._owned and close is not None:
            close()


def run_turns(
    queries: Sequence[str],
    probe_factory: Callable[[], RecallProbe],
    *,
    tool_turn: bool = False,
    on_turn: Callable[[ProbedTurn], None] | None = None,
) -> list[ProbedTurn]:
    """Every query through the probe's sessions in order, on one event loop."""
    import asyncio

    async def all_turns() -> list[ProbedTurn]:
        probe = probe_factory()  # made on the loop: the selector's client belongs to it
        turns = []
        try:
            for query in queries:
                turns.append(await probe.turn(query, tool_turn=tool_turn))
                if on_turn is not None:
                    on_turn(turns[-1])
        finally:
            await probe.aclose()
        return turns

    return asyncio.run(all_turns())


def turn_outcomes(queries: Sequence[EvalQuery], turns: Sequence[ProbedTurn], part: str) -> list[QueryOutcome]:
    """QueryOutcomes for one part of each turn: ``initial`` (the no-tool turn), ``tool_result``,
    ``refined`` (the settled selection in full) or ``turn`` (everything by the first tool result)."""

    def refs(turn: ProbedTurn) -> tuple[str, ...]:
        if part == "initial":
            return turn.initial_refs
        if part == "tool_result":
            return turn.tool_refs
        if part == "refined":
            return tuple(d.ref for d in turn.selection.docs) if turn.selection is not None else ()
        if part == "turn":
            return turn.initial_refs + turn.tool_refs
        raise ValueError(f"unknown turn part {part!r}")

    fast_ms = [t.fast.elapsed_ms if t.fast is not None else 0.0 for t in turns]
    return [QueryOutcome(q, refs(t), t.wait_ms, f) for q, t, f in zip(queries, turns, fast_ms)]


def refinement_summary(turns: Sequence[ProbedTurn]) -> dict[str, Any]:
    """Model latency, validation rejections and fallbacks (by reason) over tool-using turns."""
    from collections import Counter

    selections = [t.selection for t in turns if t.selection is not None]
    rejected: Counter[str] = Counter(reason for s in selections for _, reason in s.rejected)
    fallbacks: Counter[str] = Counter(s.fallback_reason for s in selections if s.fallback_reason)
    modes: Counter[str] = Counter(s.response_mode or "none" for s in selections)
    return {
        "model_ms": percentiles([s.latency_ms for s in selections]),
        "settled_ms": percentiles([t.settled_ms for t in turns if t.settled_ms is not None]),
        "unsettled": sum(t.settled_ms is None for t in turns),
        "strategy": dict(Counter(s.strategy for s in selections)),
        "response_mode": dict(modes),
        "queries_with_rejected_refs": sum(bool(s.rejected) for s in selections),
        "rejected_refs": dict(rejected),
        "fallback": dict(fallbacks),
        "initial_phase": dict(Counter(t.initial.phase if t.initial else "none" for t in turns)),
    }
