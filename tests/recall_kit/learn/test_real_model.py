"""A learning session end to end against llama.cpp serving SmolLM2-135M: whatever the small model
picks passes the selector's validation before it teaches, and a rejected pick teaches nothing.

Needs the ``real-model`` extra; without it this fails (it does not skip) and says what to install.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recall_kit import LearnEvent, RecallEvent, SelectorConfig, open_recaller
from recall_kit._telemetry import Telemetry
from recall_kit.testing import LlamaServer
from recall_kit_bench import write_memory
from session_support import MEMORIES, EventLog

pytestmark = pytest.mark.real_model

PROMPTS = ["who holds the beeper for the payments folks", "what is the weather like on mars today?"]


def test_a_learning_session_against_a_real_model_teaches_only_validated_picks(tmp_path: Path, llama: LlamaServer) -> None:
    root = tmp_path / "mem"
    for path, (name, description, body) in MEMORIES.items():
        write_memory(root, path, name, description, body)
    log = EventLog()
    config = SelectorConfig(base_url=llama.base_url, model=llama.model, timeout=120)
    with open_recaller([root], watch=False, use_cache=False, learn=True, selector=config, telemetry=Telemetry(log)) as recaller:
        for number, prompt in enumerate(PROMPTS, 1):
            with recaller.sync_session() as session:
                session.begin(prompt)
                session.consume("initial")
                log.wait_for_blocking(lambda: len([e for e in log.events if isinstance(e, LearnEvent)]) >= number, 150)
                session.finish()
        assert recaller.learner is not None and recaller.learner.wait_idle(30)
        refs = set(recaller.snapshot().docs)
    learns = [event for event in log.events if isinstance(event, LearnEvent)]
    recalls = [event for event in log.events if isinstance(event, RecallEvent) and event.settled]
    assert len(learns) == len(PROMPTS) and len(recalls) == len(PROMPTS)
    taught = set()
    for learn, recall in zip(learns, recalls):
        if learn.outcome == "learned":  # only a validated model answer teaches
            assert recall.fallback is None
            assert set(learn.taught) | set(learn.suppressed) <= refs
            taught |= {ref.partition("/")[2] for ref in (*learn.taught, *learn.suppressed)}
        else:
            assert learn.outcome == "skipped" and learn.reason  # a fallback or a rejected pick: nothing kept
    sidecar = root / ".recall-kit" / "learned.jsonl"
    kept = {json.loads(line)["path"] for line in sidecar.read_text().splitlines()} if sidecar.exists() else set()
    assert kept <= taught
