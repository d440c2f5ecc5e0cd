"""What one learning update costs at 10,000 memories, every one of which has learned something.

    .venv/bin/python bench/bench_learned.py [--memories 10000] [--learned-share 1.0] [--runs 200]

Times ``MemoryRoot.record_learning`` (the locked read-merge-write of learned.jsonl, pruning against the
live paths) and ``MemoryStore.record_learning`` on a store that is not watching (the same, plus
re-publishing the one changed doc). Prints median and p90 in ms, and the file's bytes per memory.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from memory_store import LearningUpdate, MemoryRoot, MemoryStore


def make_root(folder: Path, count: int, share: float) -> list[str]:
    """``count`` small memories in 100 folders, ``share`` of them with 8 learned keys and 2 suppressors."""
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
    return paths


def timed(action, runs: int) -> list[float]:  # type: ignore[no-untyped-def]
    samples = []
    for i in range(runs):
        start = time.perf_counter()
        action(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def report(name: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    p90 = ordered[int(len(ordered) * 0.9)]
    print(f"{name}: median {statistics.median(samples):.2f} ms, p90 {p90:.2f} ms ({len(samples)} runs)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--learned-share", type=float, default=1.0, help="share of the memories that learned something")
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "mem"
        paths = make_root(folder, args.memories, args.learned_share)
        learned_file = folder / ".recall-kit" / "learned.jsonl"
        size = learned_file.stat().st_size if learned_file.exists() else 0
        entries = round(args.memories * args.learned_share)
        print(f"{args.memories} memories, {entries} with learned keys: learned.jsonl {size} bytes "
              f"({size / max(entries, 1):.0f} per entry)")
        files = MemoryRoot(folder)
        files.record_learning([], paths)  # the first call parses the file; later ones reuse the parse
        report("MemoryRoot.record_learning", timed(
            lambda i: files.record_learning([LearningUpdate(paths[i], keys=("ship", f"new{i}"))], paths), args.runs
        ))
        with MemoryStore.open(folder, watch=False) as store:
            store.record_learning("mem", [])
            report("MemoryStore.record_learning (not watching)", timed(
                lambda i: store.record_learning("mem", [LearningUpdate(paths[-i - 1], keys=("deploy",))]), args.runs
            ))


if __name__ == "__main__":
    main()
