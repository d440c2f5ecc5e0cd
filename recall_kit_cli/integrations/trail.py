"""The recall trail: what the daemon recalled for each prompt and why, for `recall-kit hook log`.

The daemon appends one JSON line per prompt it begins (time, session, roots, the prompt's length)
and per engine event of that prompt (each delivery with its point, phase, strategy, refs and
latency; each discard with its reason, "no_relevant_results" being the gate's; the recall's
timing and the model's fallback reason), and one per memory version its background enrichment
handled (the ref, the outcome, the term counts: never the memory's text or terms). The file is ``trail.jsonl`` in the state folder, private
(0600, this user's, never through a symlink: ``_runtime.open_log``), rotated past
``TRAIL_MAX_BYTES`` into one old file. It holds no prompt text unless ``RECALL_KIT_TRAIL_PROMPTS=1``
(then the first ``TRAIL_PROMPT_CHARS`` characters, secrets blanked by ``recall_kit.scrub_secrets``), and of a model's failure only its kind and
status, never the server's words (an error body can echo the request, prompt and all);
``RECALL_KIT_TRAIL=0`` turns it off. Every line read back is untrusted: one that is not what the
daemon writes (a time of 1e20, roots that are a number) is left out, never a traceback.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_store import parse_json, read_private, recorded_time
from recall_kit import scrub_secrets
from recall_kit.limits import PROMPT_HEAD_CHARS, TRAIL_MAX_BYTES, TRAIL_PROMPT_CHARS
from recall_kit_cli._output import json_text
from recall_kit_cli.integrations._runtime import append_line

_READ_MAX_BYTES = 4 * TRAIL_MAX_BYTES  # a trail file grown past this by someone else is read only to here


class Trail:
    """The daemon's writer: ``begin`` for each prompt, ``emit`` for each engine event (any thread)."""

    def __init__(self, path: Path, *, keep_prompts: bool = False) -> None:
        self.path = path
        self.keep_prompts = keep_prompts
        self._lock = threading.Lock()
        self.failures = 0  # lines that could not be written (an unsafe state folder): counted, never raised

    def begin(self, session: str, roots: Sequence[str], query: str) -> None:
        """A prompt began: its session, its roots and its length (its head only when asked for, with
        what the secret scrubber blanks blanked: scrubbed before the cut, so a key across it is seen whole)."""
        record: dict[str, Any] = {"kind": "begin", "session": session, "roots": list(roots), "prompt_chars": len(query)}
        if self.keep_prompts:
            record["prompt"] = scrub_secrets(query[:PROMPT_HEAD_CHARS])[:TRAIL_PROMPT_CHARS]
        self._write(record)

    def refused(self, session: str, reason: str) -> None:
        """The prompt's roots were refused (not folders of memories, over a bound): nothing recalled."""
        self._write({"kind": "refused", "session": session, "reason": reason})

    def emit(self, event: Any) -> None:
        """One engine event (a telemetry sink): deliveries, discards and recall timings are kept."""
        kind = getattr(event, "kind", None)
        if kind == "delivery":
            self._write({
                "kind": "delivery", "session": event.session_id, "handle": event.handle_id, "point": event.point,
                "phase": event.phase, "strategy": event.strategy, "refs": list(event.docs), "reason": event.reason,
                "latency_ms": round(event.latency_ms, 1),
            })
        elif kind == "enrich":  # background enrichment: which memory, what came of it (never its text)
            failure = getattr(event, "failure", None)  # a failed model call: its kind, never the server's words
            reason = _failure_kind(failure, event.reason) if failure else event.reason
            self._write({
                "kind": "enrich", "ref": event.ref, "outcome": event.outcome, "reason": reason,
                "keywords": event.keywords, "usage_scenarios": event.usage_scenarios,
                "ms": round(event.duration_ms, 1),
            })
        elif kind == "recall":
            self._write({
                "kind": "recall", "session": event.session_id, "handle": event.handle_id, "settled": event.settled,
                "strategy": event.strategy, "selected": event.docs_selected, "scanned": event.docs_scanned,
                "fast_ms": _ms(event.fast_ms), "model_ms": _ms(event.model_ms),
                "fallback": _failure_kind(event.fallback.kind, event.fallback.reason) if event.fallback is not None else None,
                "model_skipped": bool(getattr(event, "model_skipped", False)),
            })

    def _write(self, record: dict[str, Any]) -> None:
        line = json_text({"t": round(time.time(), 3), **record}) + "\n"
        with self._lock:
            if not append_line(self.path, line, rotate_at=TRAIL_MAX_BYTES):
                self.failures += 1


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


_STATUS = re.compile(r"HTTP (\d{3})\b|transport error: (\w+)")


def _failure_kind(kind: str, reason: str | None) -> str:
    """A failed model call (a model stage's fallback, a background enrichment's call) as the trail keeps
    it: its kind, with the HTTP status or the transport error's class (``http_error (HTTP 500)``,
    ``unreachable (ConnectError)``), never the reason's text: an error body can echo the request."""
    found = _STATUS.match(reason or "")
    if found is None:
        return kind
    return f"{kind} (HTTP {found.group(1)})" if found.group(1) else f"{kind} ({found.group(2)})"


@dataclass
class PromptTrail:
    """One prompt as the trail tells it: when, which session, what was delivered or discarded, and why."""

    time: float
    session: str
    roots: list[str] = field(default_factory=list)
    prompt_chars: int | None = None
    prompt: str | None = None
    deliveries: list[dict[str, Any]] = field(default_factory=list)  # in order: delivered and discarded
    recall: dict[str, Any] | None = None  # the last timing: settled when the model answered
    refused: str | None = None  # why the daemon opened none of its roots

    def to_dict(self) -> dict[str, Any]:
        """As `hook log --json` shows it."""
        out: dict[str, Any] = {
            "time": self.time, "session": self.session, "roots": self.roots, "prompt_chars": self.prompt_chars,
            "deliveries": self.deliveries, "recall": self.recall, "refused": self.refused,
        }
        if self.prompt is not None:
            out["prompt"] = self.prompt
        return out


def read_trail(path: Path, *, limit: int, session: str | None = None) -> list[PromptTrail]:
    """The last ``limit`` prompts of the trail (its old file first), oldest first; [] without one.
    UnsafePathError when a trail file is a symlink, not a regular file or another user's."""
    prompts: list[PromptTrail] = []
    bound: dict[tuple[str, int], PromptTrail] = {}  # (session, handle) -> its prompt
    waiting: dict[str, PromptTrail] = {}  # session -> its latest prompt, not bound to a handle yet
    for record in _records(path.with_name(path.name + ".1")) + _records(path):
        sid = record.get("session")
        if not isinstance(sid, str) or (session is not None and sid != session):
            continue
        if record.get("kind") == "begin":
            roots = record.get("roots")
            prompt = PromptTrail(
                record["t"], sid, [r for r in roots if isinstance(r, str)] if isinstance(roots, list) else [],
                _count(record.get("prompt_chars")), _text(record.get("prompt")),
            )
            prompts.append(prompt)
            waiting[sid] = prompt
            continue
        if record.get("kind") == "refused":
            if sid in waiting:
                waiting.pop(sid).refused = _text(record.get("reason")) or "refused"
            continue
        handle = record.get("handle")
        if not isinstance(handle, int) or isinstance(handle, bool):
            continue
        entry = bound.get((sid, handle))
        if entry is None:
            entry = waiting.pop(sid, None)
            if entry is None:  # its begin is in a file rotated away
                entry = PromptTrail(record["t"], sid)
                prompts.append(entry)
            bound[(sid, handle)] = entry
        if record.get("kind") == "delivery":
            refs = record.get("refs")
            entry.deliveries.append({
                **{k: _text(record.get(k)) for k in ("point", "phase", "strategy", "reason")},
                "refs": [r for r in refs if isinstance(r, str)] if isinstance(refs, list) else [],
                "latency_ms": _number(record.get("latency_ms")),
            })
        elif record.get("kind") == "recall":
            settled = record.get("settled")
            entry.recall = {
                "settled": settled if isinstance(settled, bool) else None,
                **{k: _text(record.get(k)) for k in ("strategy", "fallback")},
                **{k: _count(record.get(k)) for k in ("selected", "scanned")},
                **{k: _number(record.get(k)) for k in ("fast_ms", "model_ms")},
                "model_skipped": record.get("model_skipped") is True,
            }
    return prompts[-limit:] if limit > 0 else []


def trail_sessions(path: Path) -> list[str]:
    """The sessions the trail holds a prompt of (its old file first), in the order they first appear."""
    sessions: dict[str, None] = {}
    for record in _records(path.with_name(path.name + ".1")) + _records(path):
        if record.get("kind") == "begin" and isinstance(record.get("session"), str):
            sessions[record["session"]] = None
    return list(sessions)


def read_enrichments(path: Path, *, limit: int) -> list[dict[str, Any]]:
    """The last ``limit`` background enrichments the trail holds (its old file first), oldest first:
    each with its time, ref, outcome (enriched, failed, preempted), reason and term counts."""
    found = [
        {"t": record["t"], "ref": record["ref"], **{k: _text(record.get(k)) for k in ("outcome", "reason")},
         **{k: _count(record.get(k)) for k in ("keywords", "usage_scenarios")}, "ms": _number(record.get("ms"))}
        for record in _records(path.with_name(path.name + ".1")) + _records(path)
        if record.get("kind") == "enrich" and isinstance(record.get("ref"), str)
    ]
    return found[-limit:] if limit > 0 else []


def describe_enrichment(record: dict[str, Any]) -> str:
    """One background enrichment as a line for a person (still to be cleaned for the terminal)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(record.get("t") or 0)))
    outcome = record.get("outcome")
    if outcome == "enriched":
        what = f"enriched: {record.get('keywords')} keywords, {record.get('usage_scenarios')} usage scenarios"
    elif outcome == "preempted":
        what = "cut short: a prompt needed the model (asked again later)"
    else:
        what = f"failed: {record.get('reason')}"
    return f"{when}  {record.get('ref')}  {what}  ({record.get('ms')} ms)"




def _number(value: object) -> float | None:
    """``value`` when it is a finite number (a JSON bool is not one), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _records(path: Path) -> list[dict[str, Any]]:
    data = read_private(path, _READ_MAX_BYTES)
    if data is None:
        return []
    records = []
    for line in data.decode("utf-8", "replace").splitlines():
        try:
            record = parse_json(line)
        except ValueError:
            continue  # a line cut by a crash or a rotation, or one we never wrote
        when = recorded_time(record.get("t")) if isinstance(record, dict) else None
        if when is not None:  # a planted 1e20 or "soon" is no line of ours
            records.append({**record, "t": when})
    return records


def describe(prompt: PromptTrail) -> list[str]:
    """A prompt's trail as lines for a person (each still to be cleaned for the terminal)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(prompt.time))
    head = f"{when}  session {prompt.session}"
    if prompt.prompt_chars is not None:
        head += f"  prompt of {prompt.prompt_chars} chars"
    lines = [head]
    if prompt.prompt is not None:
        lines.append(f"  prompt: {prompt.prompt!r}")
    for d in prompt.deliveries:
        refs = ", ".join(d.get("refs") or []) or "nothing"
        latency = f"{d.get('latency_ms')} ms"
        if d.get("point") == "discarded":
            why = _REASONS.get(str(d.get("reason")), str(d.get("reason")))
            lines.append(f"  not delivered ({why}): {refs}  [{d.get('phase') or 'before any result'}, {latency}]")
        else:
            chooser = "the model's choice" if d.get("strategy") == "model" else "the fast stage"
            lines.append(f"  {d.get('point')} point, {d.get('phase')}: {refs}  ({chooser}, {latency})")
    recall = prompt.recall
    if recall is not None and recall.get("fallback"):
        lines.append(f"  model fell back: {recall['fallback']}")
    if recall is not None and recall.get("model_skipped") is True:
        lines.append("  model skipped: the fast answer was certain")
    if prompt.refused is not None:
        lines.append(f"  roots refused: {prompt.refused}")
    elif not prompt.deliveries:
        lines.append("  nothing delivered yet")
    return lines


_REASONS = {
    "no_relevant_results": "nothing passed the gate",
    "already_delivered": "already delivered in this session",
    "new_query": "the next prompt came first",
    "no_safe_delivery_point": "the turn ended before a safe point",
    "abort": "aborted",
    "reset": "the session was reset",
    "shutdown": "the session closed",
}
