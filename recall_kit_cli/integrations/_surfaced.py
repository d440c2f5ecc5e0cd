"""What the daemon delivered in each agent session, kept so that a daemon restarted in the middle of a
session (or one that dropped the session as idle) delivers nothing twice in it.

One JSON line per delivery: its time, the session id and the refs delivered (memory refs only, never
prompt text). The file is private (0600, this user's, never through a symlink: ``_runtime.open_log``)
and rotated past ``SURFACED_MAX_BYTES`` into one old file. The daemon reads both once, at the first
session it does not know, and keeps the refs of the ``DAEMON_MAX_SESSIONS`` sessions delivered to
most recently. A line it did not write (a planted one, one cut by a crash) is left out.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from memory_store import RecallKitError, parse_json, read_private
from recall_kit.limits import DAEMON_MAX_SESSIONS, MAX_SESSION_ID_CHARS, SURFACED_MAX_BYTES
from recall_kit_cli._output import json_text
from recall_kit_cli.integrations._runtime import append_line

_MAX_REF_CHARS = 4096  # a ref is a root's label and a relative path


class SurfacedRecord:
    """Per agent session, the refs delivered in it, as kept on disk; used from the daemon's loop."""

    def __init__(self, path: Path, *, max_sessions: int = DAEMON_MAX_SESSIONS) -> None:
        self.path = path
        self.max_sessions = max_sessions
        self._sessions: dict[str, dict[str, None]] | None = None  # read on first use; least recent first
        self.failures = 0  # lines that could not be written (an unsafe state folder): counted, never raised

    def refs(self, session: str) -> tuple[str, ...]:
        """The refs delivered in ``session`` so far, in the order delivered."""
        return tuple(self._loaded().get(session, ()))

    def add(self, session: str, refs: Iterable[str]) -> None:
        """Keep that ``refs`` were delivered in ``session``: in memory and, before the hook hears of it, on disk."""
        new = [ref for ref in refs if ref not in self._loaded().get(session, {})]
        if not new:
            return
        self._remember(session, new)
        line = json_text({"t": round(time.time(), 3), "session": session, "refs": new}) + "\n"
        if not append_line(self.path, line, rotate_at=SURFACED_MAX_BYTES):
            self.failures += 1

    def _loaded(self) -> dict[str, dict[str, None]]:
        if self._sessions is None:
            self._sessions = {}
            for path in (self.path.with_name(self.path.name + ".1"), self.path):
                for session, refs in _lines(path):
                    self._remember(session, refs)
        return self._sessions

    def _remember(self, session: str, refs: list[str]) -> None:
        sessions = self._loaded() if self._sessions is None else self._sessions
        kept = sessions.pop(session, {})
        kept.update(dict.fromkeys(refs))
        sessions[session] = kept
        while len(sessions) > self.max_sessions:
            del sessions[next(iter(sessions))]


def _lines(path: Path) -> list[tuple[str, list[str]]]:
    """The (session, refs) of each line of ``path`` the daemon could have written; [] without the file."""
    try:
        data = read_private(path, 2 * SURFACED_MAX_BYTES)
    except (OSError, RecallKitError):
        data = None  # not ours to read, or unreadable: nothing delivered is known
    if data is None:
        return []
    found = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            record = parse_json(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        session, refs = record.get("session"), record.get("refs")
        if isinstance(session, str) and 0 < len(session) <= MAX_SESSION_ID_CHARS and isinstance(refs, list):
            found.append((session, [r for r in refs if isinstance(r, str) and 0 < len(r) <= _MAX_REF_CHARS]))
    return found
