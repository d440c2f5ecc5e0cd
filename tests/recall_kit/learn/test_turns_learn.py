"""A turn runner runs its Recaller's stages, each derived with dataclasses.replace: the learner is
one of them, so a turn through it (what `recall-kit query` and the harness run) teaches."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from recall_kit import LearnEvent, SelectorConfig, Stages, open_recaller
from recall_kit._telemetry import Telemetry
from recall_kit.testing import Reply, ScriptedChatServer
from recall_kit.turns import TurnRunner
from recall_kit_bench import write_memory
from session_support import MEMORIES, EventLog

ONCALL_PARAPHRASE = "who holds the beeper for the payments folks"  # shares no word with the on-call memory


def test_a_turn_runners_turn_feeds_the_recallers_learner(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    for path, (name, description, body) in MEMORIES.items():
        write_memory(root, path, name, description, body)
    log = EventLog()
    with ScriptedChatServer(default=Reply.select("mem/oncall.md")) as server:
        config = SelectorConfig(base_url=server.base_url, model="scripted")

        async def turn() -> None:
            async with open_recaller([root], watch=False, use_cache=False, learn=True, selector=config,
                                     telemetry=Telemetry(log)) as recaller:
                runner = TurnRunner(recaller)
                for _ in range(2):  # a word is written once it came in two turns
                    observed = await runner.run(ONCALL_PARAPHRASE, between=runner.settle_bound())
                    assert observed.selection is not None and observed.selection.accepted == ("mem/oncall.md",)
                    assert recaller.learner is not None and await asyncio.to_thread(recaller.learner.wait_idle, 10)

        asyncio.run(turn())
    taught = [e for e in log.events if isinstance(e, LearnEvent) and e.outcome != "skipped"]
    assert taught and "mem/oncall.md" in taught[-1].taught
    assert "beeper" in (root / ".recall-kit" / "learned.jsonl").read_text()


def test_every_field_of_the_stages_is_one_a_wrapper_derives_with_replace() -> None:
    names = [f.name for f in dataclasses.fields(Stages)]
    assert names == [
        "source", "heuristic", "selector", "learner", "telemetry", "initial_wait_ms", "body_budget", "skip_certain",
    ]
    assert dataclasses.is_dataclass(Stages) and Stages.__dataclass_params__.frozen  # type: ignore[attr-defined]
