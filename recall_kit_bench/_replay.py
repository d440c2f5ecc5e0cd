"""`bench replay`: what learning from refined selections does to the fast stage, cross-validated.

The queries are split into folds by a hash of their id (``fold_of``). For each measured fold, a
fresh copy of the dataset's memories is opened with learning on, every prompt of the other folds
runs through a real session against the scripted chat server acting as an oracle (it selects the
gold memories, or nothing for a negative; with ``oracle_accuracy`` < 1 a seeded share of its
answers is wrong), and then this fold's prompts are measured fast-only over what was learned. The
baseline is the same folds over the untouched memories, learning off.

With ``turn_ends_early`` every training turn ends (``finish``) right after its initial point, before
the oracle answers (the scripted server holds each answer until then), as a turn without tools
shorter than the model's latency does: what it teaches comes from the refinement that goes on after
the turn, for learning only.
"""

from __future__ import annotations

import asyncio
import json
import random
import shutil
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_store import LEARNED_PATH, MemoryRoot, sidecar_path
from recall_kit import FastHeuristic, LearnEvent, Recaller, RecallEvent, SelectorConfig, UsageError, open_recaller
from recall_kit.testing import ScriptedChatServer
from recall_kit.turns import ObservedTurn, TurnRunner
from recall_kit_bench._datasets import DATASET_SCOPE, EvalDataset, EvalQuery
from recall_kit_bench._errors import HarnessError
from recall_kit_bench._evaluation import (
    Metrics,
    QueryOutcome,
    fast_deliver,
    fold_of,
    metrics,
    metrics_by_kind,
    run,
)
from recall_kit_bench._reports import METRIC_KEYS, DeliveryReport, Spread

REPLAY_FOLDS = 5
MAX_FOLDS = 1000  # more folds than a dataset has queries measure empty ones
MAX_PASSES = 100  # each pass replays every training prompt again: 100 is hours on the largest set
MODEL_TIMEOUT_S = 30.0  # the selector's default deadline: the scripted oracle answers at once
_ORACLE_MODEL = "scripted-oracle"

Progress = Callable[[int, int], None]  # (done, total) turns and measurements


@dataclass(frozen=True, slots=True)
class ReplaySettings:
    """How the replay runs: folds, which are measured, the oracle's accuracy and seed, ``--repeat``."""

    folds: int = REPLAY_FOLDS
    measure_folds: tuple[int, ...] | None = None  # None: every fold
    oracle_accuracy: float = 1.0
    seed: int = 0
    repeat: bool = False
    turn_ends_early: bool = False  # each training turn finishes before the oracle answers
    passes: int = 1  # times the other folds' prompts are trained on, in file order each time
    skip_certain: bool = False  # the learning recaller skips the model when the fast answer is certain

    def measured(self) -> tuple[int, ...]:
        """The folds measured, in order; UsageError for a setting out of range."""
        if not 2 <= self.folds <= MAX_FOLDS:
            raise UsageError(f"folds must be 2 to {MAX_FOLDS}, got {self.folds}")
        if not 1 <= self.passes <= MAX_PASSES:
            raise UsageError(f"passes must be 1 to {MAX_PASSES}, got {self.passes}")
        if not 0.0 <= self.oracle_accuracy <= 1.0:
            raise UsageError(f"oracle accuracy is a share from 0 to 1, got {self.oracle_accuracy:g}")
        chosen = tuple(range(self.folds)) if self.measure_folds is None else tuple(sorted(set(self.measure_folds)))
        bad = [f for f in chosen if not 0 <= f < self.folds]
        if bad or not chosen:
            raise UsageError(f"measured folds must be among 0..{self.folds - 1}, got {list(self.measure_folds or ())}")
        return chosen


@dataclass(frozen=True, slots=True)
class OracleAnswers:
    """What the oracle selects for each query (by position in the dataset), and which answers are wrong."""

    refs: tuple[tuple[str, ...], ...]  # dataset refs (scope/path), per query in file order
    wrong: frozenset[int]  # positions of the queries whose answer is not the gold one

    def oracle_lines(self, queries: Sequence[EvalQuery]) -> list[dict[str, Any]]:
        """queries.jsonl lines (query, relevant paths) the scripted server's oracle answers from."""
        return [
            {"query": q.query, "relevant": [ref.partition("/")[2] for ref in refs]}
            for q, refs in zip(queries, self.refs)
        ]


def oracle_answers(dataset: EvalDataset, accuracy: float, seed: int) -> OracleAnswers:
    """The oracle's answer to each query: its gold refs, but for ``round((1 - accuracy) * n)`` queries
    drawn with ``random.Random(seed)``, which get another memory or nothing (alternately; a negative
    always gets another memory, since nothing is its right answer)."""
    queries = dataset.queries
    rng = random.Random(seed)
    wrong = sorted(rng.sample(range(len(queries)), round((1.0 - accuracy) * len(queries))))
    refs = [tuple(sorted(q.relevant)) for q in queries]
    every = sorted(dataset.snapshot.docs)
    answerable_wrong = 0
    for i in wrong:
        q = queries[i]
        others = [ref for ref in every if ref not in q.relevant]
        if q.relevant and (answerable_wrong % 2 == 1 or not others):
            refs[i] = ()
        else:
            refs[i] = (rng.choice(others),) if others else ()
        answerable_wrong += bool(q.relevant)
    return OracleAnswers(tuple(refs), frozenset(wrong))


@dataclass(frozen=True, slots=True)
class TrainingSummary:
    """The learning turns of one fold: how many ran, settled, and fell back instead of a model answer."""

    turns: int
    unsettled: int
    fallbacks: int
    learn_ms: tuple[float, ...] = ()  # per sidecar update, from the learner's telemetry
    learn_outcomes: Mapping[str, int] = field(default_factory=dict)  # learned / skipped / failed
    learn_dropped: int = 0  # selections the learner's full queue turned away (it fell behind)
    after_turn: int = 0  # turns whose refinement went on after the turn, for learning only
    skipped: int = 0  # turns whose model stage was skipped, the fast answer being certain
    skipped_differs: int = 0  # of those, turns whose delivery differs from the oracle's answer


@dataclass(frozen=True, slots=True)
class FoldResult:
    """One measured fold: its prompts fast-only before and after learning from the other folds."""

    fold: int
    baseline: tuple[QueryOutcome, ...]
    learned: tuple[QueryOutcome, ...]
    repeat: tuple[QueryOutcome, ...]  # the trained prompts again, after learning (``repeat`` only)
    training: TrainingSummary
    sidecar_bytes: int  # the learned sidecar's size after learning
    learned_memories: int  # memories something was learned for (entries, not the log's lines)

    def as_dict(self, docs: int) -> dict[str, Any]:
        """The fold's figures as a JSON object."""
        data: dict[str, Any] = {
            "fold": self.fold,
            "measured": len(self.learned),
            "trained": self.training.turns,
            "baseline": metrics(self.baseline).as_dict(),
            "learned": metrics(self.learned).as_dict(),
            "unsettled": self.training.unsettled,
            "fallbacks": self.training.fallbacks,
            "learn_outcomes": dict(self.training.learn_outcomes),
            "learn_dropped": self.training.learn_dropped,
            "learned_after_turn": self.training.after_turn,
            "model_skipped": self.training.skipped,
            "model_skipped_differs": self.training.skipped_differs,
            "sidecar_bytes": self.sidecar_bytes,
            "sidecar_bytes_per_memory": self.sidecar_bytes / docs if docs else None,
            "learned_memories": self.learned_memories,
        }
        if self.repeat:
            data["repeat"] = metrics(self.repeat).as_dict()
        return data


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The whole replay: baseline and learned over the measured folds, the repeat, the costs."""

    dataset: EvalDataset  # the measured queries only
    settings: ReplaySettings
    measured: tuple[int, ...]
    folds: tuple[FoldResult, ...]
    sidecar: str | None  # the enrichment sidecar the memories were read with
    wrong_answers: int
    baseline: DeliveryReport = field(init=False)
    learned: DeliveryReport = field(init=False)

    def __post_init__(self) -> None:
        n = self.settings.folds
        object.__setattr__(self, "baseline", DeliveryReport.of(self.dataset, self.baseline_outcomes, n))
        object.__setattr__(self, "learned", DeliveryReport.of(self.dataset, self.learned_outcomes, n))

    @property
    def baseline_outcomes(self) -> list[QueryOutcome]:
        """Every measured prompt, learning off."""
        return [o for f in self.folds for o in f.baseline]

    @property
    def learned_outcomes(self) -> list[QueryOutcome]:
        """Every measured prompt, after learning from the other folds."""
        return [o for f in self.folds for o in f.learned]

    @property
    def repeat_outcomes(self) -> list[QueryOutcome]:
        """Every trained prompt measured again after its fold's learning (each prompt once per fold, however many passes trained it)."""
        return [o for f in self.folds for o in f.repeat]

    def fold_spread(self, pick: Callable[[FoldResult], Metrics | None], key: str) -> Spread:
        """Median and min-max of one metric over the measured folds."""
        return Spread.of([getattr(m, key) if (m := pick(f)) is not None else None for f in self.folds])

    def delta_spread(self, key: str) -> Spread:
        """Median and min-max over the measured folds of learned minus baseline."""
        deltas = []
        for f in self.folds:
            a, b = getattr(metrics(f.learned), key), getattr(metrics(f.baseline), key)
            deltas.append(None if a is None or b is None else a - b)
        return Spread.of(deltas)

    def sidecar_bytes_per_memory(self) -> Spread:
        """The learned sidecar's bytes per memory after each fold's learning."""
        docs = len(self.dataset.snapshot.docs)
        return Spread.of([f.sidecar_bytes / docs if docs else None for f in self.folds])

    def learn_ms(self) -> float | None:
        """The median learner update time over every fold, when the learner's telemetry reports it."""
        times = [ms for f in self.folds for ms in f.training.learn_ms]
        return statistics.median(times) if times else None

    def as_dict(self) -> dict[str, Any]:
        """``baseline`` and ``learned`` as `bench delivery --json` reports, with the deltas, the folds and the costs."""
        docs = len(self.dataset.snapshot.docs)
        data: dict[str, Any] = {"dataset": str(self.dataset.root), "docs": docs}
        data["baseline"] = self._side(self.baseline, lambda f: metrics(f.baseline))
        data["learned"] = self._side(self.learned, lambda f: metrics(f.learned))
        data["delta"] = {
            **{key: _delta(self.learned.overall, self.baseline.overall, key) for key in METRIC_KEYS},
            "by_kind": {
                kind: {key: _delta(m, self.baseline.by_kind.get(kind), key) for key in METRIC_KEYS}
                for kind, m in self.learned.by_kind.items()
            },
            "folds": {key: self.delta_spread(key).as_dict() for key in METRIC_KEYS},
        }
        if self.settings.repeat:
            data["repeat"] = self._repeat()
        data["folds"] = [f.as_dict(docs) for f in self.folds]
        cost: dict[str, Any] = {"sidecar_bytes_per_memory": self.sidecar_bytes_per_memory().as_dict()}
        learn_ms = self.learn_ms()
        if learn_ms is not None:
            cost["learn_update_ms_p50"] = learn_ms
        data["cost"] = cost
        data["settings"] = {
            "folds": self.settings.folds,
            "measured_folds": list(self.measured),
            "oracle_accuracy": self.settings.oracle_accuracy,
            "wrong_answers": self.wrong_answers,
            "seed": self.settings.seed,
            "repeat": self.settings.repeat,
            "turn_ends_early": self.settings.turn_ends_early,
            "passes": self.settings.passes,
            "skip_certain": self.settings.skip_certain,
            "enrichment": self.sidecar,
        }
        return data

    def _side(self, report: DeliveryReport, pick: Callable[[FoldResult], Metrics]) -> dict[str, Any]:
        data = report.as_dict()
        data["folds"] = {key: self.fold_spread(pick, key).as_dict() for key in METRIC_KEYS}
        return data

    def _repeat(self) -> dict[str, Any]:
        outcomes = self.repeat_outcomes
        first = {o.query.id: o for o in self.baseline_outcomes}
        spoke = [o for o in outcomes if not o.query.relevant and first.get(o.query.id, o).delivered]
        return {
            **metrics(outcomes).as_dict(),
            "by_kind": {kind: m.as_dict() for kind, m in metrics_by_kind(outcomes).items()},
            "folds": {
                key: self.fold_spread(lambda f: metrics(f.repeat), key).as_dict() for key in METRIC_KEYS
            },
            # negatives the fast stage delivered something for before learning: what suppressors are for
            "negatives_delivered_by_baseline": len(spoke),
            "negative_silence_where_baseline_delivered": metrics(spoke).negative_silence,
        }


def _delta(a: Metrics | None, b: Metrics | None, key: str) -> float | None:
    x = getattr(a, key) if a is not None else None
    y = getattr(b, key) if b is not None else None
    return None if x is None or y is None else x - y


def open_learning_recaller(
    root: Path, selector: SelectorConfig, telemetry: Callable[[Any], object], skip_certain: bool = False
) -> Recaller:
    """A Recaller over ``root`` that learns from its refined selections (not watched, no index cache)."""
    return open_recaller(
        [root], selector=selector, watch=False, use_cache=False, telemetry=telemetry, learn=True,
        skip_certain=skip_certain,
    )


def copy_memories(dataset: EvalDataset, sidecar: Path | None, into: Path) -> Path:
    """A fresh copy of the dataset's memories at ``into/memories`` (its scope label), with ``sidecar``
    placed as its own enrichment sidecar and nothing else of the original's ``.recall-kit``."""
    root = into / DATASET_SCOPE
    shutil.copytree(dataset.root / "memories", root, ignore=shutil.ignore_patterns(".recall-kit"), symlinks=False)
    if sidecar is not None:
        target = sidecar_path(root)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(sidecar, target)
        target.chmod(0o600)
    return root


async def train(
    recaller: Recaller,
    queries: Sequence[EvalQuery],
    tick: Callable[[], None],
    answer: Callable[[], None] | None = None,
    learned: asyncio.Event | None = None,
    observe: Callable[[EvalQuery, frozenset[str]], None] | None = None,
) -> tuple[int, int, int]:
    """Each query as one observed turn of ``recaller`` (``recall_kit.turns.TurnRunner``, the one turn
    loop): begin, the initial point, a wait until the recall settles (bounded by the selector's
    deadline), the tool-result point. With ``answer`` (which lets the held oracle answer once), the
    turn is tool-free and ends at its initial point; then the oracle answers and the turn's ``learn``
    event (``learned``) is awaited before the next. ``observe`` gets each turn's query and the refs it
    delivered. Returns (turns, unsettled, refinements that went on after their turn)."""
    runner = TurnRunner(recaller)
    bound = runner.settle_bound()
    unsettled = after_turn = 0

    async def answered(turn: ObservedTurn) -> None:
        nonlocal after_turn, unsettled
        if not turn.learning:  # it was cut (or had settled): nothing is held for it
            return
        after_turn += 1
        if learned is not None:
            learned.clear()
        assert answer is not None
        answer()
        try:
            async with asyncio.timeout(bound.bound_s):
                if learned is not None:
                    await learned.wait()
        except TimeoutError:
            unsettled += 1

    for query in queries:
        if answer is None:
            turn = await runner.run(query.query, between=bound)
            unsettled += turn.settled_ms is None  # the tool-result point took what there was, as an agent's would
        else:
            turn = await runner.run(query.query, after=answered)
        if observe is not None:
            observe(query, frozenset(turn.initial_refs + turn.tool_refs))
        tick()
    return len(queries), unsettled, after_turn


class _TurnTelemetry:
    """The learning recaller's telemetry: counts fallbacks and skipped model calls, keeps update times,
    and tells when the current turn was learned from (the turn runner knows when it settled)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.learned = asyncio.Event()  # a learn event arrived: the turn's selection was learned from, or skipped
        self.fallbacks = 0
        self.learn_ms: list[float] = []
        self.learn_outcomes: dict[str, int] = {}  # LearnEvent outcome -> count
        self.skipped = 0  # recalls settled without the model, the fast answer being certain
        self.skipped_now = False  # the latest recall was one of those

    def __call__(self, event: Any) -> None:
        if isinstance(event, RecallEvent) and event.settled:
            self.fallbacks += event.fallback is not None
            self.skipped += event.model_skipped
            self.skipped_now = event.model_skipped
        elif isinstance(event, LearnEvent):
            self.loop.call_soon_threadsafe(self.learned.set)  # the learner emits from its own thread
            self.learn_outcomes[event.outcome] = self.learn_outcomes.get(event.outcome, 0) + 1
            if event.outcome == "learned":
                self.learn_ms.append(event.duration_ms)


def fold_split(dataset: EvalDataset, folds: int, fold: int) -> tuple[list[EvalQuery], list[EvalQuery]]:
    """The queries of ``fold`` (by ``fold_of``) and those of every other fold, each in file order."""
    mine = [q for q in dataset.queries if fold_of(q.id, folds) == fold]
    return mine, [q for q in dataset.queries if fold_of(q.id, folds) != fold]


def baseline_fold(heuristic: FastHeuristic, dataset: EvalDataset, queries: Sequence[EvalQuery]) -> list[QueryOutcome]:
    """``queries`` fast-only over the untouched memories: learning off, nothing to train."""
    return run(_subset(dataset, queries), fast_deliver(heuristic))


def _subset(dataset: EvalDataset, queries: Sequence[EvalQuery]) -> EvalDataset:
    return EvalDataset(dataset.root, dataset.snapshot, tuple(queries))


def _learned_file(root: Path) -> tuple[int, int]:
    """The learned sidecar's size in bytes (as the log stands, superseded lines and all) and how many
    memories it holds something for (0, 0 when there is none)."""
    path = root / LEARNED_PATH
    if not path.is_file():
        return 0, 0
    return path.stat().st_size, len(MemoryRoot(root).read_learning()[0])


async def _learned_fold(
    dataset: EvalDataset,
    sidecar: Path | None,
    selector: SelectorConfig,
    trained: Sequence[EvalQuery],
    measured: Sequence[EvalQuery],
    repeat: bool,
    tick: Callable[[], None],
    answer: Callable[[], None] | None = None,
    passes: int = 1,
    skip_certain: bool = False,
    oracle: Mapping[str, frozenset[str]] | None = None,
) -> tuple[list[QueryOutcome], list[QueryOutcome], TrainingSummary, int, int]:
    differs = 0  # turns skipped whose delivery is not the oracle's answer: what the model would have changed

    def observe(query: EvalQuery, delivered: frozenset[str]) -> None:
        nonlocal differs
        if telemetry.skipped_now and oracle is not None and delivered != oracle.get(query.id, frozenset()):
            differs += 1
        telemetry.skipped_now = False

    with tempfile.TemporaryDirectory(prefix="recall-kit-replay-") as tmp:
        root = copy_memories(dataset, sidecar, Path(tmp))
        telemetry = _TurnTelemetry(asyncio.get_running_loop())
        dropped = 0
        recaller = open_learning_recaller(root, selector, telemetry, skip_certain)
        try:
            turns, unsettled, after_turn = await train(
                recaller, [*trained] * passes, tick, answer, telemetry.learned if answer else None, observe,
            )
            learner = recaller.learner
            if learner is None:
                raise HarnessError("the Recaller opened with learn=True has no learner")
            if not await asyncio.to_thread(learner.wait_idle, MODEL_TIMEOUT_S):
                raise HarnessError(f"the learner did not finish its updates in {MODEL_TIMEOUT_S:g} s")
            dropped = learner.dropped
            deliver = fast_deliver(recaller.heuristic)
            learned = run(_subset(dataset, measured), deliver, on_query=lambda _: tick())
            again = run(_subset(dataset, trained), deliver, on_query=lambda _: tick()) if repeat else []
        finally:
            await recaller.aclose()
        size, lines = _learned_file(root)
    summary = TrainingSummary(
        turns, unsettled, telemetry.fallbacks, tuple(telemetry.learn_ms), dict(telemetry.learn_outcomes), dropped,
        after_turn, telemetry.skipped, differs,
    )
    return learned, again, summary, size, lines


def run_replay(
    dataset: EvalDataset,
    *,
    sidecar: Path | None = None,
    settings: ReplaySettings = ReplaySettings(),
    progress: Progress | None = None,
) -> ReplayReport:
    """Replay ``dataset`` (its snapshot read with ``sidecar``, or without enrichment when None).

    Raises UsageError for settings out of range and HarnessError when this recall_kit cannot learn.
    """
    measured_folds = settings.measured()
    answers = oracle_answers(dataset, settings.oracle_accuracy, settings.seed)
    split = {f: fold_split(dataset, settings.folds, f) for f in measured_folds}
    in_fold = {f: mine for f, (mine, _) in split.items()}
    trained_of = {f: others for f, (_, others) in split.items()}
    total = sum(
        len(in_fold[f]) + len(trained_of[f]) * (settings.passes + settings.repeat) for f in measured_folds
    )
    done = 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    heuristic = FastHeuristic(dataset.snapshot)
    oracle_refs = {q.id: frozenset(refs) for q, refs in zip(dataset.queries, answers.refs)}
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="recall-kit-oracle-") as tmp:
            oracle = Path(tmp) / "queries.jsonl"
            oracle.write_text(
                "".join(_json_line(line) for line in answers.oracle_lines(dataset.queries)), encoding="utf-8"
            )
            with ScriptedChatServer(oracle=oracle) as server:
                if settings.turn_ends_early:
                    server.hold()  # each answer waits until its turn has ended
                answer = server.release if settings.turn_ends_early else None
                selector = SelectorConfig(base_url=server.base_url, model=_ORACLE_MODEL, timeout=MODEL_TIMEOUT_S)
                for f in measured_folds:
                    baseline = baseline_fold(heuristic, dataset, in_fold[f])
                    learned, again, summary, size, lines = asyncio.run(
                        _learned_fold(
                            dataset, sidecar, selector, trained_of[f], in_fold[f], settings.repeat, tick, answer,
                            settings.passes, settings.skip_certain, oracle_refs,
                        )
                    )
                    results.append(FoldResult(f, tuple(baseline), tuple(learned), tuple(again), summary, size, lines))
    finally:
        heuristic.close()
    measured_queries = [q for f in measured_folds for q in in_fold[f]]
    return ReplayReport(
        _subset(dataset, measured_queries),
        settings,
        measured_folds,
        tuple(results),
        None if sidecar is None else str(sidecar),
        len(answers.wrong),
    )


def _json_line(item: Mapping[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False) + "\n"
