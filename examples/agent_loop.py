"""A small, real agent loop with recall-kit: memories arrive without making the user wait.

The agent talks to any OpenAI-compatible chat-completions endpoint (a local llama.cpp server, vLLM,
Ollama, or a hosted API) and has two tools over a sandbox folder: ``read_file`` and ``list_dir``.
On each user prompt it fires recall and takes what is ready at the two safe points:

- before the first model request (waits at most 100 ms): the memory block leads the turn's
  system reminders (``placement == "prepend"``);
- after each round of tool results (never waits): the block goes after the tool messages
  (``placement == "append"``), so each tool call stays next to its response.

Run it (agent model from flags or AGENT_BASE_URL / AGENT_MODEL / AGENT_API_KEY; the recall model,
optional, from RECALL_KIT_BASE_URL / RECALL_KIT_MODEL / RECALL_KIT_API_KEY):

    python examples/agent_loop.py --root examples/memories --sandbox . \\
        --base-url http://127.0.0.1:8080/v1 --model local "How do I run the ledgerline tests?"

Without a prompt it reads prompts from stdin, one a line. Ctrl-C aborts the turn (and its recall).

Without any model, ``--scripted`` answers every turn from recall-kit's scripted test server on
loopback (``recall_kit.testing.ScriptedChatServer``), so the memory deliveries can be watched with ``-v``:

    python examples/agent_loop.py --root examples/memories --scripted -v "How do I deploy ledgerline?"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from datetime import date
from pathlib import Path
from typing import Any, Callable

import httpx

from recall_kit import ConfigError, Delivery, MemoryStoreError, RecallSession, SelectorConfig, load_selector_config, open_recaller

MAX_TOOL_ROUNDS = 6
MAX_FILE_CHARS = 20_000
SYSTEM_PROMPT = (
    "You are a helpful coding assistant. You can read files in the user's sandbox with the tools "
    "read_file and list_dir. Answer briefly."
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "path relative to the sandbox"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_dir",
            "description": "List a folder in the sandbox.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "folder relative to the sandbox"}},
                "required": [],
            },
        },
    },
]


def reminder(text: str) -> str:
    return f"<system-reminder>\n{text}\n</system-reminder>"


class Sandbox:
    """The tools: read-only access to one folder, nothing outside it."""

    def __init__(self, root: Path):
        self.root = root.resolve()

    def _inside(self, relative: str) -> Path:
        path = (self.root / relative).resolve()
        if path != self.root and self.root not in path.parents:
            raise PermissionError(f"{relative!r} is outside the sandbox")
        return path

    def read_file(self, path: str) -> str:
        text = self._inside(path).read_text(encoding="utf-8", errors="replace")
        return text if len(text) <= MAX_FILE_CHARS else text[:MAX_FILE_CHARS] + "\n[... truncated]"

    def list_dir(self, path: str = ".") -> str:
        entries = sorted(self._inside(path).iterdir())
        return "\n".join(e.name + ("/" if e.is_dir() else "") for e in entries) or "(empty)"

    def call(self, name: str, arguments: str) -> str:
        try:
            args = json.loads(arguments or "{}")
            if name == "read_file":
                return self.read_file(str(args["path"]))
            if name == "list_dir":
                return self.list_dir(str(args.get("path", ".")))
            return f"error: unknown tool {name!r}"
        except Exception as exc:  # a tool error is an answer for the model, not a crash
            return f"error: {exc}"


class Agent:
    """One conversation: the message history, the recall session, the chat endpoint."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        base_url: str,
        model: str,
        session: RecallSession,
        sandbox: Sandbox,
        *,
        api_key: str | None = None,
        on_delivery: Callable[[Delivery], None] | None = None,
    ):
        self.http, self.url, self.model = http, base_url.rstrip("/") + "/chat/completions", model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.session, self.sandbox, self.on_delivery = session, sandbox, on_delivery
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]

    async def run_turn(self, prompt: str, *, abort: asyncio.Event | None = None) -> str:
        self.session.begin(prompt, abort=abort)  # fire recall; never awaited beyond the initial point
        try:
            reminders = [f"Today is {date.today().isoformat()}."]
            delivery = await self.session.consume("initial")
            if delivery is not None:
                self._seen(delivery)
                reminders.insert(0, delivery.text)  # placement "prepend": memory leads the reminders
            self.messages.append({"role": "user", "content": "\n".join(map(reminder, reminders)) + "\n" + prompt})
            for _ in range(MAX_TOOL_ROUNDS):
                message = await self._chat()
                self.messages.append(message)
                calls = message.get("tool_calls") or []
                if not calls:
                    return str(message.get("content") or "")
                for call in calls:
                    result = self.sandbox.call(call["function"]["name"], call["function"].get("arguments", ""))
                    self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
                delivery = await self.session.consume("tool_result")
                if delivery is not None:
                    self._seen(delivery)  # placement "append": after the tool responses
                    self.messages.append({"role": "user", "content": reminder(delivery.text)})
            return "(stopped after too many tool rounds)"
        finally:
            self.session.finish()  # whatever is still pending has no safe point left

    async def _chat(self) -> dict[str, Any]:
        payload = {"model": self.model, "messages": self.messages, "tools": TOOLS, "temperature": 0}
        response = await self.http.post(self.url, json=payload, headers=self.headers)
        response.raise_for_status()
        return dict(response.json()["choices"][0]["message"])

    def _seen(self, delivery: Delivery) -> None:
        if self.on_delivery is not None:
            self.on_delivery(delivery)


def recall_model() -> SelectorConfig | None:
    """The recall model from RECALL_KIT_* (or a recall-kit.toml); None turns refinement off."""
    try:
        config = load_selector_config()
    except ConfigError as exc:
        print(f"agent_loop: recall model off: {exc}", file=sys.stderr)
        return None
    if config.refusal:  # a project file's endpoint the user has not trusted with their key
        print(f"agent_loop: recall model off: {config.refusal}", file=sys.stderr)
    return config if config.configured else None


async def main_async(args: argparse.Namespace, prompts: list[str]) -> int:
    def show(delivery: Delivery) -> None:
        print(f"[memory {delivery.phase}/{delivery.strategy} at {delivery.point}, {delivery.latency_ms:.0f} ms: "
              f"{', '.join(delivery.refs)}]", file=sys.stderr)

    # the watched store, its index and the recall model's client, all closed by the Recaller
    async with open_recaller(args.root, selector=recall_model()) as recaller:
        session = recaller.session()
        async with httpx.AsyncClient(timeout=args.timeout) as http:
            agent = Agent(http, args.base_url, args.model, session, Sandbox(Path(args.sandbox)),
                          api_key=args.api_key, on_delivery=show if args.verbose else None)
            try:
                for prompt in prompts:
                    print(await run_abortable(agent, prompt))
            finally:
                await session.close()
    return 0


async def run_abortable(agent: Agent, prompt: str) -> str:
    """Run one turn; Ctrl-C aborts it (and its recall) instead of ending the program."""
    loop = asyncio.get_running_loop()
    abort = asyncio.Event()
    turn = asyncio.ensure_future(agent.run_turn(prompt, abort=abort))

    def on_interrupt() -> None:
        abort.set()
        turn.cancel()

    try:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    except (NotImplementedError, RuntimeError):  # not on the main thread, or not supported here
        pass
    try:
        return await turn
    except asyncio.CancelledError:
        if not abort.is_set():
            raise
        return "[turn aborted]"
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ
    parser = argparse.ArgumentParser(description="A small agent loop using recall-kit memories.")
    parser.add_argument("prompt", nargs="*", help="prompts (default: read from stdin, one a line)")
    parser.add_argument("--root", action="append", required=True, help="memory folder (repeatable)")
    parser.add_argument("--sandbox", default=".", help="folder the tools may read")
    parser.add_argument("--base-url", default=env.get("AGENT_BASE_URL") or env.get("OPENAI_BASE_URL"))
    parser.add_argument("--model", default=env.get("AGENT_MODEL"))
    parser.add_argument("--api-key", default=env.get("AGENT_API_KEY") or env.get("OPENAI_API_KEY"))
    parser.add_argument("--timeout", type=float, default=120.0, help="chat request timeout, seconds")
    parser.add_argument("--verbose", "-v", action="store_true", help="show deliveries on stderr")
    parser.add_argument("--scripted", action="store_true", help="no model: a scripted loopback server answers")
    args = parser.parse_args(argv)
    if not args.scripted and (not args.base_url or not args.model):
        parser.error("set --base-url and --model (or AGENT_BASE_URL and AGENT_MODEL), or pass --scripted")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    prompts = args.prompt or [line.strip() for line in sys.stdin if line.strip()]
    if args.scripted:
        from recall_kit.testing import Reply, ScriptedChatServer

        reply = Reply.content("(scripted agent reply: no model was asked)")
        with ScriptedChatServer(default=reply) as server:
            args.base_url, args.model = server.base_url, "scripted"
            return run(args, prompts)
    return run(args, prompts)


def run(args: argparse.Namespace, prompts: list[str]) -> int:
    try:
        return asyncio.run(main_async(args, prompts))
    except KeyboardInterrupt:
        return 130
    except MemoryStoreError as exc:
        print(f"agent_loop: {exc}", file=sys.stderr)
        return 2
    except httpx.HTTPError as exc:
        print(f"agent_loop: chat request failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
