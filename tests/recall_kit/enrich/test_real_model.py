"""`recall-kit enrich` end to end against llama.cpp's server with SmolLM2-135M-Instruct.

Needs the ``real-model`` extra; without it this fails (it does not skip) and says what to install.
A 135M model writes poor terms: this checks the protocol and that whatever is written is valid; the
terms themselves are printed for a reader, not judged.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from enrich_support import file_bytes, write_memories

from memory_store import (
    MAX_KEYWORD_CHARS,
    MAX_KEYWORDS,
    MAX_SCENARIO_CHARS,
    MAX_SCENARIOS,
    MemoryStore,
    clean_terms,
    read_enrichment,
    sidecar_path,
)
from recall_kit.testing import LlamaServer

from cli_support import RECALL_KIT, clean_environ

pytestmark = pytest.mark.real_model

# Outcomes that mean the protocol worked and the model's text was judged (not a transport failure).
JUDGED_REASONS = ("answer is not JSON", "answer has no 'keywords' or 'usage_scenarios' key", "answer has no usable terms")


def test_real_model_enrich_end_to_end_writes_only_valid_entries(llama: LlamaServer, tmp_path: Path) -> None:
    root = write_memories(tmp_path / "mem")
    before = file_bytes(root)
    # generous bounds: two shared CPU cores, and a small model that often writes up to its token cap
    result = subprocess.run(
        [str(RECALL_KIT), "enrich", "--root", str(root), "--base-url", llama.base_url, "--model", llama.model,
         "--model-timeout", "300", "--json"],
        capture_output=True, text=True, timeout=1200, env=clean_environ(), cwd=tmp_path,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    print(json.dumps(report, indent=1, ensure_ascii=False))  # the terms, for a reader (pytest -s)
    assert len(report["enriched"]) + len(report["failed"]) == 3 and not report["interrupted"]
    assert all(f["reason"] in JUDGED_REASONS for f in report["failed"]), report["failed"]
    assert {e["response_mode"] for e in report["enriched"]} <= {"json_object"}  # llama.cpp refuses json_schema
    assert file_bytes(root) == before

    entries, problems = read_enrichment(sidecar_path(root))
    assert problems == []
    assert {f"mem/{path}" for path in entries} == {e["ref"] for e in report["enriched"]}
    for path, entry in entries.items():
        assert entry.sha256 == hashlib.sha256((root / path).read_bytes()).hexdigest()
        assert clean_terms(list(entry.keywords), MAX_KEYWORDS, MAX_KEYWORD_CHARS) == entry.keywords
        assert clean_terms(list(entry.usage_scenarios), MAX_SCENARIOS, MAX_SCENARIO_CHARS) == entry.usage_scenarios
        assert entry.keywords or entry.usage_scenarios
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    assert snapshot.errors == ()
    assert {d.path for d in snapshot.docs.values() if d.enrichment is not None} == set(entries)
