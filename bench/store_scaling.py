"""Store scaling: full scan, write-to-visible latency and memory per 1,000 docs.

Run: .venv/bin/python bench/store_scaling.py [--sizes 100,1000,10000] [--repeat N]
Prints a markdown table (median and p95 in ms) for the README.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from memory_store import MemoryStore, atomic_write

_TOPICS = [
    "postgres", "migrations", "pytest", "fixtures", "docker", "compose", "kubernetes", "helm",
    "typescript", "react", "vite", "rust", "cargo", "clippy", "latency", "caching", "redis",
    "oauth", "tokens", "logging", "tracing", "grafana", "alerts", "backups", "terraform",
    "python", "typing", "mypy", "ruff", "formatting", "reviews", "commits", "branches", "ci",
]
_TYPES = ["user", "feedback", "project", "reference"]


def memory_text(i: int, rng: random.Random, revision: int = 0) -> str:
    """A realistic small memory file (about 0.6-1.2 KB)."""
    words = rng.sample(_TOPICS, 6)
    body = "\n".join(
        f"- {rng.choice(words)} {rng.choice(_TOPICS)}: note {j} about {' '.join(rng.sample(_TOPICS, 5))}."
        for j in range(rng.randint(6, 14))
    )
    return (
        f"---\nname: Memory {i} on {words[0]} and {words[1]}\n"
        f"description: How the user handles {words[0]} with {words[2]} (revision {revision})\n"
        f"type: {_TYPES[i % 4]}\nkeywords: [{', '.join(words[3:])}]\n---\n\n{body}\n"
    )


def make_memory_files(root: Path, count: int, seed: int = 7) -> list[Path]:
    """``count`` memory files spread over folders of at most 50 files each."""
    rng = random.Random(seed)
    paths = []
    for i in range(count):
        path = root / f"area{i // 50:03d}" / f"memory-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(memory_text(i, rng), encoding="utf-8")
        paths.append(path)
    return paths


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1)))]


def bench_scan(root: Path, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with MemoryStore.open(root, watch=False) as store:
            store.snapshot()
        times.append((time.perf_counter() - start) * 1000)
    return times


def bench_write_to_visible(root: Path, paths: list[Path], repeat: int, debounce_ms: float) -> list[float]:
    rng = random.Random(11)
    times = []
    with MemoryStore.open(root, watch=True, debounce_ms=debounce_ms) as store:
        for n in range(repeat):
            target = rng.choice(paths)
            version = store.snapshot().version
            start = time.perf_counter()
            atomic_write(target, memory_text(n, rng, revision=n + 1))
            store.wait_for_version(version + 1, timeout=10)
            times.append((time.perf_counter() - start) * 1000)
    return times


def memory_per_1000(root: Path, count: int) -> float:
    """Python heap held by a snapshot, in MiB per 1,000 docs (tracemalloc, after a full scan)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = MemoryStore.open(root, watch=False)
    gc.collect()
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(store.snapshot().docs) == count
    store.close()
    return held / (1024 * 1024) / (count / 1000)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--debounce-ms", type=float, default=50.0)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="recall-kit-bench-") as tmp:
            root = Path(tmp) / "memories"
            paths = make_memory_files(root, size)
            scan_repeat = max(5, args.repeat if size <= 1000 else args.repeat // 3)
            scan = bench_scan(root, scan_repeat)
            visible = bench_write_to_visible(root, paths, args.repeat, args.debounce_ms)
            mem = memory_per_1000(root, size)
            rows.append((size, scan, visible, mem))
            print(f"# {size} files done", file=sys.stderr)
    print(f"debounce window: {args.debounce_ms:g} ms; machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print()
    print("| files | full scan median | full scan p95 | write-to-visible median | write-to-visible p95 | MiB per 1,000 docs |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, scan, visible, mem in rows:
        print(
            f"| {size:,} | {statistics.median(scan):.1f} ms | {percentile(scan, 95):.1f} ms "
            f"| {statistics.median(visible):.1f} ms | {percentile(visible, 95):.1f} ms | {mem:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
