"""Delivery through the real session lifecycle, under a model latency profile.

Every query of a dataset runs through a real RecallSession (real heuristic, real selector over
loopback HTTP to the scripted chat server in oracle mode), in two turn shapes:

- tool-free: begin, consume("initial"), finish;
- tool-using: begin, consume("initial"), a tool call of real asyncio time, consume("tool_result"),
  finish;

and, beside them on the same profile, the old blocking design: await the whole recall (heuristic
and model) up to a 2.5 s deadline before the model request. Query i gets the profile's latency
i mod len(profile), one scripted server per latency, so the assignment does not depend on timing.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from recall_kit import FastHeuristic, ModelSelector, Recaller, UsageError
from recall_kit_bench._errors import HarnessError
from recall_kit_bench._datasets import EvalDataset, EvalQuery, load_dataset
from recall_kit_bench._evaluation import (
    Metrics,
    Percentiles,
    QueryOutcome,
    metrics,
    metrics_by_kind,
    percentiles,
)
from recall_kit.turns import ObservedTurn, ToolCall, TurnRunner
from recall_kit_bench._turn_metrics import turn_outcomes

DEFAULT_LATENCIES_MS = (40.0, 250.0, 600.0, 1500.0, 3000.0)
DEFAULT_TOOL_MS = (300.0, 800.0)
BLOCKING_DEADLINE_S = 2.5  # the blocking design's outer deadline: the production agent's recall budget
# The initial wait is what we measure, so tool-free turns run few at a time: loop lag from many
# concurrent turns would be charged to the wait. Tool-using and blocking turns only sleep.
TOOL_FREE_CONCURRENCY = 1


_SERVE = """
import json, sys
from recall_kit.testing import ScriptedChatServer
server = ScriptedChatServer(**json.loads(sys.argv[1])).start()
print(server.base_url, flush=True)
sys.stdin.read()
server.stop()
"""


class ScriptedServerProcess:
    """The scripted chat server in a child process: its threads would otherwise share our GIL
    and add their slices (sys.getswitchinterval(), 5 ms) to the waits being measured."""

    def __init__(self, **options: Any):
        self.process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, json.dumps(options)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.process.stdout is not None
        self.base_url = self.process.stdout.readline().strip()
        if not self.base_url:
            self.stop()
            raise HarnessError("the scripted chat server did not start")

    def stop(self) -> None:
        """End the child by closing its stdin (killed if it outlives 10 s), and close its stdout."""
        assert self.process.stdin is not None and self.process.stdout is not None
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()

    def __enter__(self) -> ScriptedServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True, slots=True)
class ToolFreeReport:
    """Tool-free turns at the initial point."""

    overall: Metrics
    initial_phase: dict[str, int]
    by_kind: dict[str, Metrics]
    by_latency: dict[str, Metrics]  # by the model latency the query got, in ms
    # the initial wait of the turns the fast stage handed nothing to, by model latency: p50, mean, max
    silent_wait_by_latency: dict[str, dict[str, float]]

    def as_dict(self) -> dict[str, Any]:
        """The overall metrics as a JSON object, with the initial phases, the metrics by kind and by
        latency, and the silent turns' initial wait by latency."""
        return {
            **self.overall.as_dict(),
            "initial_phase": self.initial_phase,
            "by_kind": _dicts(self.by_kind),
            "by_latency": _dicts(self.by_latency),
            "silent_wait_by_latency": self.silent_wait_by_latency,
        }


@dataclass(frozen=True, slots=True)
class ToolUsingReport:
    """Tool-using turns: the initial point, the first tool-result point and the two together."""

    initial: Metrics
    first_tool_result: Metrics
    refined_at_first_tool_result: float  # share of answerable queries that got documents there
    turn: Metrics
    by_latency: dict[str, Metrics]  # the whole turn, by model latency

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON object, one key per field."""
        return {
            "initial": self.initial.as_dict(),
            "first_tool_result": self.first_tool_result.as_dict(),
            "refined_at_first_tool_result": self.refined_at_first_tool_result,
            "turn": self.turn.as_dict(),
            "by_latency": _dicts(self.by_latency),
        }


@dataclass(frozen=True, slots=True)
class BlockingReport:
    """The old design: await the whole recall up to a deadline before the model request."""

    deadline_ms: float
    added_latency_ms: Percentiles
    overall: Metrics
    by_latency: dict[str, Metrics]

    def as_dict(self) -> dict[str, Any]:
        """The overall metrics as a JSON object, with the deadline, the added latency and the metrics by latency."""
        return {
            "deadline_ms": self.deadline_ms,
            "added_latency_ms": self.added_latency_ms.as_dict(),
            **self.overall.as_dict(),
            "by_latency": _dicts(self.by_latency),
        }


@dataclass(frozen=True, slots=True)
class LifecycleReport:
    """The lifecycle bench on one dataset under one model latency profile."""

    dataset: str
    queries: int
    latencies_ms: tuple[float, ...]
    tool_ms: tuple[float, float]
    tool_free: ToolFreeReport
    tool_using: ToolUsingReport
    duplicates: int  # documents delivered twice in one session, over all turns (must be 0)
    initial_wait_ms: Percentiles  # tool-free turns, run one at a time: what one agent sees
    initial_wait_with_fast_result_ms: Percentiles  # when the heuristic had an answer
    # tool-using turns run `concurrency` at a time on one loop, so their waits include the
    # other sessions' work: reported apart, not as the single-agent figure
    concurrent_initial_wait_ms: Percentiles
    concurrency: int
    fast_ms: Percentiles
    blocking: BlockingReport

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON object, one key per field."""
        return {
            "queries": self.queries,
            "latencies_ms": list(self.latencies_ms),
            "tool_ms": list(self.tool_ms),
            "tool_free": self.tool_free.as_dict(),
            "tool_using": self.tool_using.as_dict(),
            "duplicates": self.duplicates,
            "initial_wait_ms": self.initial_wait_ms.as_dict(),
            "initial_wait_with_fast_result_ms": self.initial_wait_with_fast_result_ms.as_dict(),
            "concurrent_initial_wait_ms": self.concurrent_initial_wait_ms.as_dict(),
            "concurrency": self.concurrency,
            "fast_ms": self.fast_ms.as_dict(),
            "blocking": self.blocking.as_dict(),
            "dataset": self.dataset,
        }


def _dicts(by: dict[str, Metrics]) -> dict[str, dict[str, Any]]:
    return {key: m.as_dict() for key, m in by.items()}


async def _blocking_turn(
    heuristic: FastHeuristic, selector: ModelSelector, docs: Sequence[Any], query: EvalQuery
) -> tuple[tuple[str, ...], float]:
    """The old design: the agent awaits recall (up to the deadline) before its model request."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(BLOCKING_DEADLINE_S):
            fast = heuristic.recall(query.query)
            selection = await selector.select(
                query.query, docs, preferred=[s.doc for s in fast.ranked], fallback=[s.doc for s in fast.docs]
            )
            refs = tuple(d.ref for d in selection.docs)
    except TimeoutError:
        refs = ()  # deadline hit: the turn goes on without memory
    return refs, (time.perf_counter() - started) * 1000


def _silent_waits(turns: Sequence[ObservedTurn], latency_of: Sequence[float]) -> dict[str, dict[str, float]]:
    """The initial wait of the turns whose fast stage had nothing, per model latency: p50, mean and max."""
    groups: dict[float, list[float]] = {}
    for turn, latency in zip(turns, latency_of):
        if turn.fast is None or not turn.fast.docs:
            groups.setdefault(latency, []).append(turn.wait_ms)
    out = {}
    for latency, waits in sorted(groups.items()):
        p = percentiles(waits)
        out[f"{latency:g}"] = {"turns": len(waits), "p50": p.p50, "mean": sum(waits) / len(waits), "max": p.max}
    return out


async def _gather_limited(factories: Sequence[Callable[[], Any]], limit: int, tick: Callable[[], None]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(factory: Callable[[], Any]) -> Any:
        async with gate:
            result = await factory()
            tick()
            return result

    return await asyncio.gather(*(one(f) for f in factories))


def _by_latency(outcomes: Sequence[QueryOutcome], latency_of: Sequence[float]) -> dict[str, Metrics]:
    """Metrics per model latency; ``latency_of[i]`` is the latency outcome i got."""
    groups: dict[float, list[QueryOutcome]] = {}
    for outcome, latency in zip(outcomes, latency_of):
        groups.setdefault(latency, []).append(outcome)
    return {f"{latency:g}": metrics(group) for latency, group in sorted(groups.items())}


async def _run(
    dataset: EvalDataset,
    servers: Sequence[ScriptedServerProcess],
    latencies: Sequence[float],
    tool_ms: tuple[float, float],
    concurrency: int,
    seed: int,
    progress: Callable[[int, int], None] | None,
) -> LifecycleReport:
    queries = dataset.queries
    heuristic = FastHeuristic(dataset.snapshot)
    # one runner per latency, each with its selector; query i gets latency i mod len(latencies)
    selectors = [ModelSelector(s.base_url, "scripted") for s in servers]
    recallers = [Recaller(dataset.snapshot, selector, heuristic=heuristic) for selector in selectors]
    runners = [TurnRunner(recaller) for recaller in recallers]
    rng = random.Random(seed)
    tool_times = [rng.uniform(*tool_ms) for _ in queries]
    docs = list(dataset.snapshot.docs.values())
    latency_of = [latencies[i % len(latencies)] for i in range(len(queries))]
    total, done = 3 * len(queries), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    def runner(i: int) -> TurnRunner:
        return runners[i % len(latencies)]

    try:
        # one request per selector first, so each HTTP client and connection exists, as in a running agent:
        # building a client loads the TLS trust store, which no recall of a warm agent pays for
        await asyncio.gather(*(selector.select("warm up", docs[:1]) for selector in selectors))
        tool_free: list[ObservedTurn] = await _gather_limited(
            [partial(runner(i).run, q.query) for i, q in enumerate(queries)],
            min(concurrency, TOOL_FREE_CONCURRENCY), tick,
        )
        tool_using: list[ObservedTurn] = await _gather_limited(
            [partial(runner(i).run, q.query, between=ToolCall(tool_times[i])) for i, q in enumerate(queries)],
            concurrency, tick,
        )
        blocking = await _gather_limited(
            [partial(_blocking_turn, heuristic, selectors[i % len(latencies)], docs, q) for i, q in enumerate(queries)],
            concurrency * 2, tick,
        )
    finally:
        for selector in selectors:
            await selector.aclose()
        heuristic.close()

    free_initial = turn_outcomes(queries, tool_free, "initial")
    using_turn = turn_outcomes(queries, tool_using, "turn")
    blocking_outcomes = [QueryOutcome(q, refs, ms, 0.0) for q, (refs, ms) in zip(queries, blocking)]
    phases = {"fast": 0, "refined": 0, "none": 0}
    for turn in tool_free:
        phases[turn.initial.phase if turn.initial else "none"] += 1
    answerable = [t for q, t in zip(queries, tool_using) if q.relevant]
    return LifecycleReport(
        dataset=dataset.root.name,
        queries=len(queries),
        latencies_ms=tuple(latencies),
        tool_ms=tool_ms,
        tool_free=ToolFreeReport(
            overall=metrics(free_initial),
            initial_phase=phases,
            by_kind=metrics_by_kind(free_initial),
            by_latency=_by_latency(free_initial, latency_of),
            silent_wait_by_latency=_silent_waits(tool_free, latency_of),
        ),
        tool_using=ToolUsingReport(
            initial=metrics(turn_outcomes(queries, tool_using, "initial")),
            first_tool_result=metrics(turn_outcomes(queries, tool_using, "tool_result")),
            refined_at_first_tool_result=sum(bool(t.tool_result) for t in answerable) / max(1, len(answerable)),
            turn=metrics(using_turn),
            by_latency=_by_latency(using_turn, latency_of),
        ),
        duplicates=sum(t.duplicates for t in tool_free + tool_using),
        initial_wait_ms=percentiles([t.wait_ms for t in tool_free]),
        initial_wait_with_fast_result_ms=percentiles(
            [t.wait_ms for t in tool_free if t.initial and t.initial.phase == "fast"]
        ),
        concurrent_initial_wait_ms=percentiles([t.wait_ms for t in tool_using]),
        concurrency=concurrency,
        fast_ms=percentiles([t.fast_ms for t in tool_free]),
        blocking=BlockingReport(
            deadline_ms=BLOCKING_DEADLINE_S * 1000,
            added_latency_ms=percentiles([o.wait_ms for o in blocking_outcomes]),
            overall=metrics(blocking_outcomes),
            by_latency=_by_latency(blocking_outcomes, latency_of),
        ),
    )


def run_lifecycle_bench(
    dataset_dir: str | Path,
    *,
    latencies_ms: Sequence[float] = DEFAULT_LATENCIES_MS,
    tool_ms: tuple[float, float] = DEFAULT_TOOL_MS,
    limit: int | None = None,
    concurrency: int = 16,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> LifecycleReport:
    """Run the lifecycle benchmark on a dataset folder.

    ``limit`` takes the first N queries; ``progress(done, total)`` is called after each turn.
    """
    if not latencies_ms:
        raise UsageError("latencies_ms needs at least one latency")
    dataset = load_dataset(dataset_dir)
    if limit is not None:
        dataset = EvalDataset(dataset.root, dataset.snapshot, dataset.queries[:limit])
    oracle = Path(dataset_dir).resolve() / "queries.jsonl"
    servers: list[ScriptedServerProcess] = []
    try:
        for ms in latencies_ms:
            servers.append(ScriptedServerProcess(oracle=str(oracle), latency_ms=float(ms)))
        return asyncio.run(_run(dataset, servers, list(latencies_ms), tool_ms, concurrency, seed, progress))
    finally:
        for server in servers:
            server.stop()
