"""Cold `recall-kit query` wall time: a generated 10,000-memory store beside examples/memories.

    .venv/bin/python bench/cold_start.py [--count 10000] [--runs 9] [--baseline REV]

Each run is a new `recall-kit query --fast-only` process (the installed console script), the two
stores alternating, both through a warm index cache in a temp folder (one untimed run each fills
it), and once more with --no-cache for the large store. Prints wall medians and the ratio.
With --baseline, the same runs also go through that revision's ``recall_kit`` and ``memory_store``
(exported from git, put first on PYTHONPATH), interleaved with this tree's, in the same run.
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
REPO = HERE.parent
EXAMPLES = REPO / "examples" / "memories"
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
    parser.add_argument("--baseline", help="a git revision to measure beside this tree")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from baseline_tree import export_baseline
    from generated_store import write_store

    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        big = Path(tmp) / "store"
        write_store(big, args.count)
        sides = {"this tree": {**os.environ, "RECALL_KIT_CACHE_DIR": str(Path(tmp) / "cache")}}
        if args.baseline:
            tree = export_baseline(args.baseline, Path(tmp) / "baseline")
            sides[f"baseline {args.baseline}"] = {
                **os.environ, "RECALL_KIT_CACHE_DIR": str(Path(tmp) / "cache-baseline"), "PYTHONPATH": str(tree)
            }
        stores = {"small": EXAMPLES, "big": big}
        first = {(side, name): run(root, env) for side, env in sides.items() for name, root in stores.items()}
        times: dict[tuple[str, str], list[float]] = {key: [] for key in first}
        for i in range(args.runs):
            keys = list(times) if i % 2 == 0 else list(reversed(times))
            for side, name in keys:
                times[side, name].append(run(stores[name], sides[side]))
        no_cache = {side: [run(big, env, "--no-cache") for _ in range(args.no_cache_runs)] for side, env in sides.items()}
    print(f"cold `recall-kit query --fast-only`, {args.runs} interleaved runs each, wall seconds")
    print("| side | store | first run (cache written) | median, cache warm | min | max |")
    print("|---|---|---|---|---|---|")
    for side in sides:
        for name, label in (("small", "examples/memories (27)"), ("big", f"generated ({args.count})")):
            values = times[side, name]
            print(f"| {side} | {label} | {first[side, name]:.3f} | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
        values = no_cache[side]
        print(f"| {side} | generated ({args.count}), --no-cache | - | {statistics.median(values):.3f} | {min(values):.3f} | {max(values):.3f} |")
    for side in sides:
        small, large = statistics.median(times[side, "small"]), statistics.median(times[side, "big"])
        print(f"{side}: ratio large / small (medians): {large / small:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
