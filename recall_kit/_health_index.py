"""Index drift: what a folder's ``MEMORY.md`` says against the memories the folder holds.

An index lists memories as markdown links, one line each (``- [Title](file.md) — hook``, as both
agents write them). A link to no memory file is dead; a memory its nearest index (in its folder or
the closest above it) never links is unlisted; one linked only past the part the agent loads is
listed past truncation. The agent sees none of the last two through its index, while recall-kit,
which reads the folder itself, still recalls them.

The mending is mechanical and keeps every other byte: a line that is one list entry whose only link
is dead goes, and an entry for each unlisted memory is appended at the end.
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from urllib.parse import quote, unquote

from memory_store import IndexFile, MemoryDoc, MemoryRoot
from recall_kit._health_types import Finding, HealthReport, IndexReader
from recall_kit._secrets import scrub_secrets

# JavaScript's String.prototype.trim, which both agents apply before cutting the index (Python's
# strip differs: it keeps U+FEFF and strips U+001C-U+001F).
_JS_WHITESPACE = "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_LINK = re.compile(r"\[(?:[^\]\\\n]|\\.)*\]\(\s*(<[^>\n]*>|[^)\s]+)(?:\s+[\"'(][^)\n]*)?\s*\)")
_ENTRY = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+")  # a list item's marker
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
ENTRY_DESCRIPTION_CHARS = 150  # both agents ask for index lines "under ~150 characters"
_MARKDOWN_OPENERS = re.compile(r"[\\\[\]<`]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


@dataclass(frozen=True, slots=True)
class IndexLink:
    """One link to a memory in an index: its line (1-based, in the file) and target, relative to the root."""

    line: int
    target: str  # as written
    rel: str  # resolved against the index's folder, relative to the root


@dataclass(frozen=True, slots=True)
class IndexRepair:
    """A mended index: its file, the bytes it was mended from and the new bytes, and what changed."""

    root: str
    rel: str  # the index, relative to its root
    path: str
    old: bytes
    new: bytes
    removed_lines: tuple[int, ...]
    added: tuple[str, ...]  # refs of the memories given an entry

    def diff(self) -> list[str]:
        """The change as a unified diff (lines without their ends), each line's sure secrets blanked as
        doctor shows a line (a removed entry may hold one: its secret finding does not show it); an
        ordinary link (``deploy-notes-v2.md``) is shown as it is written."""
        lines = difflib.unified_diff(
            self.old.decode("utf-8").splitlines(), self.new.decode("utf-8").splitlines(),
            fromfile=self.path, tofile=f"{self.path} (mended)", lineterm="",
        )
        return [line if line.startswith(("---", "+++", "@@")) else line[:1] + scrub_secrets(line[1:], sure_only=True) for line in lines]


def plan_repairs(report: HealthReport) -> list[IndexRepair]:
    """What ``doctor --fix`` would write: each index with fixable findings, mended from the bytes the
    report was made from."""
    repairs = []
    for path, data in sorted(report.index_texts.items()):
        root = max((r.path for r in report.roots if path.startswith(r.path.rstrip("/") + "/")), key=len, default=None)
        if root is None:
            continue
        repair = repair_index(root, path[len(root.rstrip("/")) + 1:], data, report.findings)
        if repair is not None:
            repairs.append(repair)
    return repairs


def apply_repair(repair: IndexRepair) -> Path:
    """Write ``repair`` through the store (atomically, only over the bytes it was made from, after a
    backup); returns the backup's path. MemoryPathError or MemoryStoreError, nothing written, otherwise."""
    return MemoryRoot(repair.root).replace_index(repair.rel, repair.new, expected=repair.old)


def index_links(text: str, index_rel: str) -> list[IndexLink]:
    """Every link of ``text`` (the index at ``index_rel``) to a ``.md`` file inside the root."""
    folder = posixpath.dirname(index_rel)
    links = []
    for number, line in enumerate(text.split("\n"), 1):
        for match in _LINK.finditer(line):
            rel = _resolved(match.group(1), folder)
            if rel is not None:
                links.append(IndexLink(number, match.group(1), rel))
    return links


def _resolved(target: str, folder: str) -> str | None:
    target = target[1:-1] if target.startswith("<") and target.endswith(">") else target
    if not target or target.startswith("#") or _SCHEME.match(target):
        return None
    # a byte that is not UTF-8 stands for itself, as the store names the file (a surrogate escape)
    path = unquote(target.split("#", 1)[0].split("?", 1)[0], errors="surrogateescape")
    if not path.lower().endswith(".md") or path.startswith("/"):
        return None  # absolute paths are the agent's own business: the checks stay inside the root
    joined = posixpath.normpath(posixpath.join(folder, path))
    if joined == ".." or joined.startswith("../"):
        return None
    return joined


def seen_lines(text: str, reader: IndexReader) -> int:
    """How many lines of ``text`` (counted in the file, 1-based) ``reader`` loads whole: it trims the
    text, keeps ``max_lines`` lines, then cuts at the last line break before ``max_chars``."""
    trimmed = text.strip(_JS_WHITESPACE)
    if not trimmed:
        return 0
    lead = text[: len(text) - len(text.lstrip(_JS_WHITESPACE))].count("\n")
    lines = trimmed.split("\n")[: reader.max_lines]
    end = -1  # UTF-16 offset of the current line's end
    whole = 0
    for number, line in enumerate(lines):
        end += 1 + len(line.encode("utf-16-le")) // 2
        if end > reader.max_chars:
            break
        whole = number + 1  # a first line cut in its middle leaves none whole
    return lead + whole


def index_findings(
    root: str,
    label: str,
    indexes: Sequence[IndexFile],
    docs: Sequence[MemoryDoc],
    other_files: Iterable[str],
    reader: IndexReader | None,
) -> list[Finding]:
    """The drift of every index of the folder ``root`` (labelled ``label``): dead links, unlisted
    memories and memories listed past what ``reader`` loads. ``docs``: the folder's memories;
    ``other_files``: paths of files the store lists there but skips (bad files are not dead links)."""
    findings: list[Finding] = []
    readable = {index.rel: index for index in indexes}
    rels = {doc.path: doc for doc in docs}
    present = set(rels) | set(other_files)
    files = MemoryRoot(root, label=label)
    covered: dict[str, list[MemoryDoc]] = {}
    for doc in docs:
        nearest = covering_index(doc.path, readable)
        if nearest is not None:
            covered.setdefault(nearest, []).append(doc)
    for index in indexes:
        path = f"{root}/{index.rel}"
        if index.data is None:
            findings.append(Finding(
                "index_drift", (path,), f"{label}/{index.rel} is {index.problem}.",
                "Make it a regular file of the agent's index, or remove it.", refs=(f"{label}/{index.rel}",),
                detail=MappingProxyType({"problem": "unreadable_index"}),
            ))
            continue
        text = index.data.decode("utf-8", "replace")
        mendable = bool(_decoded(index.data)) or not index.data  # only valid UTF-8 is rewritten
        links = index_links(text, index.rel)
        entries = _entry_lines(text)
        linked: dict[str, list[int]] = {}  # file (relative to the root) -> the lines linking it
        for link in links:
            file = _linked_file(files, link.rel, present)
            if file is not None:
                linked.setdefault(file, []).append(link.line)
                continue
            if posixpath.basename(link.rel) == "MEMORY.md":
                continue
            fixable = mendable and entries.get(link.line) == 1
            findings.append(Finding(
                "index_drift", (path,),
                f"{label}/{index.rel} line {link.line} links to {link.target}, which is no memory file in this folder.",
                "recall-kit doctor --fix removes that line." if fixable else
                f"Edit line {link.line} of {label}/{index.rel} by hand: it holds more than that one entry.",
                refs=(f"{label}/{index.rel}",), line=link.line, fixable=fixable,
                detail=MappingProxyType({"problem": "dead_link", "target": link.target}),
            ))
        seen = seen_lines(text, reader) if reader is not None else None
        for doc in sorted(covered.get(index.rel, ()), key=lambda d: d.path):
            lines = linked.get(doc.path)
            where = f"{root}/{doc.path}"
            if not lines:
                who = reader.title if reader is not None else "an agent reading the index"
                findings.append(Finding(
                    "index_drift", (path, where),
                    f"{doc.ref} is not listed in {label}/{index.rel}: {who} never sees it there; recall-kit still recalls it.",
                    "recall-kit doctor --fix adds its entry at the end of the index." if mendable else
                    f"Add its entry to {label}/{index.rel} by hand (the index is not valid UTF-8).",
                    refs=(f"{label}/{index.rel}", doc.ref), fixable=mendable,
                    detail=MappingProxyType({"problem": "unlisted", "entry": entry_line(doc, posixpath.dirname(index.rel))}),
                ))
            elif reader is not None and seen is not None and min(lines) > seen:
                findings.append(Finding(
                    "index_drift", (path, where),
                    f"{doc.ref} is listed in {label}/{index.rel} only at line {min(lines)}, past the {seen} lines "
                    f"{reader.title} loads: the agent itself never sees it; recall-kit still recalls it.",
                    f"Move its entry above line {seen + 1}, or shorten the index ({reader.title} loads "
                    f"{reader.max_lines} lines, {reader.max_chars:,} characters).",
                    refs=(f"{label}/{index.rel}", doc.ref), line=min(lines),
                    detail=MappingProxyType({"problem": "past_truncation", "loaded_lines": seen}),
                ))
    return findings


def _linked_file(files: MemoryRoot, rel: str, present: AbstractSet[str]) -> str | None:
    """The file of ``present`` (paths relative to the root) a link to ``rel`` reaches: itself, or the
    one it leads to through symlinks inside the root (a symlinked folder, which the store does not
    enter, is still a way to a memory); None when it reaches none."""
    if rel in present:
        return rel
    target = files.linked_path(rel)
    return target if target in present else None


def _decoded(data: bytes) -> str:
    """``data`` as UTF-8, or "" when it is not: only an index of valid UTF-8 is mended."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return ""


def covering_index(memory_rel: str, indexes: Mapping[str, object]) -> str | None:
    """The index (relative path) nearest above the memory at ``memory_rel``: in its folder or the closest above."""
    folder = posixpath.dirname(memory_rel)
    while True:
        candidate = f"{folder}/MEMORY.md" if folder else "MEMORY.md"
        if candidate in indexes:
            return candidate
        if not folder:
            return None
        folder = posixpath.dirname(folder)


def _entry_lines(text: str) -> dict[int, int]:
    """Line number -> how many links it holds, for each line that is one list item."""
    return {
        number: len(_LINK.findall(line))
        for number, line in enumerate(text.split("\n"), 1)
        if _ENTRY.match(line)
    }


def repair_index(root: str, rel: str, data: bytes, findings: Sequence[Finding]) -> IndexRepair | None:
    """The index ``rel`` of the folder ``root``, whose bytes were ``data`` when ``findings`` were made,
    with the fixable ones about it mended: each dead entry's line removed, and an entry appended for
    each unlisted memory. None when nothing changes or the index is not valid UTF-8."""
    text = _decoded(data)
    if not text and data:
        return None
    path = f"{root}/{rel}"
    mine = [f for f in findings if f.fixable and f.kind == "index_drift" and f.files and f.files[0] == path]
    dead = {f.line for f in mine if f.detail.get("problem") == "dead_link" and f.line is not None}
    entries = [(f.refs[1], str(f.detail["entry"])) for f in mine if f.detail.get("problem") == "unlisted"]
    if not dead and not entries:
        return None
    kept = [piece for number, piece in enumerate(re.split(r"(?<=\n)", text), 1) if number not in dead]
    if entries:
        newline = "\r\n" if text.count("\r\n") * 2 > text.count("\n") else "\n"
        if "".join(kept) and not "".join(kept).endswith("\n"):
            kept.append(newline)
        kept += [entry + newline for _, entry in entries]
    return IndexRepair(root, rel, path, data, "".join(kept).encode("utf-8"), tuple(sorted(dead)),
                       tuple(ref for ref, _ in entries))


def entry_line(doc: MemoryDoc, folder: str) -> str:
    """The index entry for ``doc`` as both agents write one: ``- [Title](path) — hook``, its text on
    one line and markdown-escaped (a memory's own characters cannot start a line, end the title or
    start a link, an image or a code span) and its path relative to the index's ``folder``,
    percent-encoded where markdown would break it."""
    title = _escaped(_one_line(doc.name))
    hook = _one_line(doc.description)
    if len(hook) > ENTRY_DESCRIPTION_CHARS:
        hook = hook[: ENTRY_DESCRIPTION_CHARS - 1].rstrip() + "…"
    hook = _escaped(hook)
    # the file name's own bytes: one that is not UTF-8 (kept as a surrogate escape) is percent-encoded as itself
    target = quote(posixpath.relpath(doc.path, folder or "."), safe="/-_.~", errors="surrogateescape")
    return f"- [{title}]({target})" + (f" — {hook}" if hook else "")


def _escaped(text: str) -> str:
    """``text`` with a backslash before each character that could end a link's title or start a link,
    an image (``![``), an autolink or inline HTML (``<``), or a code span that swallows the link."""
    return _MARKDOWN_OPENERS.sub(r"\\\g<0>", text)


def _one_line(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", text).split())
