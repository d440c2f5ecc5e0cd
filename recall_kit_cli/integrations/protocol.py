"""The daemon's JSON-lines protocol, client side: one request per line, one response line each.

Requests (``session`` is the agent's session id; ``roots`` absolute memory folders):
  {"op": "begin", "session": S, "roots": [R, ...], "query": Q}   -> {"ok": true}
  {"op": "consume", "session": S, "point": "initial"|"tool_result"}
                                                                   -> {"ok": true, "delivery": D|null}
  {"op": "finish", "session": S}                                   -> {"ok": true}
  {"op": "close_session", "session": S}                            -> {"ok": true, "closed": bool}
  {"op": "status"}                                                 -> {"ok": true, "pid": ..., ...}
  {"op": "stop"}                                                   -> {"ok": true, "pid": ...}, then it exits
A delivery D is {"text", "refs", "phase", "strategy", "point", "placement", "latency_ms"}.
Any failure is {"ok": false, "error": "one line"}. Stdlib only (and recall_kit.limits, memory_store's
errors and private-path helpers): the hook imports this per prompt.

A client trusts a socket only in a folder of this user's alone (every folder on the way checked)
and only when the process listening on it runs as this user (``SO_PEERCRED``): it sends nothing before.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from memory_store import RecallKitError, parse_json  # its errors and JSON modules alone: cheap
from recall_kit.limits import PROTOCOL_MAX_LINE_BYTES, SOCKET_PATH_MAX_BYTES

PROTOCOL_VERSION = 1


class DaemonError(RecallKitError):
    """The daemon could not be reached, timed out, or answered with an error."""


class UntrustedSocket(DaemonError):
    """The socket sits where another user could swap it, or another user's process listens on it."""


class UnusableSocketPath(DaemonError):
    """No Unix socket can be bound or reached at the path: it is longer than one may be."""


def request(path: Path | str, messages: list[dict[str, Any]], *, deadline: float) -> list[dict[str, Any]]:
    """Send ``messages`` on one connection and return the responses; DaemonError past ``deadline``
    (a ``time.monotonic()`` value) or on any error response, UntrustedSocket (before anything is
    sent) when the socket's folder or its peer is not this user's."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise DaemonError("no time left to reach the daemon")
    check_socket_folder(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(remaining)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise DaemonError(f"cannot reach the daemon at {path}: {exc.strerror or exc}") from None
        check_peer(sock, path)
        try:
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
                try:
                    answer = parse_json(line)
                except ValueError:
                    raise DaemonError("the daemon's answer is not JSON") from None
                if not isinstance(answer, dict) or not answer.get("ok"):
                    error = answer.get("error") if isinstance(answer, dict) else None
                    raise DaemonError(f"the daemon refused: {error or 'no reason given'}")
                responses.append(answer)
        return responses
    finally:
        sock.close()


def listening(path: Path | str) -> bool:
    """Whether anything listens at ``path`` (nothing is sent), answered at once: a listener whose
    backlog is full (stopped, or stuck) counts, and is never waited on."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.setblocking(False)  # a blocking connect would wait for as long as the listener does not accept
    try:
        probe.connect(str(path))
        return True
    except BlockingIOError:  # EAGAIN: it listens, and its backlog is full
        return True
    except OSError:
        return False
    finally:
        probe.close()


def check_socket_length(path: Path | str) -> None:
    """UnusableSocketPath when ``path`` is longer than a Unix socket's may be: no daemon can serve it."""
    size = len(os.fsencode(path))
    if size > SOCKET_PATH_MAX_BYTES:
        raise UnusableSocketPath(f"the socket path {path} is {size} bytes, over the {SOCKET_PATH_MAX_BYTES} a Unix "
                                 "socket's may have; set XDG_RUNTIME_DIR to a shorter folder")


def check_socket_folder(path: Path | str) -> None:
    """UnusableSocketPath when ``path`` is too long (``check_socket_length``: so no hook starts a
    daemon bound to fail); UntrustedSocket unless every folder on the way to it that exists is this
    user's alone."""
    from memory_store import UnsafePathError, private_folder  # the private-path helpers alone: cheap

    check_socket_length(path)

    try:
        private_folder(os.path.dirname(os.fspath(path)), create=False, missing_ok=True)
    except UnsafePathError as exc:
        raise UntrustedSocket(f"refusing the daemon's socket {path}: {exc}") from None


def check_peer(sock: socket.socket, path: Path | str) -> None:
    """UntrustedSocket unless the process listening on ``sock`` runs as this user."""
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)  # struct ucred: pid, uid, gid
    except (OSError, AttributeError) as exc:
        raise UntrustedSocket(f"cannot tell who serves {path}: {exc}") from None
    uid = int.from_bytes(creds[4:8], sys.byteorder)
    if uid != os.getuid():
        raise UntrustedSocket(f"refusing the daemon's socket {path}: uid {uid} serves it, not this user (uid {os.getuid()})")
