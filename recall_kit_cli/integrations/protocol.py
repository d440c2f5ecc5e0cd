"""The daemon's JSON-lines protocol, client side: one request per line, one response line each.

Requests (``session`` is the agent's session id; ``roots`` absolute memory folders):
  {"op": "begin", "session": S, "roots": [R, ...], "query": Q}   -> {"ok": true}
  {"op": "consume", "session": S, "point": "initial"|"tool_result"}
                                                                   -> {"ok": true, "delivery": D|null}
  {"op": "finish", "session": S}                                   -> {"ok": true}
  {"op": "close_session", "session": S}                            -> {"ok": true, "closed": bool}
  {"op": "status"}                                                 -> {"ok": true, "pid": ..., ...}
A delivery D is {"text", "refs", "phase", "strategy", "point", "placement", "latency_ms"}.
Any failure is {"ok": false, "error": "one line"}. Stdlib only (and recall_kit.limits): the hook imports this
per prompt.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

from memory_store import RecallKitError  # its errors module alone: cheap
from recall_kit.limits import PROTOCOL_MAX_LINE_BYTES

PROTOCOL_VERSION = 1


class DaemonError(RecallKitError):
    """The daemon could not be reached, timed out, or answered with an error."""


def request(path: Path | str, messages: list[dict[str, Any]], *, deadline: float) -> list[dict[str, Any]]:
    """Send ``messages`` on one connection and return the responses; DaemonError past ``deadline``
    (a ``time.monotonic()`` value) or on any error response."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DaemonError("no time left to reach the daemon")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(remaining)
        try:
            sock.connect(str(path))
            sock.sendall(b"".join(json.dumps(m).encode("utf-8") + b"\n" for m in messages))
        except OSError as exc:
            raise DaemonError(f"cannot reach the daemon at {path}: {exc.strerror or exc}") from None
        responses: list[dict[str, Any]] = []
        buffer = b""
        while len(responses) < len(messages):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DaemonError("the daemon did not answer in time")
            sock.settimeout(remaining)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                raise DaemonError("the daemon did not answer in time") from None
            except OSError as exc:
                raise DaemonError(f"lost the daemon: {exc.strerror or exc}") from None
            if not chunk:
                raise DaemonError("the daemon closed the connection")
            buffer += chunk
            if len(buffer) > PROTOCOL_MAX_LINE_BYTES * len(messages):
                raise DaemonError("the daemon's answer is too long")
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                answer = json.loads(line)
                if not isinstance(answer, dict) or not answer.get("ok"):
                    error = answer.get("error") if isinstance(answer, dict) else None
                    raise DaemonError(f"the daemon refused: {error or 'no reason given'}")
                responses.append(answer)
        return responses
    finally:
        sock.close()
