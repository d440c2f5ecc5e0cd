"""What every real-model test checks against llama.cpp serving SmolLM2-135M, one function each.

Each asserts something only a live model gives (an answer it judged, a response_format the server
refused), so none passes against a dead server: tests/recall_kit/selector/test_llama_server_setup.py
kills a server and runs every check in CHECKS against it. A 135M model chooses poorly: these check
the protocol and the validity of what is kept, not quality.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Callable

from enrich_support import file_bytes, write_memories
from selector_helpers import make_doc, run_checked
from session_support import MEMORIES, EventLog

from cli_support import RECALL_KIT, clean_environ
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
from recall_kit import MAX_MODEL_DOCS, LearnEvent, ModelSelector, RecallEvent, Selection, SelectorConfig, open_recaller
from recall_kit._telemetry import Telemetry
from recall_kit.testing import LlamaServer
from recall_kit_bench import write_memory

DOCS = [
    make_doc("projects/atlas/db.md", "Atlas Postgres connection settings and how to run migrations",
             keywords=("postgres", "migrations")),
    make_doc("projects/atlas/deploy.md", "Deploying Atlas to Kubernetes with helm", keywords=("k8s", "helm")),
    make_doc("user/style.md", "The user prefers short answers with code first", type="user"),
    make_doc("feedback/tests.md", "Always run the full test suite before committing", type="feedback"),
    make_doc("reference/grafana.md", "Grafana dashboards for the API latency", type="reference"),
    make_doc("projects/blog/drafts.md", "Blog post drafts about Rust async"),
]
FALLBACK = DOCS[:1]
QUERIES = ["how do I run the postgres migrations for atlas?", "what is the weather like today?"]
# Outcomes that mean the model answered and its text was judged (never a transport failure).
SELECTION_JUDGED = ("answer is not JSON", "answer has no 'selected_memories' key", "'selected_memories' is not a list",
                    "no valid reference in the answer")
ENRICH_JUDGED = ("answer is not JSON", "answer has no 'keywords' or 'usage_scenarios' key", "answer has no usable terms")
# what a model call may take here: at a load of 10 on 2 cores one selection took over 120 s (.ci/run, docs/benchmarks.md)
PATIENT_S = 300
LEARN_PROMPTS = ["who holds the beeper for the payments folks", "what is the weather like on mars today?"]


def assert_valid(selection: Selection) -> None:
    """A selection the model made, or a fallback after judging what it answered."""
    refs = {d.ref for d in DOCS}
    if selection.strategy == "model":
        assert selection.fallback_reason is None
        assert len(selection.docs) <= MAX_MODEL_DOCS
        assert [d.ref for d in selection.docs] == list(selection.accepted)
        assert len(set(selection.accepted)) == len(selection.accepted) and set(selection.accepted) <= refs
    else:
        assert selection.docs == tuple(FALLBACK) and selection.strategy == "heuristic"
        assert selection.fallback_reason in SELECTION_JUDGED, selection.fallback_reason
    assert all(reason for _, reason in selection.rejected)


def check_selection_protocol(llama: LlamaServer, tmp_path: Path) -> None:
    """Two selections end to end; the server refuses json_schema, so both went as json_object."""
    remembered: list[str | None] = []

    async def main() -> list[Selection]:
        async with ModelSelector(llama.base_url, llama.model, timeout=PATIENT_S) as selector:
            selections = [await selector.select(q, DOCS, preferred=DOCS[:2], fallback=FALLBACK) for q in QUERIES]
            remembered.append(selector.response_mode)
            return selections

    for selection in run_checked(main):
        assert_valid(selection)
        assert selection.response_mode == "json_object"
    assert remembered == ["json_object"]  # the selector tries it first from now on


def check_deadline_cut(llama: LlamaServer, tmp_path: Path) -> None:
    """A request cut by its deadline leaves the server answering the next one."""
    async def main() -> tuple[Selection, Selection]:
        async with ModelSelector(llama.base_url, llama.model, timeout=0.02) as hurried:
            cut = await hurried.select(QUERIES[0], DOCS, fallback=FALLBACK)
        async with ModelSelector(llama.base_url, llama.model, timeout=PATIENT_S) as patient:
            return cut, await patient.select(QUERIES[1], DOCS, fallback=FALLBACK)

    cut, after = run_checked(main)
    assert cut.fallback_reason == "deadline of 0.02 s exceeded" and cut.docs == tuple(FALLBACK)
    assert_valid(after)


def check_enrich(llama: LlamaServer, tmp_path: Path) -> None:
    """`recall-kit enrich` writes only valid entries, each from an answer the model gave."""
    root = write_memories(tmp_path / "mem")
    before = file_bytes(root)
    # generous bounds: two shared CPU cores, and a small model that often writes up to its token cap
    result = subprocess.run(
        [str(RECALL_KIT), "enrich", "--root", str(root), "--base-url", llama.base_url, "--model", llama.model,
         "--model-timeout", str(PATIENT_S), "--json"],
        capture_output=True, text=True, timeout=1200, env=clean_environ(), cwd=tmp_path,
    )
    assert result.returncode in (0, 1), result.stderr
    report = json.loads(result.stdout)
    print(json.dumps(report, indent=1, ensure_ascii=False))  # the terms, for a reader (pytest -s)
    assert len(report["enriched"]) + len(report["failed"]) == 3 and not report["interrupted"]
    assert all(f["reason"] in ENRICH_JUDGED for f in report["failed"]), report["failed"]
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


def check_learning_session(llama: LlamaServer, tmp_path: Path) -> None:
    """A learning session: every recall got the model's answer, and only a validated pick teaches."""
    root = tmp_path / "mem"
    for path, (name, description, body) in MEMORIES.items():
        write_memory(root, path, name, description, body)
    log = EventLog()
    config = SelectorConfig(base_url=llama.base_url, model=llama.model, timeout=PATIENT_S)
    with open_recaller([root], watch=False, use_cache=False, learn=True, selector=config, telemetry=Telemetry(log)) as recaller:
        for number, prompt in enumerate(LEARN_PROMPTS, 1):
            with recaller.sync_session() as session:
                session.begin(prompt)
                session.consume("initial")
                log.wait_for_blocking(lambda: len([e for e in log.events if isinstance(e, LearnEvent)]) >= number, PATIENT_S + 30)
                session.finish()
        assert recaller.learner is not None and recaller.learner.wait_idle(30)
        refs = set(recaller.snapshot().docs)
    learns = [event for event in log.events if isinstance(event, LearnEvent)]
    recalls = [event for event in log.events if isinstance(event, RecallEvent) and event.settled]
    assert len(learns) == len(LEARN_PROMPTS) and len(recalls) == len(LEARN_PROMPTS)
    for recall in recalls:  # the model answered each: a valid pick, or text it was judged on
        assert recall.model_ms is not None and (recall.fallback is None or recall.fallback.kind == "unusable_answer"), \
            recall.fallback
    taught = set()
    for learn, recall in zip(learns, recalls):
        if learn.outcome == "learned":  # only a validated model answer teaches
            assert recall.fallback is None
            assert set(learn.taught) | set(learn.suppressed) <= refs
            taught |= {ref.partition("/")[2] for ref in (*learn.taught, *learn.suppressed)}
        else:
            assert learn.outcome == "skipped" and learn.reason  # a rejected pick: nothing kept
    sidecar = root / ".recall-kit" / "learned.jsonl"
    kept = {json.loads(line)["path"] for line in sidecar.read_text().splitlines()} if sidecar.exists() else set()
    assert kept <= taught


CHECKS: dict[str, Callable[[LlamaServer, Path], None]] = {
    "selection protocol": check_selection_protocol,
    "deadline cut": check_deadline_cut,
    "enrich": check_enrich,
    "learning session": check_learning_session,
}
