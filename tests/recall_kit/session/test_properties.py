"""Property test: random begin / consume / finish / cancel / abort / reset sequences with random model
timings (scripted server latencies, including never answering) keep the lifecycle invariants."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_store import MemoryStore
from recall_kit._session import Delivery
from recall_kit.testing import Reply
from recall_kit.testing import ScriptedChatServer
from session_support import MEMORIES, SCOPE, EventLog, make_recaller, run
from recall_kit_bench import write_memory

REFS = [f"{SCOPE}/{p}" for p in MEMORIES]
QUERIES = [
    "postgres pgbouncer settings for atlas",
    "deploy atlas to production kubernetes",
    "postgres migrations and deploy to kubernetes",
    "what should I keep in mind this afternoon before I leave",
    "who is on call for billing",
]
HANG = -1.0

model_reply = st.tuples(
    st.sampled_from([0.0, 5.0, 25.0, 60.0, HANG]),
    st.lists(st.sampled_from(REFS), max_size=3, unique=True),
)
# One user turn: begin, maybe an abort timer, maybe the initial point, some tool-result points
# after sleeps, then how the turn ends ("none": the next begin replaces the handle).
turn = st.fixed_dictionaries({
    "query": st.sampled_from(QUERIES),
    "model": model_reply,
    "abort_after_ms": st.one_of(st.none(), st.sampled_from([0.0, 10.0, 40.0])),
    "initial": st.booleans(),
    "tool_results": st.lists(st.sampled_from([0.0, 10.0, 30.0, 70.0]), max_size=3),
    "end": st.sampled_from(["finish", "none", "abort", "reset", "cancel_abort", "cancel_shutdown"]),
})


def steps_of(turns: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    steps: list[tuple[Any, ...]] = []
    for t in turns:
        steps.append(("begin", t["query"], t["model"], t["abort_after_ms"]))
        if t["initial"]:
            steps.append(("consume", "initial"))
        for pause in t["tool_results"]:
            steps += [("sleep", pause), ("consume", "tool_result")]
        end = t["end"]
        if end.startswith("cancel_"):
            steps.append(("cancel", end.removeprefix("cancel_")))
        elif end != "none":
            steps.append((end,))
    return steps


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("props") / SCOPE
    for path, (name, description, body) in MEMORIES.items():
        write_memory(root, path, name, description, body)
    with MemoryStore.open(root, watch=False) as store:
        yield store


async def play(store: MemoryStore, server: ScriptedChatServer, log: EventLog, steps: list[Any]) -> None:
    session = make_recaller(store, log, server, initial_wait_ms=30).session()
    surfaced: set[str] = set()  # refs delivered since the last reset, as the test saw them
    current: int | None = None  # handle id that may still deliver
    begun = 0
    abort: asyncio.Event | None = None
    for step in steps:
        kind = step[0]
        if kind == "begin":
            _, query, (latency, refs), abort_after_ms = step
            reply = Reply.hang() if latency == HANG else Reply.select(*refs).after(latency)
            server.script(reply)
            abort = asyncio.Event()
            session.begin(query, abort=abort)
            begun += 1
            current = begun
            if abort_after_ms is not None:
                asyncio.get_running_loop().call_later(abort_after_ms / 1000, abort.set)
        elif kind == "consume":
            delivery = await session.consume(step[1])
            if delivery is not None:
                check_delivery(delivery, step[1], log, current, surfaced)
                surfaced.update(delivery.refs)
            if not session.pending or (abort is not None and abort.is_set()):
                current = None
        elif kind == "sleep":
            await asyncio.sleep(step[1] / 1000)
        elif kind == "abort":
            if abort is not None:
                abort.set()
                await asyncio.sleep(0)  # the watcher runs
            current = None
        elif kind == "finish":
            session.finish()
            current = None
        elif kind == "reset":
            session.reset()
            surfaced.clear()
            current = None
        else:
            session.cancel(step[1])
            current = None
        assert session.surfaced_paths == surfaced
    await session.close()
    await session.stages.selector.aclose()
    check_log(log, begun)


def check_delivery(delivery: Delivery, point: str, log: EventLog, current: int | None, surfaced: set[str]) -> None:
    assert current is not None, "delivered from a cancelled, finished or replaced handle"
    event = log.deliveries[-1]
    assert event.handle_id == current and event.point == point and event.docs == delivery.refs
    assert delivery.point == point
    assert delivery.placement == ("prepend" if point == "initial" else "append")
    assert delivery.docs and len(set(delivery.refs)) == len(delivery.refs)
    assert not surfaced & set(delivery.refs), "a document was delivered twice in the session"
    if point == "tool_result":
        assert delivery.phase == "refined"


def check_log(log: EventLog, begun: int) -> None:
    for handle_id in range(1, begun + 1):
        events = [e for e in log.deliveries if e.handle_id == handle_id]
        terminal = [e for e in events if e.terminal]
        assert len(terminal) == 1, f"handle {handle_id}: {len(terminal)} terminal events"
        assert events[-1] is terminal[0], "an event after the terminal one"
        assert sum(e.phase == "fast" and e.point != "discarded" for e in events) <= 1
        assert [r.handle_id for r in log.recalls].count(handle_id) == 1


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(turn, min_size=1, max_size=4))
def test_random_lifecycles_keep_the_invariants(shared_store: MemoryStore, turns: list[Any]) -> None:
    log = EventLog()
    with ScriptedChatServer(default=Reply.empty()) as server:
        run(play(shared_store, server, log, steps_of(turns)))  # run() also asserts no task is left  # run() also asserts no task is left
