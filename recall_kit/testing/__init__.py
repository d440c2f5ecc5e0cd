"""Test support for recall-kit: a scripted OpenAI-compatible selector server, a scripted agent model
(Anthropic Messages and OpenAI chat, streamed), a real llama.cpp server and its build for any CPU
of the machine's architecture, and the real agent CLIs (Claude Code, Qwen Code) installed from npm
at pinned versions."""

from memory_store import fixup_module_metadata
from recall_kit.testing._http import RecordedRequest, ScriptedServerError, ScriptedServerTimeout
from recall_kit.testing._replies import REPLY_BY_NAME, Oracle, Reply
from recall_kit.testing.agent_clis import (
    AGENT_PACKAGES,
    AGENTS,
    CLAUDE_CODE,
    QWEN_CODE,
    AgentClisBroken,
    AgentClisMissing,
    agent_memory_folder,
    install_agent_clis,
)
from recall_kit.testing.agent_server import AgentRequest, Part, ScriptedAgentServer, Turn
from recall_kit.testing._llama_build import LlamaBuildError, install_llama_cpp
from recall_kit.testing.llama_server import LlamaServer, RealModelUnavailable, smollm2_gguf_path
from recall_kit.testing.scripted_server import ScriptedChatServer

__all__ = [
    "AGENTS",
    "AGENT_PACKAGES",
    "AgentClisBroken",
    "AgentClisMissing",
    "AgentRequest",
    "LlamaBuildError",
    "LlamaServer",
    "Oracle",
    "Part",
    "REPLY_BY_NAME",
    "RealModelUnavailable",
    "RecordedRequest",
    "Reply",
    "ScriptedAgentServer",
    "ScriptedChatServer",
    "ScriptedServerError",
    "ScriptedServerTimeout",
    "CLAUDE_CODE",
    "QWEN_CODE",
    "Turn",
    "agent_memory_folder",
    "install_agent_clis",
    "install_llama_cpp",
    "smollm2_gguf_path",
]
fixup_module_metadata(__name__, globals(), __all__)
