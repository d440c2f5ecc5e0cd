"""FastHeuristic index build on a generated 2,000-memory store: a baseline revision beside this tree.

    .venv/bin/python bench/bench_index_build.py [--baseline REV] [--count 2000] [--rounds 5] [--builds 3]

The baseline's ``recall_kit`` and ``memory_store`` are exported from git into a temp folder; each
round starts ``builds`` worker processes per side (alternating which side goes first), and each
worker times one index build: a fresh process starts with a cold word cache, as a fresh
``recall-kit query`` process does. A worker uses only public names both trees have. Both sides also
rank the same generated queries: the script fails unless every score is identical.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_BASELINE = "e73b8f7"  # the tree before the word cache and the index-add changes


def worker(store: str) -> None:
    from memory_store import MemoryStore  # the same calls in both trees
    from recall_kit import FastHeuristic

    with MemoryStore.open(store, watch=False) as opened:
        snapshot = opened.snapshot()
    gc.collect()  # the store's garbage is not the build's
    started = time.perf_counter()
    heuristic = FastHeuristic(snapshot)
    elapsed = time.perf_counter() - started
    rng = random.Random(5)
    words = sorted({w for doc in list(snapshot.docs.values())[:200] for w in doc.body.split()})
    digest = hashlib.sha256()
    for _ in range(200):
        ranked, _, _ = heuristic.rank(" ".join(rng.sample(words, 4)))
        digest.update(repr([(s.doc.ref, s.score) for s in ranked]).encode())
    print(json.dumps({"time": elapsed, "scores_sha256": digest.hexdigest(), "docs": len(snapshot.docs)}))


def run_worker(tree: Path, store: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run(
        [sys.executable, __file__, "--worker", str(store)],
        env=env, cwd=tree, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--builds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return
    sys.path.insert(0, str(HERE))
    from baseline_tree import export_baseline
    from generated_store import write_store

    with tempfile.TemporaryDirectory(prefix="index-build-") as tmp:
        base = export_baseline(args.baseline, Path(tmp) / "baseline")
        store = Path(tmp) / "store"
        write_store(store, args.count)
        sides = {"baseline": base, "this tree": REPO}
        times: dict[str, list[float]] = {name: [] for name in sides}
        digests: dict[str, set[str]] = {name: set() for name in sides}
        for round_ in range(args.rounds):
            order = list(sides) if round_ % 2 == 0 else list(reversed(sides))
            for name in order:
                for _ in range(args.builds):  # one build per process: each from a cold word cache
                    result = run_worker(sides[name], store)
                    times[name].append(result["time"])
                    digests[name].add(result["scores_sha256"])
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(f"index build, {args.count} memories, {args.rounds} rounds x {args.builds} builds, cold word cache")
        print("| side | median s | min s | max s |")
        print("|---|---|---|---|")
        for name, values in times.items():
            label = f"{name} ({args.baseline})" if name == "baseline" else name
            print(f"| {label} | {medians[name]:.3f} | {min(values):.3f} | {max(values):.3f} |")
        print(f"speed-up (median): {medians['baseline'] / medians['this tree']:.2f}x")
        same = len(digests["baseline"] | digests["this tree"]) == 1
        print(f"scores identical on 200 queries: {same}")
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
