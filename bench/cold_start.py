"""Cold `recall-kit query` wall time: a generated 10,000-memory store beside examples/memories.

    .venv/bin/python bench/cold_start.py [--count 10000] [--runs 9]

Each run is a new `recall-kit query --fast-only` process (the installed console script), the two
stores alternating, both through a warm index cache in a temp folder (one untimed run each fills
it), and once more with --no-cache for the large store. Prints wall medians and the ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples" / "memories"
RECALL_KIT = Path(sys.executable).with_name("recall-kit")
QUERY = "how do we deploy the payment service to production"


def run(root: Path, env: dict[str, str], *extra: str) -> float:
    started = time.perf_counter()
    subprocess.run(
        [str(RECALL_KIT), "query", QUERY, "--root", str(root), "--fast-only", *extra],
        env=env, check=True, stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--no-cache-runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from generated_store import write_store

    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        big = Path(tmp) / "store"
        write_store(big, args.count)
        env = {**os.environ, "RECALL_KIT_CACHE_DIR": str(Path(tmp) / "cache")}
        first = {"small": run(EXAMPLES, env), "big": run(big, env)}  # build and write the caches
        times: dict[str, list[float]] = {"small": [], "big": []}
        for i in range(args.runs):
            for name in (("small", "big") if i % 2 == 0 else ("big", "small")):
                times[name].append(run(EXAMPLES if name == "small" else big, env))
        no_cache = [run(big, env, "--no-cache") for _ in range(args.no_cache_runs)]
    small, large = statistics.median(times["small"]), statistics.median(times["big"])
    print(f"cold `recall-kit query --fast-only`, {args.runs} alternating runs each, wall seconds")
    print("| store | first run (cache written) | median, cache warm | min | max |")
    print("|---|---|---|---|---|")
    print(f"| examples/memories (27) | {first['small']:.3f} | {small:.3f} | {min(times['small']):.3f} | {max(times['small']):.3f} |")
    print(f"| generated ({args.count}) | {first['big']:.3f} | {large:.3f} | {min(times['big']):.3f} | {max(times['big']):.3f} |")
    print(f"| generated ({args.count}), --no-cache | - | {statistics.median(no_cache):.3f} | {min(no_cache):.3f} | {max(no_cache):.3f} |")
    print(f"ratio large / small (medians): {large / small:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
