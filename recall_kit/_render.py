"""Rendering delivered memories as one block the memory text cannot close or forge."""

from __future__ import annotations

import re
import time
from typing import Iterable

from memory_store import MemoryDoc
from recall_kit._text import format_age, one_line

BODY_BUDGET = 1200  # characters of body per document (DESIGN.md section 5)
WRAPPER_TAG = "recalled-memories"
DOC_TAG = "memory"
HEADING = "# Recalled memories"
INSTRUCTION = (
    "Use a memory below only if it is relevant to the current request; otherwise ignore it."
)

# Tags memory text must never be able to open or close: our own two, and the system-reminder
# wrapper agents put the block in. `< /memory`, `<MEMORY` and `<\tmemory` count too.
_PROTECTED_TAGS = (WRAPPER_TAG, DOC_TAG, "system-reminder")
_TAG_PATTERN = re.compile(
    r"<(\s*/?\s*(?:" + "|".join(re.escape(t) for t in _PROTECTED_TAGS) + r"))(?![\w-])",
    re.IGNORECASE,
)


def neutralize(text: str) -> str:
    """Escape any protected tag in memory-supplied text so it reads as text, not markup."""
    return _TAG_PATTERN.sub(r"&lt;\1", text)


def _one_line(text: str) -> str:
    return neutralize(one_line(text))


def _truncate(body: str, budget: int, ref: str) -> str:
    if len(body) <= budget:
        return body
    cut = body[:budget]
    # end on a line or word boundary when one is near, so the cut reads cleanly
    for sep in ("\n", " "):
        at = cut.rfind(sep)
        if at >= budget * 0.8:
            cut = cut[:at]
            break
    cut = cut.rstrip()
    return f"{cut}\n[... truncated: {len(cut)} of {len(body)} characters shown; the rest is in {ref}]"


def render_doc(doc: MemoryDoc, *, now: float, body_budget: int = BODY_BUDGET) -> str:
    ref = _one_line(doc.ref)
    lines = [
        f"<{DOC_TAG}>",
        f"Title: {_one_line(doc.name)}",
        f"Reference: {ref}",
        f"Age: {format_age(now - doc.mtime, compact=False)}",
        f"Description: {_one_line(doc.description)}",
    ]
    body = neutralize(doc.body.strip())
    if body:
        lines += ["", _truncate(body, body_budget, ref)]
    lines.append(f"</{DOC_TAG}>")
    return "\n".join(lines)


def render_memories(
    docs: Iterable[MemoryDoc], *, now: float | None = None, body_budget: int = BODY_BUDGET
) -> str:
    """One block: heading, instruction, then per doc its title, reference, age, description, body.

    Returns "" when there are no documents.
    """
    docs = list(docs)
    if not docs:
        return ""
    now = time.time() if now is None else now
    parts = [f"<{WRAPPER_TAG}>\n{HEADING}\n{INSTRUCTION}"]
    parts += [render_doc(d, now=now, body_budget=body_budget) for d in docs]
    parts.append(f"</{WRAPPER_TAG}>")
    return "\n\n".join(parts)
