"""Rendering delivered memories as one block the memory text cannot close or forge."""

from __future__ import annotations

import re
import time
import unicodedata
from typing import Iterable

from memory_store import MemoryDoc
from recall_kit._text import format_age, one_line
from recall_kit.limits import BODY_BUDGET

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


_FIELD_LABELS = ("Title", "Reference", "Age", "Description")
_FORGED_FIELD = re.compile(r"^(?=[ \t]*(?:" + "|".join(_FIELD_LABELS) + r"):)", re.MULTILINE | re.IGNORECASE)


def _fold(ch: str) -> str:
    """One character as a tag matcher sees it: compatibility forms folded (full-width ＜ and
    letters, small-form ﹤) and invisible format characters (zero-width space, joiners) dropped."""
    if ch.isascii():
        return ch
    if unicodedata.category(ch) == "Cf":
        return ""
    folded = unicodedata.normalize("NFKC", ch)
    return folded if len(folded) == 1 else ch


_OPENER = re.compile("[<\uff1c\ufe64]")  # "<" and the forms NFKC folds to it (full-width, small)
_LONGEST_TAG = max(len(t) for t in _PROTECTED_TAGS)


def neutralize(text: str) -> str:
    """Escape any protected tag in memory-supplied text so it reads as text, not markup.

    Tags are found in a folded view of the text, so `<\u200b/memory>` and `＜/ｍｅｍｏｒｙ＞` count;
    the escape is applied to the original characters. Only the few characters after each "<" are
    folded, so a long body costs a regex scan, not a Python loop over every character."""
    if text.isascii():
        return _TAG_PATTERN.sub(r"&lt;\1", text)
    starts = [m.start() for m in _OPENER.finditer(text) if _tag_at(text, m.start())]
    if not starts:
        return text
    pieces, last = [], 0
    for i in starts:
        pieces += [text[last:i], "&lt;"]
        last = i + 1
    pieces.append(text[last:])
    return "".join(pieces)


def _tag_at(text: str, i: int) -> bool:
    """Whether a protected tag opens at ``text[i]`` once folded."""
    end = i + 1
    while end < len(text) and (text[end].isspace() or text[end] in "/\uff0f" or unicodedata.category(text[end]) == "Cf"):
        end += 1
    window = "".join(_fold(ch) for ch in text[i : end + _LONGEST_TAG + 1])
    return _TAG_PATTERN.match(window) is not None


def _unforgeable_body(body: str) -> str:
    """A body line that looks like one of the block's own fields is marked as body text."""
    return _FORGED_FIELD.sub(lambda _: "\\", body)


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
    body = _unforgeable_body(neutralize(doc.body.strip()))
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
