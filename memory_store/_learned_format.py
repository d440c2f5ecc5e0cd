"""What the model's refined selections taught, per memory: learned keys and suppressors, kept beside the memories.

One JSON object a line: ``{"path": <POSIX path relative to the root>, "keys": [[term, count, seen], ...],
"suppressors": [[[term, ...], count, seen], ...]}``; other keys are ignored. The file is a log: an
update appends the whole new entry of each memory it changed, a later line for a path replaces the
earlier one, and a line that keeps nothing (``{"path": ...}`` alone) forgets the path. It is
compacted (rewritten with one line a memory) when superseded lines make up half of it, and whenever
a memory is forgotten. Keyed by
path, not by content hash: what was learned for a memory survives its edits. Every line is
untrusted: validated and cleaned on the way in and on the way out, and bounded (MAX_LEARNED_KEYS
keys, MAX_SUPPRESSORS suppressors, MAX_LEARNED_TERMS terms a suppressor, MAX_LEARNED_TERM_CHARS
characters a term, counts capped at MAX_COUNT, a "last seen" that is a ``recorded_time`` or the item dropped).
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from memory_store._fd import SidecarProblem
from memory_store._json import line_problem, parse_json, recorded_time
from memory_store._terms import DROP_CATEGORIES, INSPECT_FACTOR, valid_path
from memory_store._types import Learned

LEARNED_PATH = ".recall-kit/learned.jsonl"  # relative to a root; hidden, so never scanned as a memory
MAX_LEARNED_KEYS = 48  # per memory; the least used dropped first (lowest count, then oldest)
MAX_SUPPRESSORS = 16  # per memory; the least used dropped first
MAX_LEARNED_TERMS = 16  # terms in one update / one suppressor
MAX_LEARNED_TERM_CHARS = 40
MAX_LEARNED_BYTES = 32 * 1024 * 1024  # a full entry is under 16 KiB; a typical one under 1 KiB
MAX_LEARNED_LINE_BYTES = 128 * 1024  # a full entry of non-ASCII terms, each escaped, is under 80 KiB
MAX_COUNT = 1_000_000_000  # a count beyond this is capped: it orders terms, it is no tally to keep exact
MAX_REPORTED_PROBLEMS = 20  # a file of 100,000 bad lines is one short report, not 100,000 errors
RELEASE_OVERLAP = 0.5  # Jaccard overlap at which a release drops a suppressor
# A suppressor holds its memory back only once it was taught this often: one model answer (a model that
# answers [] to everything, or one wrong answer) never silences a memory alone; a second agrees.
SUPPRESSOR_MIN_COUNT = 2


@dataclass(frozen=True, slots=True)
class LearnedTerm:
    """One learned key: the term, how often it was learned, and when last (unix seconds)."""

    term: str
    count: int
    seen: float


Suppressor = tuple[frozenset[str], int, float]  # (terms, count, seen)


@dataclass(frozen=True, slots=True)
class LearnedEntry:
    """One line of learned.jsonl: what was learned for the memory at ``path``."""

    path: str  # the memory's POSIX path relative to its root
    keys: tuple[LearnedTerm, ...] = ()
    suppressors: tuple[Suppressor, ...] = ()

    @property
    def learned(self) -> Learned:
        """The entry as the Learned a doc carries: its keys, and the suppressors taught SUPPRESSOR_MIN_COUNT times."""
        return Learned(
            tuple(k.term for k in self.keys), tuple(s[0] for s in self.suppressors if s[1] >= SUPPRESSOR_MIN_COUNT)
        )


@dataclass(frozen=True, slots=True)
class LearningUpdate:
    """What one refined selection teaches one memory."""

    path: str
    keys: tuple[str, ...] = ()  # add these terms (count += 1, seen = now)
    suppress: frozenset[str] = frozenset()  # add (or count up) this suppressor
    release: frozenset[str] = frozenset()  # drop suppressors overlapping these terms (Jaccard >= 0.5)


# --- cleaning ------------------------------------------------------------------------------------


def clean_term(value: object) -> str | None:
    """``value`` as a learned term (case-folded, no whitespace, markup, control or format characters, at most
    MAX_LEARNED_TERM_CHARS), or None when it is not one. A bad term is dropped, never repaired:
    a repaired term would be another word."""
    if not isinstance(value, str) or not value or len(value) > MAX_LEARNED_TERM_CHARS * 2:
        return None
    term = value.casefold()
    if len(term) > MAX_LEARNED_TERM_CHARS:
        return None
    for ch in term:
        if ch.isspace() or ch in "<>" or unicodedata.category(ch) in DROP_CATEGORIES:  # <>: never markup
            return None
    return term


def clean_term_set(values: object) -> tuple[str, ...]:
    """Untrusted terms as learned terms: bad ones dropped, duplicates once, at most MAX_LEARNED_TERMS,
    the work bounded whatever the input's size."""
    if isinstance(values, (set, frozenset)):
        values = sorted(v for v in values if isinstance(v, str))[: MAX_LEARNED_TERMS * INSPECT_FACTOR]
    if not isinstance(values, (list, tuple)):
        return ()
    terms: dict[str, None] = {}
    for value in values[: MAX_LEARNED_TERMS * INSPECT_FACTOR]:
        term = clean_term(value)
        if term is not None:
            terms[term] = None
            if len(terms) >= MAX_LEARNED_TERMS:
                break
    return tuple(terms)


def _count(value: object) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    return min(value, MAX_COUNT)


def _seen(value: object) -> float | None:
    return recorded_time(value)  # a planted 1e20 would overflow every reader's clock


def _by_use(item: LearnedTerm | Suppressor) -> tuple[int, float]:
    """Sort key, most used first: higher count, then more recent."""
    if isinstance(item, LearnedTerm):
        return (-item.count, -item.seen)
    return (-item[1], -item[2])


def bounded(
    entry: LearnedEntry, taught: frozenset[str] = frozenset(), suppressed: frozenset[str] = frozenset()
) -> LearnedEntry:
    """The entry with its keys and suppressors each ordered most used first and cut to their limits. The
    keys ``taught`` and the suppressor ``suppressed`` just now are kept whatever the others' counts (they
    displace the least used), so a full entry, even one planted with counts of 1e9, still learns."""
    keys = sorted(entry.keys, key=lambda k: (*_by_use(k), k.term))
    if taught:
        keys = [k for k in keys if k.term in taught] + [k for k in keys if k.term not in taught]
    sups = sorted(entry.suppressors, key=lambda s: (*_by_use(s), sorted(s[0])))
    if suppressed:
        sups = [s for s in sups if s[0] == suppressed] + [s for s in sups if s[0] != suppressed]
    keys, sups = keys[:MAX_LEARNED_KEYS], sups[:MAX_SUPPRESSORS]
    keys.sort(key=lambda k: (*_by_use(k), k.term))  # the file and the reader see them most used first
    sups.sort(key=lambda s: (*_by_use(s), sorted(s[0])))
    return LearnedEntry(entry.path, tuple(keys), tuple(sups))


# --- merging -------------------------------------------------------------------------------------


def merge_update(entry: LearnedEntry | None, update: LearningUpdate, now: float) -> LearnedEntry | None:
    """``entry`` after ``update`` (terms cleaned, limits kept); None when nothing is left to keep.

    Raises ValueError with a one-line reason when the update's path is invalid.
    """
    path = valid_path(update.path)
    keys = {k.term: k for k in entry.keys} if entry is not None else {}
    sups = {s[0]: s for s in entry.suppressors} if entry is not None else {}
    release = frozenset(clean_term_set(update.release))
    if release:
        sups = {terms: s for terms, s in sups.items() if not releases(terms, release)}
    taught = clean_term_set(update.keys)
    for term in taught:
        old = keys.get(term)
        keys[term] = LearnedTerm(term, min((old.count if old else 0) + 1, MAX_COUNT), now)
    suppress = frozenset(clean_term_set(update.suppress))
    if suppress:
        old_s = sups.get(suppress)
        sups[suppress] = (suppress, min((old_s[1] if old_s else 0) + 1, MAX_COUNT), now)
    if not keys and not sups:
        return None
    return bounded(LearnedEntry(path, tuple(keys.values()), tuple(sups.values())), frozenset(taught), suppress)


def releases(suppressor: frozenset[Hashable], release: frozenset[Hashable]) -> bool:
    """Whether a release for the words ``release`` drops the suppressor taught for ``suppressor``:
    the two overlap by ``RELEASE_OVERLAP`` (Jaccard) or more. Learning applies the same rule to the
    suppressors still waiting in its memory, whose words it holds only as hashes."""
    union = len(suppressor | release)
    return union > 0 and len(suppressor & release) / union >= RELEASE_OVERLAP


def merge_updates(
    entries: dict[str, LearnedEntry], updates: Iterable[LearningUpdate], now: float | None = None
) -> set[str]:
    """Apply ``updates`` to ``entries`` in place; the paths whose entry changed (or went).

    Raises ValueError naming the path when an update is not one or its path is invalid; nothing is
    applied then.
    """
    when = round(time.time() if now is None else now, 3)  # to the millisecond, as the file keeps it
    merged: dict[str, LearnedEntry | None] = {}
    for update in updates:
        if not isinstance(update, LearningUpdate):
            raise ValueError(f"expected a LearningUpdate, got {type(update).__name__}")
        try:
            base = merged[update.path] if update.path in merged else entries.get(update.path)
            merged[update.path] = merge_update(base, update, when)
        except ValueError as exc:
            raise ValueError(f"invalid learning update for {str(update.path)[:200]!r}: {exc}") from None
    changed: set[str] = set()
    for path, entry in merged.items():
        if entry is None:
            if entries.pop(path, None) is not None:
                changed.add(path)
        elif entries.get(path) != entry:
            entries[path] = entry
            changed.add(path)
    return changed


# --- the file ------------------------------------------------------------------------------------


def entry_line(entry: LearnedEntry) -> str:
    """The entry as one line of the file, newline included."""
    obj = {
        "path": entry.path,
        "keys": [[k.term, k.count, round(k.seen, 3)] for k in entry.keys],
        "suppressors": [[sorted(terms), count, round(seen, 3)] for terms, count, seen in entry.suppressors],
    }
    return json.dumps(obj, separators=(",", ":")) + "\n"  # ASCII escapes: any path round-trips


@dataclass
class LogRead:
    """What reading (part of) the log found: the problems, the paths its lines set or forgot, how many
    lines it read and how many bytes. A last line without its newline is read only when it is a whole
    entry; otherwise it is neither read nor reported (a writer may be appending it, or a crash cut it
    short, and the next compaction drops it)."""

    problems: list[SidecarProblem]
    touched: set[str]
    lines: int
    consumed: int


def parse_learned(data: bytes, entries: dict[str, LearnedEntry], first_line: int) -> LogRead:
    """Apply the log's bytes, in order, to ``entries`` (relative path -> entry, changed in place); what
    was read. The problems are the first MAX_REPORTED_PROBLEMS and a count of the rest, numbered from
    ``first_line``. A bad line never hides the good ones."""
    problems: list[SidecarProblem] = []
    touched: set[str] = set()
    more = 0
    first_unlisted = 0
    lines = data.split(b"\n")
    consumed = len(data)
    for number, line in enumerate(lines, first_line):
        if not line.strip():
            continue
        if number - first_line == len(lines) - 1 and not _whole_json(line):
            consumed -= len(line)  # an unfinished last line: read again once it is finished
            break
        reason = None
        if len(line) > MAX_LEARNED_LINE_BYTES:
            reason = f"line is {len(line)} bytes, over the {MAX_LEARNED_LINE_BYTES}-byte limit"
        else:
            try:
                path, entry = _entry(parse_json(line))
            except ValueError as exc:
                reason = line_problem(exc)
        if reason is None:
            touched.add(path)
            if entry is not None:
                entries[path] = entry  # a later line for the same path wins
            else:
                entries.pop(path, None)  # a line that keeps nothing forgets the path
        elif len(problems) < MAX_REPORTED_PROBLEMS:
            problems.append((number, reason))
        else:
            more += 1
            first_unlisted = first_unlisted or number
    if more:
        problems.append((first_unlisted, f"and {more} more bad lines from here on, not listed"))
    return LogRead(problems, touched, len(lines) - 1, consumed)


def _whole_json(line: bytes) -> bool:
    try:
        parse_json(line)
    except ValueError:  # cut inside a character, a string or a nesting
        return False
    return True


def _entry(obj: Any) -> tuple[str, LearnedEntry | None]:
    """A line's path and entry, cleaned (None when nothing in it is kept); ValueError when it is not an entry."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    path = valid_path(obj.get("path"))
    raw_keys, raw_sups = obj.get("keys", []), obj.get("suppressors", [])
    if not isinstance(raw_keys, list):
        raise ValueError("'keys' must be a list of [term, count, seen]")
    if not isinstance(raw_sups, list):
        raise ValueError("'suppressors' must be a list of [[terms], count, seen]")
    keys: dict[str, LearnedTerm] = {}
    for item in raw_keys[: MAX_LEARNED_KEYS * INSPECT_FACTOR]:
        if isinstance(item, list) and len(item) == 3:
            term, count, seen = clean_term(item[0]), _count(item[1]), _seen(item[2])
            if term is not None and count is not None and seen is not None:
                old = keys.get(term)
                if old is None or (count, seen) > (old.count, old.seen):
                    keys[term] = LearnedTerm(term, count, seen)
    sups: dict[frozenset[str], Suppressor] = {}
    for item in raw_sups[: MAX_SUPPRESSORS * INSPECT_FACTOR]:
        if isinstance(item, list) and len(item) == 3:
            terms, count, seen = frozenset(clean_term_set(item[0])), _count(item[1]), _seen(item[2])
            if terms and count is not None and seen is not None:
                old_s = sups.get(terms)
                if old_s is None or (count, seen) > old_s[1:]:
                    sups[terms] = (terms, count, seen)
    if not keys and not sups:
        return path, None
    return path, bounded(LearnedEntry(path, tuple(keys.values()), tuple(sups.values())))


def oldest_first(entries: Iterable[LearnedEntry]) -> list[str]:
    """The entries' paths, the least recently learned first: what goes when the file is over its size limit."""
    def last_seen(entry: LearnedEntry) -> float:
        return max([k.seen for k in entry.keys] + [s[2] for s in entry.suppressors], default=0.0)

    return [entry.path for entry in sorted(entries, key=last_seen)]
