"""What one learning update costs at 10,000 memories, every one of which has learned something.

    .venv/bin/python bench/bench_learned.py [--memories 10000] [--learned-share 1.0] [--runs 300]
                                            [--baseline REV] [--rounds 3]

Times ``MemoryStore.record_learning`` on a store that is not watching (the locked merge, the append
or compaction of learned.jsonl, pruning against the live paths, and re-publishing the changed doc:
what the Learner waits for), and ``MemoryRoot.record_learning`` given the live paths as one set.
Prints median, p90 and p99 in ms, what one compaction costs, and the file's bytes per memory.

With ``--baseline REV``, the same measurements run on that revision's engine (exported with git) and
on this tree, alternating ``--rounds`` times in one run, each in a fresh process.
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
from typing import Any

from baseline_tree import export_baseline

HERE = Path(__file__).resolve().parent


def make_root(folder: Path, count: int, share: float) -> list[str]:
    """``count`` small memories in 100 folders, ``share`` of them with 8 learned keys and 2 suppressors."""
    from memory_store import LearningUpdate, MemoryRoot

    paths = [f"f{i % 100}/m{i}.md" for i in range(count)]
    for i, rel in enumerate(paths):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"---\nname: memory {i}\ndescription: about topic {i}\ntype: project\n---\nBody {i}.\n")
    updates = [
        LearningUpdate(rel, keys=tuple(f"term{i}x{k}" for k in range(8)), suppress=frozenset({f"no{i}", "general"}))
        for i, rel in enumerate(paths[: round(count * share)])
    ]
    files = MemoryRoot(folder)
    files.record_learning(updates)
    files.record_learning([LearningUpdate(u.path, suppress=frozenset({f"again{u.path}", "x"})) for u in updates])
    files.record_learning([LearningUpdate("zz.md", keys=("gone",))])
    files.clear_learning(["zz.md"])  # a compaction: one line a memory
    return paths


def timed(action, runs: int) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        action(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": statistics.median(samples),
        "p90": ordered[int(len(ordered) * 0.9)],
        "p99": ordered[min(int(len(ordered) * 0.99), len(ordered) - 1)],
    }


def measure(memories: int, share: float, runs: int) -> dict[str, Any]:
    """One process's figures for whichever engine is first on sys.path."""
    from memory_store import LEARNED_PATH, LearningUpdate, MemoryRoot, MemoryStore

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "mem"
        paths = make_root(folder, memories, share)
        learned_file = folder / LEARNED_PATH
        size = learned_file.stat().st_size
        entries = round(memories * share)
        figures: dict[str, Any] = {"bytes_per_entry": size / max(entries, 1), "entries": entries}
        with MemoryStore.open(folder, watch=False) as store:
            store.record_learning("mem", [])
            figures["store"] = summary(timed(
                lambda i: store.record_learning("mem", [LearningUpdate(paths[-i - 1], keys=("deploy", f"n{i}"))]), runs
            ))
            live = frozenset(paths)
            files = MemoryRoot(folder)
            files.record_learning([], live)  # the first call parses the file; later ones reuse the parse
            figures["root"] = summary(timed(
                lambda i: files.record_learning([LearningUpdate(paths[i], keys=("ship", f"new{i}"))], live), runs
            ))
            # A compaction: what forgetting one memory costs, and what an append costs once the log is long.
            figures["compaction"] = summary(timed(lambda i: files.clear_learning([paths[i]]), 20))
    return figures


def run_tree(pythonpath: Path | None, args: argparse.Namespace) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath) if pythonpath else "", str(HERE)) if p)
    out = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", "--memories", str(args.memories),
         "--learned-share", str(args.learned_share), "--runs", str(args.runs)],
        env=env, check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--learned-share", type=float, default=1.0, help="share of the memories that learned something")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--baseline", help="a git revision to measure beside this tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.memories, args.learned_share, args.runs)))
        return
    trees: dict[str, Path | None] = {"this tree": None}
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline:
            trees = {args.baseline: export_baseline(args.baseline, Path(tmp) / "baseline"), "this tree": None}
        results: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for _ in range(args.rounds if args.baseline else 1):
            for name, where in trees.items():
                results[name].append(run_tree(where, args))
    print(f"{args.memories} memories, {round(args.memories * args.learned_share)} with learned keys, "
          f"{args.runs} updates a round; medians over rounds (ms)")
    for name, rounds in results.items():
        print(f"\n{name}: learned.jsonl {statistics.median(r['bytes_per_entry'] for r in rounds):.0f} bytes per entry")
        for what, label in [("store", "MemoryStore.record_learning (not watching)"),
                            ("root", "MemoryRoot.record_learning (live paths as one set)"),
                            ("compaction", "forget one memory (a compaction)")]:
            cells = ", ".join(
                f"{stat} {statistics.median(r[what][stat] for r in rounds):.2f}"
                f" ({min(r[what][stat] for r in rounds):.2f}..{max(r[what][stat] for r in rounds):.2f})"
                for stat in ("median", "p90", "p99")
            )
            print(f"  {label}: {cells}")


if __name__ == "__main__":
    main()
