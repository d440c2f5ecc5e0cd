"""Store scaling: full scan, write-to-visible latency and memory per 1,000 docs.

Run: .venv/bin/python bench/store_scaling.py [--sizes 100,1000,10000] [--repeat N]
Prints a markdown table (median and p95 in ms) for the README.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from memory_store import MemoryStore, atomic_write, format_memory

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
    return format_memory(
        name=f"Memory {i} on {words[0]} and {words[1]}",
        description=f"How the user handles {words[0]} with {words[2]} (revision {revision})",
        type=_TYPES[i % 4],
        body=f"\n{body}",
        keywords=words[3:],
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
    """From atomic_write() returning to the new content being in store.snapshot()."""
    rng = random.Random(11)
    times = []
    with MemoryStore.open(root, watch=True, debounce_ms=debounce_ms) as store:
        label = store.roots[0][0]
        for n in range(repeat):
            target = rng.choice(paths)
            ref = f"{label}/{target.relative_to(root).as_posix()}"
            text = memory_text(n, rng, revision=n + 1)
            expected = hashlib.sha256(text.encode("utf-8")).hexdigest()
            start = time.perf_counter()
            atomic_write(target, text)
            snapshot = store.snapshot()
            while ref not in snapshot.docs or snapshot.docs[ref].content_hash != expected:
                snapshot = store.wait_for_version(snapshot.version + 1, timeout=10)
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


def rss_per_1000(root: Path, count: int) -> float:
    """Resident-set growth of a fresh process opening the store, in MiB per 1,000 docs."""
    code = (
        "import gc, sys\n"
        "from memory_store import MemoryStore\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * 4096\n"
        "gc.collect(); before = rss()\n"
        "store = MemoryStore.open(sys.argv[1], watch=False)\n"
        "gc.collect(); print(rss() - before, len(store.snapshot().docs))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True)
    grown, docs = (int(x) for x in out.stdout.split())
    assert docs == count
    return grown / (1024 * 1024) / (count / 1000)


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
            undebounced = bench_write_to_visible(root, paths, args.repeat, 0.0)
            rows.append((size, scan, visible, undebounced, memory_per_1000(root, size), rss_per_1000(root, size)))
            print(f"# {size} files done", file=sys.stderr)
    print(f"debounce window {args.debounce_ms:g} ms; {args.repeat} runs; {os.cpu_count()} cores; "
          f"python {sys.version.split()[0]}")
    print()
    print("| files | full scan median | p95 | write-to-visible median | p95 "
          "| same, debounce 0 median | p95 | heap MiB / 1,000 docs | RSS MiB / 1,000 docs |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for size, scan, visible, undebounced, heap, rss in rows:
        cells = [f"{size:,}"]
        for series in (scan, visible, undebounced):
            cells += [f"{statistics.median(series):.1f} ms", f"{percentile(series, 95):.1f} ms"]
        cells += [f"{heap:.2f}", f"{rss:.2f}"]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
