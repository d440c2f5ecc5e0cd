"""AgentChatTestServer: a real loopback OpenAI-compatible test server that answers an agent's chat
requests with scripted tool calls, then text. (The scripted selector server answers only text.)"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class AgentChatTestServer:
    """Replies in order from ``script``: {"tool_calls": [(name, args)], "delay_ms": n} or {"content": s}."""

    def __init__(self, script: list[dict[str, Any]]):
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
                reply = server._next(body, self.headers.get("Authorization"))
                time.sleep(reply.get("delay_ms", 0) / 1000)  # the model "thinking" (server thread)
                payload = json.dumps(_completion(reply, len(server.requests))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, name="agent-chat-test-server", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def _next(self, body: dict[str, Any], authorization: str | None) -> dict[str, Any]:
        with self._lock:
            self.requests.append({**body, "_authorization": authorization})
            return self.script.pop(0) if self.script else {"content": "(script exhausted)"}

    def __enter__(self) -> AgentChatTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()


def _completion(reply: dict[str, Any], n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
    if "tool_calls" in reply:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(reply["tool_calls"])
        ]
    finish = "tool_calls" if "tool_calls" in reply else "stop"
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": "agent-test",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
