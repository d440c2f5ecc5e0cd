"""examples/agent_loop.py against real loopback servers: memory placed exactly as `placement` says."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import httpx

from recall_kit.testing import Reply, ScriptedAgentServer, Turn
from session_support import DB, DEPLOY, FAST_DB_QUERY, make_recaller

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"


def load_example():
    spec = importlib.util.spec_from_file_location("agent_loop_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def make_sandbox(tmp_path: Path) -> Path:
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    (sandbox / "notes.txt").write_text("pool size is 20", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("do not read", encoding="utf-8")
    return sandbox


def test_agent_places_fast_memory_first_and_refined_memory_after_tool_results(store, log, chat_server, tmp_path):
    agent_loop = load_example()
    selector_server = chat_server(default=Reply.select(DB, DEPLOY).after(150))
    script = [Turn.call("read_file", path="notes.txt").after(400), Turn.say("Pool is 20.")]

    async def scenario(chat: ScriptedAgentServer) -> str:
        session = make_recaller(store, log, selector_server).session()
        async with httpx.AsyncClient() as http:
            agent = agent_loop.Agent(http, chat.openai_base_url, "agent-test", session,
                                     agent_loop.Sandbox(make_sandbox(tmp_path)), api_key="k-123")
            answer = await agent.run_turn(FAST_DB_QUERY)
        assert not session.pending
        await session.close()
        await session.stages.selector.aclose()
        return answer

    with ScriptedAgentServer(script) as chat:
        answer = asyncio.run(scenario(chat))
    assert answer == "Pool is 20."
    first, second = (request.body for request in chat.main_requests)
    assert chat.main_requests[0].headers["authorization"] == "Bearer k-123" and first["tools"]
    user = first["messages"][1]
    assert user["role"] == "user"
    # initial point, placement "prepend": the memory block leads the system reminders
    assert user["content"].startswith("<system-reminder>\n<recalled-memories>")
    assert "Reference: mem/db.md" in user["content"] and "mem/deploy.md" not in user["content"]
    assert user["content"].index("</recalled-memories>") < user["content"].index("Today is")
    assert user["content"].endswith(FAST_DB_QUERY)
    # tool-result point, placement "append": after the tool response, with only what is new
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    call = second["messages"][2]["tool_calls"][0]
    tool = second["messages"][3]
    assert tool["tool_call_id"] == call["id"] and tool["content"] == "pool size is 20"
    refined = second["messages"][4]["content"]
    assert refined.startswith("<system-reminder>\n<recalled-memories>")
    assert "Reference: mem/deploy.md" in refined and "mem/db.md" not in refined
    assert [(e.phase, e.point) for e in log.deliveries] == [("fast", "initial"), ("refined", "tool_result")]


def test_sandbox_tools_refuse_paths_outside_the_sandbox(tmp_path):
    sandbox = load_example().Sandbox(make_sandbox(tmp_path))
    assert sandbox.call("read_file", '{"path": "notes.txt"}') == "pool size is 20"
    assert sandbox.call("read_file", '{"path": "../secret.txt"}').startswith("error: ")
    assert sandbox.call("list_dir", "{}") == "notes.txt"
    assert sandbox.call("rm", "{}").startswith("error: unknown tool")


def test_agent_loop_script_runs_end_to_end_against_an_endpoint(memory_root, tmp_path):
    script = [Turn.call("list_dir"), Turn.say("Found notes.txt.")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RECALL_KIT_", "OPENAI_", "AGENT_"))}
    sandbox = make_sandbox(tmp_path)
    with ScriptedAgentServer(script) as chat:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--root", str(memory_root), "--sandbox", str(sandbox),
             "--base-url", chat.openai_base_url, "--model", "agent-test", "-v", FAST_DB_QUERY],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Found notes.txt."
    assert "[memory fast/heuristic at initial" in done.stderr and "mem/db.md" in done.stderr
    first, second = (request.body for request in chat.main_requests)
    assert first["messages"][1]["content"].startswith("<system-reminder>\n<recalled-memories>")
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "notes.txt"}
