"""The initial wait against prompt size: a prompt of any size must not stretch the 100 ms ceiling.

Each turn: begin(prompt), consume("initial"), finish, on a generated store, with a model that never
answers in time (so the wait is the ceiling whenever the fast stage has nothing). Prompt sizes go
from 1 KB to 10 MB; the prompt is store words, so the heuristic has real work to do. Reported:
the wait's p50, p99 and max per size, measured in one run.

    python bench/huge_prompt.py [--docs 10000] [--turns 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time

from recall_kit import ModelSelector, Recaller
from recall_kit_bench import ScriptedServerProcess, generated_snapshot, generated_vocabulary, percentiles

SIZES = (1_000, 100_000, 1_000_000, 10_000_000)


def prompt_of(size: int, words: list[str], rng: random.Random) -> str:
    chunk = " ".join(rng.choice(words) for _ in range(2_000))
    return (chunk * (size // len(chunk) + 1))[:size]


async def waits(recaller: Recaller, prompts: list[str]) -> list[float]:
    result = []
    async with recaller.session() as session:
        for prompt in prompts:
            session.begin(prompt)
            started = time.perf_counter()
            await session.consume("initial")
            result.append((time.perf_counter() - started) * 1000)
            session.finish()
            session.reset()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    vocabulary = generated_vocabulary()
    snapshot = generated_snapshot(args.docs, vocabulary)
    rng = random.Random(5)
    rows = {}
    with ScriptedServerProcess(selections=[], latency_ms=600_000.0) as server:
        selector = ModelSelector(server.base_url, "never-in-time", timeout=5.0)
        with Recaller(snapshot, selector) as recaller:
            async def run_all() -> None:
                for size in SIZES:
                    prompts = [prompt_of(size, vocabulary[:5000], rng) for _ in range(args.turns)]
                    rows[size] = percentiles(await waits(recaller, prompts)).as_dict()
                await selector.aclose()

            asyncio.run(run_all())
    if args.json:
        json.dump({"docs": args.docs, "turns": args.turns, "initial_wait_ms": rows}, sys.stdout, indent=2)
        print()
    else:
        print(f"initial wait (ms) on {args.docs} memories, {args.turns} turns a size, model never in time")
        for size, stats in rows.items():
            print(f"  prompt {size:>10,} chars: p50 {stats['p50']:.1f}  p99 {stats['p99']:.1f}  max {stats['max']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
