"""What telling a repeated question apart costs the initial point of a silent prompt: a baseline
revision beside this tree, in one run.

    .venv/bin/python bench/bench_repeat_cost.py [--baseline 1609640] [--prompts 300] [--rounds 2]

In-process, fast stage only, over examples/memories: per prompt a new session, either fresh or
after one delivery ("how do I deploy ledgerline to production?"), then "thanks, that works now"
(the fast stage hands nothing over), its consume("initial") timed. After a delivery the session
runs the fast stage once more to tell "already delivered in this session" from "nothing passed
the gate". Each side in a process of its own (the baseline's ``recall_kit`` and ``memory_store``
from git, first on PYTHONPATH), alternating, the first side swapped every round. Prints medians
in ms per side and case, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
from baseline_tree import export_baseline  # noqa: E402

_SIDE = r"""
import asyncio, json, sys, time
from memory_store import MemoryStore
from recall_kit import Recaller

root, prompts = sys.argv[1], int(sys.argv[2])

async def main():
    out = {}
    with MemoryStore.open(root, watch=False) as store, Recaller(store.snapshot()) as recaller:
        for case, hit in (("no delivery yet", False), ("after a delivery", True)):
            times = []
            for _ in range(prompts):
                session = recaller.session()
                if hit:
                    session.begin("how do I deploy ledgerline to production?")
                    assert await session.consume("initial") is not None
                session.begin("thanks, that works now")
                started = time.perf_counter()
                assert await session.consume("initial") is None
                times.append((time.perf_counter() - started) * 1000)
                await session.close()
            out[case] = times
    print(json.dumps(out))

asyncio.run(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="1609640", help="the git revision measured beside this tree")
    parser.add_argument("--prompts", type=int, default=300, help="silent prompts per case, per side, per round")
    parser.add_argument("--rounds", type=int, default=2)
    opts = parser.parse_args()
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="recall-kit-repeat-cost-") as tmp:
        sides: dict[str, Path | None] = {
            f"baseline {opts.baseline}": export_baseline(opts.baseline, Path(tmp) / "baseline"), "this tree": None,
        }
        got: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
        for round_ in range(opts.rounds):
            for side in list(sides) if round_ % 2 == 0 else list(reversed(sides)):
                env = dict(os.environ)
                env.pop("PYTHONPATH", None)
                if sides[side] is not None:
                    env["PYTHONPATH"] = str(sides[side])
                done = subprocess.run(
                    [sys.executable, "-c", _SIDE, str(REPO / "examples" / "memories"), str(opts.prompts)],
                    env=env, capture_output=True, text=True, cwd="/", check=False,
                )
                if done.returncode != 0:
                    raise SystemExit(f"bench: a side failed: {done.stderr.strip()[-800:]}")
                for case, times in json.loads(done.stdout).items():
                    got[side].setdefault(case, []).extend(times)
    report = {side: {case: round(statistics.median(times), 3) for case, times in cases.items()}
              for side, cases in got.items()}
    print(json.dumps({"load_before": load_before, "load_after": [round(x, 2) for x in os.getloadavg()],
                      "prompts_per_case": opts.prompts * opts.rounds, "median_ms": report}, indent=2))


if __name__ == "__main__":
    main()
