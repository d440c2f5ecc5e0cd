"""Scripted replies of the test chat server: what one request gets back."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from recall_kit._errors import UsageError
from recall_kit._manifest import manifest_text

ANSWER_KEY = "selected_memories"
INVENTED_REFS = ("nowhere/invented-memory.md", "notes/imaginary-project.md")
ESCAPING_REFS = ("../../etc/passwd", "/etc/passwd", "memories/../../secrets.md")


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer. Build with the class methods; ``.after(ms)`` sets its latency."""

    kind: str
    refs: tuple[str, ...] = ()
    count: int = 0  # how many valid manifest refs to mix in, or how many for too_many
    status: int = 200
    message: str = ""
    retry_after: str | None = None
    interval_ms: float = 1000.0
    latency_ms: float | None = None  # None: the server's latency profile

    def after(self, latency_ms: float) -> "Reply":
        """The same reply, answered after ``latency_ms`` instead of the server's latency profile."""
        return replace(self, latency_ms=latency_ms)

    # -- answers with a chat completion -------------------------------------------------------
    @classmethod
    def select(cls, *refs: str) -> "Reply":
        """A completion selecting exactly ``refs``."""
        return cls("select", refs=refs)

    @classmethod
    def oracle(cls) -> "Reply":
        """A completion selecting the oracle's relevant refs for the query (none without an oracle)."""
        return cls("oracle")

    @classmethod
    def empty(cls) -> "Reply":
        """A completion selecting nothing."""
        return cls("select")

    @classmethod
    def hallucinated(cls, valid: int = 0) -> "Reply":
        """A completion selecting ``valid`` manifest refs, then refs that are in no manifest."""
        return cls("hallucinated", count=valid)

    @classmethod
    def traversal(cls, valid: int = 0) -> "Reply":
        """A completion selecting ``valid`` manifest refs, then refs escaping the root (``../../etc/passwd``, ...)."""
        return cls("traversal", count=valid)

    @classmethod
    def duplicates(cls) -> "Reply":
        """A completion selecting the first two manifest refs, each twice."""
        return cls("duplicates")

    @classmethod
    def too_many(cls, n: int = 8) -> "Reply":
        """A completion selecting the first ``n`` manifest refs (by default more than a selection may hold)."""
        return cls("too_many", count=n)

    @classmethod
    def wrong_types(cls) -> "Reply":
        """A completion whose list holds a number, null, an object and a list instead of refs."""
        return cls("wrong_types")

    @classmethod
    def non_json(cls) -> "Reply":
        """A completion in prose, with no JSON in it."""
        return cls("non_json")

    @classmethod
    def truncated_json(cls) -> "Reply":
        """A completion whose JSON is cut off before its end."""
        return cls("truncated_json")

    @classmethod
    def code_fence(cls, *refs: str) -> "Reply":
        """The answer's JSON inside a Markdown code fence: ``refs``, else the oracle's, else the first manifest ref."""
        return cls("code_fence", refs=refs)

    @classmethod
    def prose_json(cls, *refs: str) -> "Reply":
        """The answer's JSON between lines of prose: ``refs``, else the oracle's, else the first manifest ref."""
        return cls("prose_json", refs=refs)

    @classmethod
    def content(cls, text: str) -> "Reply":
        """A completion whose message content is exactly ``text``."""
        return cls("content", message=text)

    # -- answers without a usable completion --------------------------------------------------
    @classmethod
    def error(cls, status: int, message: str = "scripted error", retry_after: float | str | None = None) -> "Reply":
        """An error ``status`` with body ``{"error": {"message": message}}`` and, when given, a Retry-After header."""
        after = None if retry_after is None else str(retry_after)
        return cls("error", status=status, message=message, retry_after=after)

    @classmethod
    def raw_error(cls, status: int, body: str) -> "Reply":
        """An error status whose body is exactly ``body``, not the usual ``{"error": ...}``."""
        return cls("raw_error", status=status, message=body)

    @classmethod
    def reject_json_schema(cls) -> "Reply":
        """A 400 refusing ``response_format`` type json_schema, as a server without it answers."""
        return cls.error(400, "response_format type json_schema is not supported")

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = 1) -> "Reply":
        """A 429 whose Retry-After header is ``retry_after`` (no header when None)."""
        return cls.error(429, "rate limited", retry_after)

    @classmethod
    def malformed_body(cls) -> "Reply":
        """A 200 whose body is HTML, not a completion."""
        return cls("malformed_body")

    @classmethod
    def reset(cls) -> "Reply":
        """No answer: the connection is reset (TCP RST)."""
        return cls("reset")

    @classmethod
    def hang(cls) -> "Reply":
        """No answer: the request is held until the client hangs up or the server stops."""
        return cls("hang")

    @classmethod
    def drip(cls, interval_ms: float = 1000.0, *refs: str) -> "Reply":
        """A valid answer (``refs``, else the oracle's) sent one byte per ``interval_ms``."""
        return cls("drip", refs=refs, interval_ms=interval_ms)


# Names usable as a marker in a query, e.g. "deploy notes [[scripted:hang]]".
REPLY_BY_NAME: Mapping[str, Reply] = {
    "oracle": Reply.oracle(),
    "empty": Reply.empty(),
    "hallucinated": Reply.hallucinated(),
    "traversal": Reply.traversal(),
    "duplicates": Reply.duplicates(),
    "too_many": Reply.too_many(),
    "wrong_types": Reply.wrong_types(),
    "non_json": Reply.non_json(),
    "truncated_json": Reply.truncated_json(),
    "code_fence": Reply.code_fence(),
    "prose_json": Reply.prose_json(),
    "reject_json_schema": Reply.reject_json_schema(),
    "401": Reply.error(401, "invalid api key"),
    "429": Reply.rate_limited(1),
    "500": Reply.error(500, "internal error"),
    "503": Reply.error(503, "overloaded"),
    "malformed_body": Reply.malformed_body(),
    "reset": Reply.reset(),
    "hang": Reply.hang(),
    "drip": Reply.drip(),
}


class Oracle:
    """Relevant documents per query text, from an eval dataset's queries.jsonl."""

    def __init__(self, queries_jsonl: str | Path) -> None:
        self.relevant: dict[str, tuple[str, ...]] = {}
        for line in Path(queries_jsonl).read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                self.relevant[manifest_text(row["query"])] = tuple(row.get("relevant", ()))

    def refs(self, query: str, manifest_refs: Sequence[str]) -> list[str]:
        """Manifest refs whose path (after the scope label) is relevant to ``query``."""
        wanted = set(self.relevant.get(manifest_text(query), ()))
        return [r for r in manifest_refs if r in wanted or r.partition("/")[2] in wanted]


def answer_text(reply: Reply, query: str, manifest_refs: Sequence[str], oracle: Oracle | None) -> str:
    """The assistant message content for a reply that answers with a completion."""
    chosen = list(reply.refs) or (oracle.refs(query, manifest_refs) if oracle else [])
    valid = list(manifest_refs[: reply.count])
    first_two = list(manifest_refs[:2])
    payload: dict[str, list[Any]]
    match reply.kind:
        case "content":
            return reply.message
        case "non_json":
            return "The first memory looks relevant, the others do not."
        case "truncated_json":
            return json.dumps({ANSWER_KEY: first_two or ["a.md"]})[:-8]
        case "select":
            payload = {ANSWER_KEY: list(reply.refs)}
        case "oracle" | "drip":
            payload = {ANSWER_KEY: chosen}
        case "hallucinated":
            payload = {ANSWER_KEY: valid + list(INVENTED_REFS)}
        case "traversal":
            payload = {ANSWER_KEY: valid + list(ESCAPING_REFS)}
        case "duplicates":
            payload = {ANSWER_KEY: [r for r in first_two for _ in range(2)]}
        case "too_many":
            payload = {ANSWER_KEY: list(manifest_refs[: reply.count])}
        case "wrong_types":
            payload = {ANSWER_KEY: [42, None, {"ref": first_two[0] if first_two else "x"}, ["nested"]]}
        case "code_fence":
            return f"```json\n{json.dumps({ANSWER_KEY: chosen or first_two[:1]})}\n```"
        case "prose_json":
            return f"Sure! Here is my selection:\n{json.dumps({ANSWER_KEY: chosen or first_two[:1]})}\nHope this helps."
        case _:
            raise UsageError(f"reply kind {reply.kind!r} has no completion text")
    return json.dumps(payload)
