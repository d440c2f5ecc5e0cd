"""Rendering delivered memories as one block the memory text cannot close or forge."""

from __future__ import annotations

import re
import time
import unicodedata
from typing import Iterable

from memory_store import MemoryDoc, shown_ref
from recall_kit._text import format_age, one_line
from recall_kit.limits import BODY_BUDGET, RENDER_FIELD_CHARS, RENDER_MAX_CHARS

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
# A body line that reads as one of the block's own lines: a field, the heading, a truncation note.
_OWN_LINE = r"[ \t]*(?:(?:" + "|".join(_FIELD_LABELS) + r")[ \t]*:|#[ \t]*Recalled memories|\[\.\.\. truncated)"
# A line starts after a line feed or a lone carriage return (an agent's terminal and its model read
# both as one); in a body that is not ASCII, after U+2028 and U+2029 too (U+0085 is escaped below).
_FORGED_ASCII = re.compile(r"(?:^|(?<=\r))(?=" + _OWN_LINE + ")", re.MULTILINE | re.IGNORECASE)
_LINE_BREAK = re.compile("([\n\r\u2028\u2029])")
_FORGED_FOLDED = re.compile(_OWN_LINE, re.IGNORECASE)
_OWN_LINE_STARTS = frozenset("TtRrAaDd#[")
_FORGE_SCAN = 40  # visible characters of a line's head compared: the longest own line's start is 19
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # all but tab, line feed, carriage return


# Invisible characters that are not format characters (Cf): the combining grapheme joiner, the
# Hangul fillers, and the variation selectors.
_INVISIBLE = frozenset("\u034f\u115f\u1160\u3164\uffa0\u180b\u180c\u180d\u180f") | frozenset(
    map(chr, [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0)])
)
_MAX_TAG_SCAN = 256  # characters looked at after a "<": a tag padded with more invisibles is not read as one


def _fold(ch: str) -> str:
    """One character as a tag matcher sees it: compatibility forms folded (full-width ＜ and
    letters, small-form ﹤) and invisible characters (zero-width space, joiners, the combining
    grapheme joiner, variation selectors) dropped."""
    if ch.isascii():
        return ch
    if unicodedata.category(ch) == "Cf" or ch in _INVISIBLE:
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
    """Whether a protected tag opens at ``text[i]`` once folded: the "<", then what follows folded
    until the longest tag and one more character are seen (invisibles fold away, however many pad
    the name). A "<" whose next ``_MAX_TAG_SCAN`` characters do not get that far counts as one: it
    is escaped rather than read further (bounded work; "&lt;" reads the same)."""
    seen: list[str] = []
    visible = 0
    for ch in text[i : i + _MAX_TAG_SCAN]:
        folded = _fold(ch)
        seen.append(folded)
        if folded and not (folded.isspace() or folded == "/"):
            visible += 1
            if visible > _LONGEST_TAG + 1:  # "<" and the name's letters, and the one after them
                break
    else:
        if i + _MAX_TAG_SCAN < len(text):
            return True
    return _TAG_PATTERN.match("".join(seen)) is not None


def _unforgeable_body(body: str, shown_at_most: int) -> str:
    """A body line (after any line break, a carriage return or U+2028 too) that looks like one of the
    block's own lines (a field, the heading, a truncation note), read folded as tags are (``Ｔitle:``, ``Title\u200b:``), is marked as body text; a control
    character other than a line break, a carriage return or a tab is shown escaped (``\x1b``), as
    ``query`` shows it. Folded lines are looked at within the first ``shown_at_most`` characters only:
    no more of a body is ever shown."""
    if not body.isascii():
        head, rest = body[:shown_at_most], body[shown_at_most:]
        pieces = _LINE_BREAK.split(head)  # lines at even places, the breaks between them at odd ones
        pieces[::2] = ["\\" + line if _forged_line(line) else line for line in pieces[::2]]
        body = "".join(pieces) + rest
    body = _FORGED_ASCII.sub(lambda _: "\\", body)
    return _CONTROL.sub(lambda m: ascii(m.group())[1:-1], body)


def _forged_line(line: str) -> bool:
    """Whether ``line``, folded, starts as one of the block's own lines."""
    if line[:1].isascii() and line[:1] not in _OWN_LINE_STARTS and line[:1] not in " \t":
        return False  # most lines: their first character already rules it out
    folded: list[str] = []
    visible = 0
    for ch in line[:_MAX_TAG_SCAN]:
        folded_ch = _fold(ch)
        if folded_ch.isspace():
            folded_ch = " "  # any space a reader sees as one (U+1680, which NFKC keeps, too)
        folded.append(folded_ch)
        if folded_ch != " " and folded_ch:
            if visible == 0 and folded_ch not in _OWN_LINE_STARTS:
                return False
            visible += 1
            if visible >= _FORGE_SCAN:
                break
    return _FORGED_FOLDED.match("".join(folded)) is not None


def _field(text: str, limit: int = RENDER_FIELD_CHARS) -> str:
    """A title, reference or description as one neutralized line of at most ``limit`` characters
    of its own, with a note when it was cut (only the head is ever scanned: bounded work)."""
    raw = text.strip()
    line = neutralize(one_line(raw[: limit * 2]))  # one_line only shrinks: twice the limit is enough
    if len(line) <= limit and len(raw) <= limit * 2:
        return line
    shown = _clip(line, limit)
    return f"{shown} [... truncated: {len(shown)} of {len(raw)} characters shown]"


def _clip(text: str, limit: int) -> str:
    """The first ``limit`` characters of neutralized text, ending on a word boundary when one is
    near; a cut that leaves a bare tag name at the end (``<memoryview`` -> ``<memory``) is escaped."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    for sep in ("\n", " "):  # end on a line or word boundary when one is near, so the cut reads cleanly
        at = cut.rfind(sep)
        if at >= limit * 0.8:
            cut = cut[:at]
            break
    return neutralize(cut.rstrip())


def _body(body: str, room: int, body_budget: int, ref: str) -> str:
    """``body`` whole when it fits both ``room`` (what the block has left for it) and
    ``body_budget``, else its head and a note saying where the rest is: never over ``room``."""
    if len(body) <= min(room, body_budget):
        return body
    note = f"\n[... truncated: {len(body)} of {len(body)} characters shown; the rest is in {ref}]"  # the longest it gets
    keep = min(body_budget, room - len(note) - _ESCAPE_SLACK)
    if keep <= 0 or (keep < body_budget and keep < _MIN_BODY_SHOWN):  # squeezed by the block, not by the caller's budget
        return _body_not_shown(body, ref)
    cut = _clip(body, keep)
    return f"{cut}\n[... truncated: {len(cut)} of {len(body)} characters shown; the rest is in {ref}]"


def _body_not_shown(body: str, ref: str) -> str:
    return f"[... body not shown: {len(body)} characters; it is in {ref}]"


_ESCAPE_SLACK = 3  # _clip may escape one tag name it leaves at the end: "<" becomes "&lt;"
_MIN_BODY_SHOWN = 80  # fewer characters of a body say less than the note about where it is


def _head(doc: MemoryDoc, ref: str, now: float) -> str:
    return "\n".join([
        f"<{DOC_TAG}>",
        f"Title: {_field(doc.name)}",
        f"Reference: {ref}",
        f"Age: {format_age(now - doc.mtime, compact=False)}",
        f"Description: {_field(doc.description)}",
    ])


def render_memories(
    docs: Iterable[MemoryDoc],
    *,
    now: float | None = None,
    body_budget: int = BODY_BUDGET,
    budget: int = RENDER_MAX_CHARS,
) -> str:
    """One block: heading, instruction, then per doc its title, reference, age, description, body.

    The whole block is at most ``budget`` characters: each field is cut to ``RENDER_FIELD_CHARS``,
    each body to ``body_budget`` and to its share of what the fields leave, every cut with a note
    saying so; documents that would not fit even so are left out, and a last line says how many.
    Returns "" when there are no documents.
    """
    docs = list(docs)
    if not docs:
        return ""
    now = time.time() if now is None else now
    opening, closing = f"<{WRAPPER_TAG}>\n{HEADING}\n{INSTRUCTION}", f"</{WRAPPER_TAG}>"
    parts: list[tuple[str, str, str, int]] = []  # (head, ref, body, the least the doc costs: its separator, head, end tag and shortest body note)
    for doc in docs:
        ref = _field(shown_ref(doc.ref))  # a file name's byte that is not UTF-8 as \xNN, as the CLI shows it
        head, body = _head(doc, ref, now), _unforgeable_body(neutralize(doc.body.strip()), budget)
        parts.append((head, ref, body, len(_SEP) + len(head) + len(_END) + _least_body(body, ref)))
    room = budget - len(opening) - len(_SEP) - len(closing)
    left_out: list[str] = []
    while parts and sum(p[3] for p in parts) + sum(len(_SEP) + len(n) for n in left_out) > room:
        parts.pop()
        left_out = [f"[... {len(docs) - len(parts)} more memories not shown: the block holds at most {budget} characters]"]
    spare = room - sum(len(_SEP) + len(n) for n in left_out) - sum(p[3] for p in parts)  # what bodies may take beyond their shortest note
    with_body = sum(1 for p in parts if p[2])
    blocks = []
    for head, ref, body, _least in parts:
        if not body:
            blocks.append(head + _END)
            continue
        floor = _least_body(body, ref)
        allowed = floor + spare // with_body  # an even share of what is left; a short body hands the rest on
        shown = _SEP + _body(body, allowed - len(_SEP), body_budget, ref)
        spare -= len(shown) - floor
        with_body -= 1
        blocks.append(head + shown + _END)
    return _SEP.join([opening, *blocks, *left_out, closing])


_SEP = "\n\n"
_END = f"\n</{DOC_TAG}>"


def _least_body(body: str, ref: str) -> int:
    """What a body costs at the least: its separator and the note saying where it is (none without a body)."""
    return len(_SEP) + len(_body_not_shown(body, ref)) if body else 0
