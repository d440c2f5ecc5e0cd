"""What learning adds to a query: the fast stage over a store that learned, beside the same store
that did not, side by side in one run (alternating queries, so the machine's noise hits both alike).

    .venv/bin/python bench/bench_learning_cost.py [--docs 1000,10000] [--queries 2000] [--learned-share 0.3]

Each memory of the learned copy's share gets 24 learned words and 4 suppressors (prompts drawn from
the store's own vocabulary, as a user's would be); the other copy has no learned file. Prints p50 and
p99 of ``FastHeuristic.recall`` per copy, in ms, as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from generated_store import vocabulary, write_store  # noqa: E402

from memory_store import LearningUpdate, MemoryStore  # noqa: E402
from recall_kit import FastHeuristic  # noqa: E402


def _prompt(rng: random.Random, words: list[str]) -> list[str]:
    return rng.sample(words[:3000], rng.randint(4, 9))


def measure(count: int, queries: int, share: float, seed: int = 7) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix="recall-kit-learning-cost-") as tmp:
        plain = Path(tmp) / "plain"
        paths = write_store(plain, count, seed)
        learned = Path(tmp) / "learned"
        shutil.copytree(plain, learned)
        rng = random.Random(seed)
        words = vocabulary(seed)
        with MemoryStore.open(learned, watch=False) as store:
            label = store.snapshot().docs[next(iter(store.snapshot().docs))].scope
            chosen = rng.sample([p.relative_to(plain).as_posix() for p in paths], int(count * share))
            for start in range(0, len(chosen), 500):
                updates = []
                for rel in chosen[start : start + 500]:
                    updates.append(LearningUpdate(rel, keys=tuple(_prompt(rng, words) * 3)[:16]))
                    updates.append(LearningUpdate(rel, keys=tuple(_prompt(rng, words))))
                    for _ in range(4):
                        updates.append(LearningUpdate(rel, suppress=frozenset(_prompt(rng, words))))
                store.record_learning(label, updates)
        prompts = [" ".join(_prompt(rng, words)) for _ in range(queries)]
        times: dict[str, list[float]] = {"learning off": [], "learned": []}
        with MemoryStore.open(plain, watch=False) as a, MemoryStore.open(learned, watch=False) as b:
            heuristics = {"learning off": FastHeuristic(a), "learned": FastHeuristic(b)}
            for name, heuristic in heuristics.items():
                for prompt in prompts[:50]:
                    heuristic.recall(prompt)  # warm caches
            for i, prompt in enumerate(prompts):
                order = list(heuristics.items()) if i % 2 else list(heuristics.items())[::-1]
                for name, heuristic in order:
                    started = time.perf_counter()
                    heuristic.recall(prompt)
                    times[name].append((time.perf_counter() - started) * 1000)
        return {
            name: {"p50": statistics.median(t), "p99": sorted(t)[int(0.99 * len(t)) - 1]} for name, t in times.items()
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", default="1000,10000")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--learned-share", type=float, default=0.3)
    args = parser.parse_args()
    result = {count: measure(int(count), args.queries, args.learned_share) for count in args.docs.split(",")}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
