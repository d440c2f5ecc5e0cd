"""Delivery through the real session lifecycle, under a model latency profile (issue 5's bench).

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
from pathlib import Path
from typing import Any

from recall_kit._evaluation import (
    EvalDataset, EvalQuery, QueryOutcome, load_dataset, metrics, metrics_by_kind, percentiles,
)
from recall_kit._heuristic import FastHeuristic
from recall_kit._selector import ModelSelector
from recall_kit._session import Delivery, Recaller
from recall_kit._telemetry import RecallEvent, Telemetry

DEFAULT_LATENCIES_MS = (40.0, 250.0, 600.0, 1500.0, 3000.0)
DEFAULT_TOOL_MS = (300.0, 800.0)
BLOCKING_DEADLINE_S = 2.5  # the old design's outer deadline (seed: resolveAutoMemoryWithDeadline)
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
            raise RuntimeError("the scripted chat server did not start")

    def stop(self) -> None:
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
class TurnResult:
    query: EvalQuery
    latency_ms: float  # the model latency this query got
    initial: Delivery | None
    tool_result: Delivery | None
    wait_ms: float  # time spent in consume("initial")
    fast_ms: float
    duplicates: int  # documents delivered more than once in the session (must be 0)

    @property
    def initial_refs(self) -> tuple[str, ...]:
        return self.initial.refs if self.initial else ()

    @property
    def tool_refs(self) -> tuple[str, ...]:
        return self.tool_result.refs if self.tool_result else ()


class _FastCosts:
    """Telemetry callback keeping the fast stage's cost per (session, handle)."""

    def __init__(self) -> None:
        self.by_handle: dict[tuple[str, int], float] = {}

    def __call__(self, event: object) -> None:
        if isinstance(event, RecallEvent) and event.fast_ms is not None:
            self.by_handle[(event.session_id, event.handle_id)] = event.fast_ms


async def _turn(
    recaller: Recaller, costs: _FastCosts, query: EvalQuery, latency_ms: float, tool_ms: float | None
) -> TurnResult:
    session = recaller.session()
    try:
        session.begin(query.query)
        started = time.perf_counter()
        initial = await session.consume("initial")
        wait_ms = (time.perf_counter() - started) * 1000
        tool_result = None
        if tool_ms is not None:
            await asyncio.sleep(tool_ms / 1000)  # the agent's tool call
            tool_result = await session.consume("tool_result")
        session.finish()
    finally:
        await session.close()
    refs = [r for d in (initial, tool_result) if d is not None for r in d.refs]
    fast_ms = costs.by_handle.pop((session.id, 1), 0.0)
    return TurnResult(query, latency_ms, initial, tool_result, wait_ms, fast_ms, len(refs) - len(set(refs)))


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


async def _gather_limited(factories: Sequence[Callable[[], Any]], limit: int, tick: Callable[[], None]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def one(factory: Callable[[], Any]) -> Any:
        async with gate:
            result = await factory()
            tick()
            return result

    return await asyncio.gather(*(one(f) for f in factories))


def _summary(outcomes: list[QueryOutcome]) -> dict[str, Any]:
    return metrics(outcomes).as_dict()


def _by_latency(
    results: Sequence[Any], latency_of: Callable[[Any], float], outcome_of: Callable[[Any], QueryOutcome]
) -> dict[str, dict[str, Any]]:
    groups: dict[float, list[QueryOutcome]] = {}
    for result in results:
        groups.setdefault(latency_of(result), []).append(outcome_of(result))
    return {f"{latency:g}": _summary(group) for latency, group in sorted(groups.items())}


async def _run(
    dataset: EvalDataset,
    servers: Sequence[ScriptedServerProcess],
    latencies: Sequence[float],
    tool_ms: tuple[float, float],
    concurrency: int,
    seed: int,
    progress: Callable[[int, int], None] | None,
) -> dict[str, Any]:
    queries = dataset.queries
    heuristic = FastHeuristic(dataset.snapshot)
    selectors = [ModelSelector(s.base_url, "scripted") for s in servers]
    costs = _FastCosts()
    recallers = [Recaller(dataset.snapshot, sel, heuristic=heuristic, telemetry=Telemetry(costs)) for sel in selectors]
    rng = random.Random(seed)
    tool_times = [rng.uniform(*tool_ms) for _ in queries]
    docs = list(dataset.snapshot.docs.values())
    total, done = 3 * len(queries), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    def slot(i: int) -> int:
        return i % len(latencies)

    try:
        tool_free = await _gather_limited(
            [lambda i=i, q=q: _turn(recallers[slot(i)], costs, q, latencies[slot(i)], None)
             for i, q in enumerate(queries)],
            min(concurrency, TOOL_FREE_CONCURRENCY), tick,
        )
        tool_using = await _gather_limited(
            [lambda i=i, q=q: _turn(recallers[slot(i)], costs, q, latencies[slot(i)], tool_times[i])
             for i, q in enumerate(queries)],
            concurrency, tick,
        )
        blocking = await _gather_limited(
            [lambda i=i, q=q: _blocking_turn(heuristic, selectors[slot(i)], docs, q) for i, q in enumerate(queries)],
            concurrency * 2, tick,
        )
    finally:
        for selector in selectors:
            await selector.aclose()

    def initial_outcome(r: TurnResult) -> QueryOutcome:
        return QueryOutcome(r.query, r.initial_refs, r.wait_ms, r.fast_ms)

    def tool_outcome(r: TurnResult) -> QueryOutcome:
        return QueryOutcome(r.query, r.tool_refs, 0.0, r.fast_ms)

    def turn_outcome(r: TurnResult) -> QueryOutcome:
        return QueryOutcome(r.query, r.initial_refs + r.tool_refs, r.wait_ms, r.fast_ms)

    blocking_outcomes = [QueryOutcome(q, refs, ms, 0.0) for q, (refs, ms) in zip(queries, blocking)]
    blocking_latency = {id(o): latencies[slot(i)] for i, o in enumerate(blocking_outcomes)}
    phases = {"fast": 0, "refined": 0, "none": 0}
    for r in tool_free:
        phases[r.initial.phase if r.initial else "none"] += 1
    answerable = [r for r in tool_using if r.query.relevant]
    return {
        "queries": len(queries),
        "latencies_ms": list(latencies),
        "tool_ms": list(tool_ms),
        "tool_free": {
            **_summary([initial_outcome(r) for r in tool_free]),
            "initial_phase": phases,
            "by_kind": {k: m.as_dict() for k, m in metrics_by_kind(initial_outcome(r) for r in tool_free).items()},
            "by_latency": _by_latency(tool_free, lambda r: r.latency_ms, initial_outcome),
        },
        "tool_using": {
            "initial": _summary([initial_outcome(r) for r in tool_using]),
            "first_tool_result": _summary([tool_outcome(r) for r in tool_using]),
            "refined_at_first_tool_result": sum(bool(r.tool_result) for r in answerable) / max(1, len(answerable)),
            "turn": _summary([turn_outcome(r) for r in tool_using]),
            "by_latency": _by_latency(tool_using, lambda r: r.latency_ms, turn_outcome),
        },
        "duplicates": sum(r.duplicates for r in tool_free + tool_using),
        # waits of the tool-free turns, run one at a time: what one agent sees
        "initial_wait_ms": percentiles([r.wait_ms for r in tool_free]),
        # the wait when the heuristic had an answer: it must not wait for the model
        "initial_wait_with_fast_result_ms": percentiles(
            [r.wait_ms for r in tool_free if r.initial and r.initial.phase == "fast"]
        ),
        # tool-using turns run `concurrency` at a time on one loop, so their waits include the
        # other sessions' work: reported apart, not as the single-agent figure
        "concurrent_initial_wait_ms": percentiles([r.wait_ms for r in tool_using]),
        "concurrency": concurrency,
        "fast_ms": percentiles([r.fast_ms for r in tool_free]),
        "blocking": {
            "deadline_ms": BLOCKING_DEADLINE_S * 1000,
            "added_latency_ms": percentiles([o.wait_ms for o in blocking_outcomes]),
            **_summary(blocking_outcomes),
            "by_latency": _by_latency(blocking_outcomes, lambda o: blocking_latency[id(o)], lambda o: o),
        },
    }


def run_lifecycle_bench(
    dataset_dir: str | Path,
    *,
    latencies_ms: Sequence[float] = DEFAULT_LATENCIES_MS,
    tool_ms: tuple[float, float] = DEFAULT_TOOL_MS,
    limit: int | None = None,
    concurrency: int = 16,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Run the lifecycle benchmark on a dataset folder; returns a plain, JSON-ready dict.

    ``limit`` takes the first N queries; ``progress(done, total)`` is called after each turn.
    """
    if not latencies_ms:
        raise ValueError("latencies_ms needs at least one latency")
    dataset = load_dataset(dataset_dir)
    if limit is not None:
        dataset = EvalDataset(dataset.root, dataset.snapshot, dataset.queries[:limit])
    oracle = Path(dataset_dir).resolve() / "queries.jsonl"
    servers: list[ScriptedServerProcess] = []
    try:
        for ms in latencies_ms:
            servers.append(ScriptedServerProcess(oracle=str(oracle), latency_ms=float(ms)))
        result = asyncio.run(
            _run(dataset, servers, list(latencies_ms), tool_ms, concurrency, seed, progress)
        )
    finally:
        for server in servers:
            server.stop()
    result["dataset"] = Path(dataset_dir).name
    return result
