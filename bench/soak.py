"""Soak: 10,000 session turns in one process; nothing may be left behind and memory must not grow.

Real store (examples/memories), real heuristic, real selector over loopback HTTP to the scripted
chat server with a mixed latency profile, so many turns end with the model request still in flight
(finish, abort, new query, reset and close all cancel it). Turn shapes rotate: tool-free,
tool-using, aborted during the wait, replaced by the next query. Every 100 turns the session is
closed and a new one made; every 50 it is reset. A final phase runs turns through
SyncRecallSession (its own loop thread, started and stopped every 250 turns).

    .venv/bin/python bench/soak.py [--turns 10000] [--sync-turns 1000] [--json]

Reports pending tasks, threads, open file descriptors, RSS and tracemalloc before/after.
Targets: no task, thread or fd left; growth < 5 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

from memory_store import MemoryStore
from recall_kit import ModelSelector, Recaller, SyncRecallSession
from recall_kit_bench import ScriptedServerProcess

ROOT = Path(__file__).resolve().parents[1]
MEMORIES = ROOT / "examples" / "memories"
LATENCIES_MS = [0, 3, 15, 60, 250]
QUERIES = [
    "how do I run the ledgerline tests",
    "what are the commit message conventions",
    "which grafana dashboard shows latency",
    "deploy tidepool to production",
    "what editor and shell do I use",
    "python tooling preferences",
    "the weather in lisbon tomorrow",
    "explain monads to me like I am five",
]
WARM_UP_TURNS = 300
SESSION_TURNS = 100
RESET_EVERY = 50
SYNC_SESSION_TURNS = 250
# The soak hunts leaks, not latency: a short initial ceiling keeps 10,000 turns to a minute or two.
SOAK_INITIAL_WAIT_MS = 10


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def release_free_heap() -> None:
    """Ask glibc to return freed heap pages, so RSS shows live memory, not allocator slack."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure() -> dict[str, Any]:
    gc.collect()
    raw = rss_mb()
    release_free_heap()
    return {
        "threads": threading.active_count(),
        "fds": open_fds(),
        "rss_untrimmed_mb": round(raw, 2),
        "rss_mb": round(rss_mb(), 2),
        "traced_mb": round(tracemalloc.get_traced_memory()[0] / 2**20, 2) if tracemalloc.is_tracing() else None,
    }


async def turn(session: Any, n: int) -> int:
    """One turn of shape n % 4; returns the number of deliveries."""
    query = QUERIES[n % len(QUERIES)]
    shape = n % 4
    abort = asyncio.Event()
    session.begin(query, abort=abort)
    if shape == 2:
        asyncio.get_running_loop().call_later(0.002, abort.set)
    delivered = int(await session.consume("initial") is not None)
    if shape == 1:
        await asyncio.sleep(0.002)  # a tool call
        delivered += int(await session.consume("tool_result") is not None)
    if shape != 3:  # shape 3: the next begin() replaces the handle (new_query)
        session.finish()
    return delivered


async def async_turns(recaller: Recaller, start: int, count: int) -> int:
    delivered = 0
    session = recaller.session()
    for n in range(start, start + count):
        if n % SESSION_TURNS == 0:
            await session.close()
            session = recaller.session()
        elif n % RESET_EVERY == 0:
            session.reset()
        delivered += await turn(session, n)
    await session.close()
    return delivered


def sync_turns(store: MemoryStore, base_url: str, count: int) -> int:
    delivered = 0
    selector = ModelSelector(base_url, "scripted")
    recaller = Recaller(store, selector, initial_wait_ms=SOAK_INITIAL_WAIT_MS)
    session = SyncRecallSession(recaller)
    try:
        for n in range(count):
            if n and n % SYNC_SESSION_TURNS == 0:
                session.close()
                session = SyncRecallSession(recaller)
            session.begin(QUERIES[n % len(QUERIES)])
            delivered += int(session.consume("initial") is not None)
            session.finish()
    finally:
        session.close()  # also closes the selector's client, which belongs to this loop
        recaller.close()
    return delivered


async def async_phase(recaller: Recaller, turns: int) -> dict[str, Any]:
    await async_turns(recaller, 0, WARM_UP_TURNS)
    before = measure()
    started = time.perf_counter()
    delivered = await async_turns(recaller, WARM_UP_TURNS, turns)
    elapsed = time.perf_counter() - started
    assert recaller.selector is not None
    await recaller.selector.aclose()
    pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    return {"before": before, "elapsed_s": elapsed, "delivered": delivered, "pending_tasks": len(pending)}


def run_soak(turns: int = 10_000, sync_count: int = 1_000, trace: bool = True) -> dict[str, Any]:
    if trace:
        tracemalloc.start()
    # the server runs in a child process: its sockets, threads and memory are not ours
    with ScriptedServerProcess(selections=["memories/user/profile.md"], latency_ms=LATENCIES_MS) as server, \
            MemoryStore.open(("memories", MEMORIES), watch=False) as store:
        selector = ModelSelector(server.base_url, "scripted")
        recaller = Recaller(store, selector, initial_wait_ms=SOAK_INITIAL_WAIT_MS)
        phase = asyncio.run(async_phase(recaller, turns))
        recaller.close()
        after_async = measure()
        sync_delivered = sync_turns(store, server.base_url, sync_count)
        after = measure()
    before = phase["before"]
    growth = {
        "threads": after["threads"] - before["threads"],
        "fds": after["fds"] - before["fds"],
        "rss_mb": round(after["rss_mb"] - before["rss_mb"], 2),
        "rss_untrimmed_mb": round(after["rss_untrimmed_mb"] - before["rss_untrimmed_mb"], 2),
        "traced_mb": (round(after["traced_mb"] - before["traced_mb"], 2) if trace else None),
    }
    return {
        "turns": turns,
        "sync_turns": sync_count,
        "turns_per_s": round(turns / phase["elapsed_s"], 1),
        "delivered": phase["delivered"] + sync_delivered,
        "pending_tasks": phase["pending_tasks"],
        "before": before,
        "after_async": after_async,
        "after": after,
        "growth": growth,
        # tracemalloc's own tables live outside the traced heap: with it on, judge the traced heap
        "ok": phase["pending_tasks"] == 0 and growth["threads"] <= 0 and growth["fds"] <= 0
        and (growth["traced_mb"] < 5 if trace else growth["rss_mb"] < 5),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--sync-turns", type=int, default=1_000)
    parser.add_argument("--no-tracemalloc", action="store_true", help="faster; RSS only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run_soak(args.turns, args.sync_turns, trace=not args.no_tracemalloc)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        g = result["growth"]
        print(f"{result['turns']} async + {result['sync_turns']} sync turns, {result['turns_per_s']} turns/s, "
              f"{result['delivered']} deliveries")
        print(f"left behind: {result['pending_tasks']} tasks, {g['threads']} threads, {g['fds']} fds")
        print(f"growth: RSS {g['rss_mb']} MB after malloc_trim ({g['rss_untrimmed_mb']} MB before it), "
              f"tracemalloc {g['traced_mb']} MB")
        print(f"before {result['before']}\nafter  {result['after']}")
        print("OK" if result["ok"] else "FAILED")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
