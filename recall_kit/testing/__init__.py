"""Test servers for recall-kit: a scripted OpenAI-compatible chat server and a real llama.cpp server."""

from memory_store import fixup_module_metadata
from recall_kit.testing._replies import REPLY_BY_NAME, Oracle, Reply
from recall_kit.testing.llama_server import LlamaServer, RealModelUnavailable, smollm2_gguf_path
from recall_kit.testing.scripted_server import (
    RecordedRequest,
    ScriptedChatServer,
    ScriptedServerError,
    ScriptedServerTimeout,
)

__all__ = [
    "LlamaServer",
    "Oracle",
    "REPLY_BY_NAME",
    "RealModelUnavailable",
    "RecordedRequest",
    "Reply",
    "ScriptedChatServer",
    "ScriptedServerError",
    "ScriptedServerTimeout",
    "smollm2_gguf_path",
]
fixup_module_metadata(__name__, globals(), __all__)
