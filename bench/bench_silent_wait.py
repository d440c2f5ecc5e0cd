"""The initial point's cost on silent prompts with a model configured: a baseline revision beside
this tree, in one run.

    .venv/bin/python bench/bench_silent_wait.py [--baseline 1609640] [--latencies 40,300,1500]
        [--turns 30] [--turn-ms 200] [--rounds 3]

A silent prompt is one the fast stage hands nothing over for ("thanks, that works now" on
examples/memories), so the initial point may wait up to INITIAL_WAIT_MS (100 ms) for the model.
Each side runs in a process of its own (the baseline's ``recall_kit`` and ``memory_store``
exported from git, first on PYTHONPATH): one Recaller over examples/memories, one ModelSelector
per latency against the scripted model (a child process of this one, shared by both sides, which
answers with one memory after the latency), warmed with one request; then ``--turns`` turns per
latency, each a new session as the hook's are: begin, consume("initial") timed, the agent's turn
(``--turn-ms`` of asyncio time, as the agent answers), finish. The sides alternate, one process a
round each, the first side swapped every round. Prints, per latency, the median, mean and p90 of
the initial wait per side, the ratio of the medians and of the means, and how many turns got the
model's answer at the initial point; then the load average, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from baseline_tree import export_baseline  # noqa: E402

SILENT_PROMPT = "thanks, that works now"
ANSWER = "memories/projects/ledgerline/deploy.md"  # what the scripted model selects

_SIDE = r"""
import asyncio, json, sys, time
from memory_store import MemoryStore
from recall_kit import ModelSelector, Recaller

root, prompt, turns, turn_ms, urls = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])

async def main():
    out = {}
    with MemoryStore.open(root, watch=False) as store:
        for latency, url in urls.items():
            selector = ModelSelector(url, "scripted")
            with Recaller(store.snapshot(), selector) as recaller:
                await selector.select("warm up", list(recaller.snapshot_docs())[:1])  # the HTTP client exists
                waits, answered = [], 0
                for _ in range(turns):
                    session = recaller.session()
                    session.begin(prompt)
                    started = time.perf_counter()
                    delivery = await session.consume("initial")
                    waits.append((time.perf_counter() - started) * 1000)
                    answered += delivery is not None and delivery.phase == "refined"
                    await asyncio.sleep(turn_ms / 1000)  # the agent's turn
                    session.finish()
                    await session.close()
                await selector.aclose()
            out[latency] = {"waits": waits, "answered": answered}
    print(json.dumps(out))

asyncio.run(main())
"""


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_side(code: Path | None, urls: dict[str, str], turns: int, turn_ms: float) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else dict(os.environ)
    if code is None:
        env.pop("PYTHONPATH", None)
    done = subprocess.run(
        [sys.executable, "-c", _SIDE, str(REPO / "examples" / "memories"), SILENT_PROMPT, str(turns), str(turn_ms),
         json.dumps(urls)],
        env=env, capture_output=True, text=True, check=False, cwd="/",
    )
    if done.returncode != 0:
        raise SystemExit(f"bench: a side failed: {done.stderr.strip()[-800:]}")
    return dict(json.loads(done.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="1609640", help="the git revision measured beside this tree")
    parser.add_argument("--latencies", default="40,300,1500", help="the scripted model's answer times, ms")
    parser.add_argument("--turns", type=int, default=30, help="turns per latency, per side, per round")
    parser.add_argument("--turn-ms", type=float, default=200.0, help="the agent's turn after the initial point")
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    from recall_kit_bench import ScriptedServerProcess

    latencies = [f"{float(x):g}" for x in opts.latencies.split(",")]
    started = time.monotonic()
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="recall-kit-silent-wait-") as tmp:
        sides: dict[str, Path | None] = {
            f"baseline {opts.baseline}": export_baseline(opts.baseline, Path(tmp) / "baseline"), "this tree": None,
        }
        servers = [ScriptedServerProcess(selections=[ANSWER], latency_ms=float(ms)) for ms in latencies]
        try:
            urls = {ms: server.base_url for ms, server in zip(latencies, servers)}
            got: dict[str, dict[str, dict[str, list]]] = {
                side: {ms: {"waits": [], "answered": []} for ms in latencies} for side in sides
            }
            for round_ in range(opts.rounds):
                order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
                for side in order:
                    for ms, result in run_side(sides[side], urls, opts.turns, opts.turn_ms).items():
                        got[side][ms]["waits"] += result["waits"]
                        got[side][ms]["answered"].append(result["answered"])
        finally:
            for server in servers:
                server.stop()
    before, after = list(sides)
    report: dict[str, object] = {"load_before": load_before, "turns_per_side": opts.turns * opts.rounds,
                                 "turn_ms": opts.turn_ms, "by_latency": {}}
    for ms in latencies:
        row: dict[str, object] = {}
        for side in sides:
            waits = got[side][ms]["waits"]
            row[side] = {
                "median_ms": round(statistics.median(waits), 2), "mean_ms": round(statistics.mean(waits), 2),
                "p90_ms": round(pct(waits, 0.9), 2),
                "answered_at_initial": f"{sum(got[side][ms]['answered'])}/{len(waits)}",
            }
        b, a = row[before], row[after]
        row["ratio_of_medians"] = round(a["median_ms"] / b["median_ms"], 4) if b["median_ms"] else None  # type: ignore[index]
        row["ratio_of_means"] = round(a["mean_ms"] / b["mean_ms"], 4) if b["mean_ms"] else None  # type: ignore[index]
        report["by_latency"][ms] = row  # type: ignore[index]
    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    report["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
