"""Test servers for recall-kit: a scripted OpenAI-compatible chat server and a real llama.cpp server."""

from recall_kit.testing._replies import REPLY_BY_NAME, Oracle, Reply
from recall_kit.testing.scripted_server import RecordedRequest, ScriptedChatServer

__all__ = ["REPLY_BY_NAME", "Oracle", "RecordedRequest", "Reply", "ScriptedChatServer"]
