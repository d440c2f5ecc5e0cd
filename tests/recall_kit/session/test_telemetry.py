"""Telemetry sinks: logging, JSON lines, callback; a failing sink never breaks anything."""

from __future__ import annotations

import json
import logging

from recall_kit._telemetry import (
    CallbackSink,
    DeliveryEvent,
    JsonLinesSink,
    LoggingSink,
    RecallEvent,
    Telemetry,
)

RECALL = RecallEvent(
    session_id="s1", handle_id=1, query_chars=12, docs_scanned=40, docs_selected=2,
    strategy="heuristic", fast_ms=0.3, model_ms=None, settled=True,
)
DELIVERY = DeliveryEvent(
    session_id="s1", handle_id=1, phase="fast", point="initial", reason=None,
    strategy="heuristic", docs=("p/a.md",), latency_ms=0.4, terminal=False,
)


def test_callback_sink_receives_events_in_order():
    seen: list[object] = []
    Telemetry(CallbackSink(seen.append)).emit(RECALL)
    Telemetry(seen.append).emit(DELIVERY)  # a bare callable is a callback sink
    assert seen == [RECALL, DELIVERY]


def test_json_lines_sink_writes_one_object_a_line(tmp_path):
    path = tmp_path / "events.jsonl"
    telemetry = Telemetry(JsonLinesSink(path))
    telemetry.emit(RECALL)
    telemetry.emit(DELIVERY)
    telemetry.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["kind"] for line in lines] == ["recall", "delivery"]
    assert lines[0]["query_chars"] == 12 and lines[0]["docs_scanned"] == 40
    assert lines[0]["fast_ms"] == 0.3 and lines[0]["model_ms"] is None
    assert lines[1] == {
        "session_id": "s1", "handle_id": 1, "phase": "fast", "point": "initial", "reason": None,
        "strategy": "heuristic", "docs": ["p/a.md"], "latency_ms": 0.4, "terminal": False,
        "kind": "delivery",
    }


def test_logging_sink_logs_one_line_per_event(caplog):
    with caplog.at_level(logging.INFO, logger="recall_kit.events"):
        Telemetry(LoggingSink()).emit(DELIVERY)
    assert len(caplog.records) == 1
    message = caplog.records[0].getMessage()
    assert message.startswith("delivery ") and "phase='fast'" in message and "p/a.md" in message


def test_failing_sink_is_skipped_and_the_others_still_receive(caplog):
    seen: list[object] = []

    def broken(event: object) -> None:
        raise RuntimeError("disk full")

    with caplog.at_level(logging.WARNING, logger="recall_kit.telemetry"):
        Telemetry(broken, seen.append).emit(RECALL)
    assert seen == [RECALL]
    assert "failed" in caplog.text


def test_session_events_reach_a_json_lines_file_and_a_broken_sink_changes_nothing(store, tmp_path):
    import asyncio

    from recall_kit import Recaller
    from session_support import DB, FAST_DB_QUERY

    def broken(event: object) -> None:
        raise OSError("sink is down")

    path = tmp_path / "events.jsonl"
    sink = JsonLinesSink(path)
    recaller = Recaller(store, telemetry=Telemetry(broken, sink))

    async def turn() -> tuple[str, ...]:
        session = recaller.session()
        session.begin(FAST_DB_QUERY)
        delivery = await session.consume("initial")
        await session.close()
        assert delivery is not None
        return delivery.refs

    assert asyncio.run(turn()) == (DB,)
    recaller.close()
    sink.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["kind"], e.get("point")) for e in lines] == [("recall", None), ("delivery", "initial")]
    assert lines[1]["docs"] == [DB] and lines[1]["phase"] == "fast" and lines[1]["terminal"] is True
