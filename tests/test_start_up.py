"""What each entry point imports, in a fresh interpreter: the errors and the settings load no HTTP
client and no numpy, a public name loads only the module that defines it, `recall-kit --help` no
command, and a query answered from the index cache none of the heavy dependencies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "memories"
HEAVY = ("numpy", "httpx", "yaml", "watchdog", "rapidfuzz", "mcp", "recall_kit_bench", "rich")
PROMPT = "how do I deploy ledgerline to production?"


def loaded_after(code: str, *watched: str, env: dict[str, str] | None = None) -> list[str]:
    """Which of ``watched`` (modules, or packages: any module under one counts) a fresh interpreter has loaded after ``code``."""
    probe = (
        f"{code}\nimport sys\n"
        f"print('LOADED', __import__('json').dumps(sorted({{w for w in {list(watched)!r} for m in sys.modules "
        f"if m == w or m.startswith(w + '.')}})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED "))
    return json.loads(line.removeprefix("LOADED "))


@pytest.mark.parametrize("code", [
    "from recall_kit import ConfigError, RecallKitError, UsageError",
    "from memory_store import RecallKitError, MemoryStoreError",
    "import recall_kit.settings",
    "from recall_kit.settings import load_settings; load_settings().required('roots', 'learn')",
])
def test_the_errors_and_the_settings_load_no_http_client_and_no_numpy(code: str) -> None:
    assert loaded_after(code, *HEAVY) == []


def test_the_errors_alone_load_no_engine_module() -> None:
    engine = ("recall_kit._open", "recall_kit._recaller", "recall_kit._session", "recall_kit._heuristic", "memory_store._store")
    assert loaded_after("from recall_kit import ConfigError, RecallKitError, UsageError", *engine) == []


@pytest.mark.parametrize(("code", "loaded", "not_loaded"), [
    ("from recall_kit import Recaller", "recall_kit._recaller", ("recall_kit._open", "recall_kit._selector", "httpx")),
    ("from recall_kit import render_memories", "recall_kit._render", ("recall_kit._session", "memory_store._store")),
    ("from recall_kit import ModelSelector", "recall_kit._selector", ("recall_kit._open", "numpy")),
    ("from memory_store import parse_memory", "memory_store._parse", ("memory_store._store", "memory_store._watch", "yaml")),
])
def test_a_public_name_loads_only_the_module_that_defines_it(code: str, loaded: str, not_loaded: tuple[str, ...]) -> None:
    assert loaded_after(code, loaded, *not_loaded) == [loaded]


def _cli(args: list[str]) -> str:
    return f"from recall_kit_cli._app import run\nrun({args!r})"


def test_the_top_level_help_imports_no_command_and_no_engine() -> None:
    watched = ("recall_kit_cli.commands", "recall_kit_cli.integrations", "recall_kit", "memory_store._store", *HEAVY)
    assert loaded_after(_cli(["--help"]), *watched) == []


def test_a_query_answered_from_the_index_cache_loads_no_heavy_dependency(tmp_path: Path) -> None:
    root = shutil.copytree(EXAMPLES, tmp_path / "memories")
    env = {**os.environ, "RECALL_KIT_CACHE_DIR": str(tmp_path / "cache")}
    query = ["query", PROMPT, "--root", str(root), "--json"]
    first = subprocess.run([sys.executable, "-c", _cli(query)], capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr  # this one parses every file and writes the cache
    assert loaded_after(_cli(query), *HEAVY, env=env) == []
    again = subprocess.run([sys.executable, "-c", _cli(query)], capture_output=True, text=True, env=env, timeout=120)
    fresh = subprocess.run([sys.executable, "-c", _cli([*query, "--no-cache"])], capture_output=True, text=True, env=env, timeout=120)
    answers = [json.loads(done.stdout) for done in (first, again, fresh)]
    assert answers[0]["docs"] and [a["docs"] for a in answers] == [answers[0]["docs"]] * 3  # same refs, same scores
    assert [a["fast"]["ranked"] for a in answers] == [answers[0]["fast"]["ranked"]] * 3
