"""The API key goes out as a bearer token and nowhere else: not in repr, logs, reasons or results."""

from __future__ import annotations

import logging

import pytest

from selector_helpers import make_docs, select_with
from recall_kit import ModelSelector
from recall_kit.testing import Reply, ScriptedChatServer

KEY = "sk-live-0123456789abcdefSECRET"
DOCS = make_docs(5)

LEAKY_REPLIES = [
    Reply.error(400, f"Incorrect API key provided: {KEY}"),
    Reply.error(401, f"Incorrect API key provided: {KEY}"),
    Reply.error(403, f"key {KEY} may not use this model"),
    Reply.error(404, f"no such model for {KEY}"),
    Reply.error(500, f"crash while handling {KEY}"),
    Reply.content(f'{{"selected_memories": ["{KEY}"]}}'),
    Reply.content(f"I cannot answer, {KEY}"),
    Reply.reset(),
    Reply.hang(),
]


@pytest.mark.parametrize("reply", LEAKY_REPLIES, ids=lambda r: f"{r.kind}-{r.status}")
def test_key_sent_as_bearer_and_never_leaked(
    server: ScriptedChatServer, reply: Reply, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    selection, requests = select_with(server, reply, reply, reply, candidates=DOCS, api_key=KEY, timeout=0.3)
    assert requests and all(r.headers["authorization"] == f"Bearer {KEY}" for r in requests)
    rendered = repr(selection) + str(selection.fallback_reason) + caplog.text
    rendered += "".join(record.getMessage() for record in caplog.records)
    assert KEY not in rendered


def test_key_echoed_in_an_answer_is_rejected_and_redacted(server: ScriptedChatServer) -> None:
    selection, _ = select_with(server, Reply.select(KEY, f"mem/{KEY}.md"), candidates=DOCS, api_key=KEY)
    assert selection.accepted == ()
    assert selection.rejected == (("***", "not in the manifest"), ("mem/***.md", "not in the manifest"))


def test_key_not_in_repr() -> None:
    selector = ModelSelector("http://127.0.0.1:9/v1", "m", api_key=KEY)
    assert KEY not in repr(selector) and KEY not in str(selector)
    assert "api_key='***'" in repr(selector)
