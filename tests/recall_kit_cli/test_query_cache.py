"""`recall-kit query` through the per-user index cache, and --no-cache around it."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import EXAMPLES, clean_environ, run_recall_kit

DEPLOY = "how do we deploy ledgerline to production"


def test_query_writes_the_cache_then_answers_the_same_from_it_and_no_cache_bypasses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(cache))
    args = ("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only", "--json")

    bypassed = run_recall_kit(*args, "--no-cache", cwd=tmp_path, env=env)
    assert bypassed.returncode == 0, bypassed.stderr
    assert not cache.exists()

    cold = run_recall_kit(*args, cwd=tmp_path, env=env)
    assert cold.returncode == 0, cold.stderr
    (cache_file,) = cache.glob("index-*.bin")
    written = cache_file.stat().st_mtime_ns

    warm = run_recall_kit(*args, cwd=tmp_path, env=env)
    assert warm.returncode == 0, warm.stderr
    assert cache_file.stat().st_mtime_ns == written  # a full hit rewrites nothing

    def answer(out: str) -> dict:
        data = json.loads(out)
        return {key: data[key] for key in ("docs", "rendered", "fast", "store_size", "strategy")}

    assert answer(bypassed.stdout) == answer(cold.stdout) == answer(warm.stdout)
    assert answer(warm.stdout)["docs"]
