"""Secrets under hostile conditions: echoed across a cut, with invisible characters, inside a URL."""

from __future__ import annotations

import base64
import logging

import pytest

from selector_helpers import make_docs, select_with
from recall_kit import ConfigError, ModelSelector, load_selector_config
from recall_kit.testing import Reply, ScriptedChatServer

KEY = "sk-proj-4fQ9zX2mL7pR1vT8wK3nB6cY0dH5jS"
DOCS = make_docs(5)


def fragments(secret: str, size: int = 8) -> list[str]:
    return [secret[i : i + size] for i in range(len(secret) - size + 1)]


def assert_no_piece_of(secret: str, text: str) -> None:
    leaked = [piece for piece in fragments(secret) if piece in text]
    assert not leaked, f"fragments of the secret leaked: {leaked[:3]}"


@pytest.mark.parametrize("offset", [130, 150, 155, 159, 160, 175, 195, 199])
def test_key_echoed_across_the_error_cut_leaks_no_fragment(
    server: ScriptedChatServer, offset: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    message = "x" * offset + KEY + " tail"
    selection, _ = select_with(server, Reply.error(500, message), Reply.error(500, message), candidates=DOCS,
                               api_key=KEY, timeout=2)
    seen = repr(selection) + str(selection.fallback_reason) + caplog.text
    assert selection.fallback_reason and selection.fallback_reason.startswith("HTTP 500")
    assert_no_piece_of(KEY, seen)


@pytest.mark.parametrize("offset", [0, 180, 195, 199, 250])
def test_key_in_a_rejected_reference_across_the_cut_leaks_no_fragment(server: ScriptedChatServer, offset: int) -> None:
    ref = "r" * offset + KEY
    selection, _ = select_with(server, Reply.select(ref), candidates=DOCS, api_key=KEY)
    shown = repr(selection.rejected)
    assert selection.rejected and len(selection.rejected[0][0]) <= 200
    assert_no_piece_of(KEY, shown)


def test_a_fragment_of_the_key_echoed_alone_is_masked(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.error(500, f"bad token prefix {KEY[:12]}"),
                               Reply.error(500, f"bad token prefix {KEY[:12]}"), candidates=DOCS, api_key=KEY)
    assert KEY[:12] not in str(selection.fallback_reason)
    assert "***" in str(selection.fallback_reason)


@pytest.mark.parametrize("accident", ["\u00a0", "\u200b", " ", "\n", "\ufeff", "\t "])
def test_surrounding_invisible_characters_are_stripped_from_the_key(server: ScriptedChatServer, accident: str) -> None:
    selection, requests = select_with(server, Reply.select("mem/notes/topic-000.md"), candidates=DOCS,
                                      api_key=accident + KEY + accident)
    assert requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert selection.strategy == "model"


@pytest.mark.parametrize("inside", ["\u00a0", "\u200b", "é", " "])
def test_a_key_with_an_invisible_or_foreign_character_inside_is_refused_in_one_line(inside: str) -> None:
    broken = KEY[:10] + inside + KEY[10:]
    with pytest.raises(ConfigError) as caught:
        load_selector_config(base_url="http://127.0.0.1:9/v1", model="m", environ={"RECALL_KIT_API_KEY": broken})
    message = str(caught.value)
    assert "\n" not in message and "position 11" in message
    assert "environment variable RECALL_KIT_API_KEY" in message
    assert_no_piece_of(KEY, message + repr(caught.value))
    with pytest.raises(ConfigError):
        ModelSelector("http://127.0.0.1:9/v1", "m", api_key=broken)


def test_url_credentials_are_used_but_never_shown(server: ScriptedChatServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    password = "hunter2-very-secret-pw"
    url = server.base_url.replace("http://", f"http://alice:{password}@")
    sent = base64.b64encode(f"alice:{password}".encode()).decode()  # an error body may echo the header as sent
    selection, requests = select_with(server, Reply.error(500, f"denied for alice:{password}, Basic {sent}"),
                                      Reply.error(500, f"denied for alice:{password}, Basic {sent}"),
                                      candidates=DOCS, base_url=url)
    assert requests[0].headers["authorization"] == f"Basic {sent}"  # the credentials still go out
    selector = ModelSelector(url, "m")
    shown = repr(selector) + selector.base_url + repr(selection) + caplog.text
    assert "denied for" in shown and password not in shown and "alice" not in selector.base_url
    assert_no_piece_of(sent, shown)
    assert selector.base_url.startswith("http://***@127.0.0.1")


def test_429_with_an_empty_object_body_reads_plainly(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.raw_error(429, "{}"), Reply.raw_error(429, "{}"), candidates=DOCS,
                               timeout=2)
    assert selection.fallback_reason == "HTTP 429"


def test_no_fragment_of_the_key_reaches_telemetry_logs_or_deliveries(
    server: ScriptedChatServer, tmp_path, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio
    import json

    from memory_store import MemoryStore
    from recall_kit import JsonLinesSink, LoggingSink, Recaller, Telemetry
    from recall_kit_bench import write_memory

    caplog.set_level(logging.DEBUG)
    root = tmp_path / "mem"
    write_memory(root, "db.md", "Postgres conventions", "Atlas stores its data in Postgres behind pgbouncer", "")
    events = tmp_path / "events.jsonl"
    sink = JsonLinesSink(events)
    leaky = [Reply.error(500, f"{'x' * 150}{KEY}"), Reply.select(KEY, f"mem/{KEY}"), Reply.content(f"nope {KEY}")]
    server.script(*leaky, *leaky)
    seen: list[str] = []

    async def turns() -> None:
        settled = asyncio.Event()

        def on_event(event: object) -> None:
            if getattr(event, "settled", False):
                settled.set()

        with MemoryStore.open(root, watch=False) as store:
            selector = ModelSelector(server.base_url, "m", api_key=KEY, timeout=2)
            telemetry = Telemetry(sink, LoggingSink(level=logging.INFO), on_event)
            with Recaller(store, selector, telemetry=telemetry) as recaller:
                for _ in leaky:
                    settled.clear()
                    async with recaller.session() as session:
                        session.begin("postgres pgbouncer settings for atlas")
                        seen.append(repr(await session.consume("initial")))
                        await asyncio.wait_for(settled.wait(), 10)  # the model's answer is in
                        seen.append(repr(await session.consume("tool_result")))
                        session.finish()
            await selector.aclose()

    asyncio.run(turns())
    sink.close()
    reasons = [json.loads(line).get("fallback_reason") for line in events.read_text().splitlines()]
    assert sum(bool(r) for r in reasons) == len(leaky), reasons  # every model answer was judged and logged
    assert_no_piece_of(KEY, events.read_text() + caplog.text + "".join(seen))
