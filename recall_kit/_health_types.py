"""What ``recall_kit.health`` checks and what it finds: the folders (with who reads their index and
which project they describe), the recall sets (folders one prompt recalls from together), the
trail's record of past prompts, and the findings, each with its files, a sentence and a remedy."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

FindingKind = Literal[
    "near_duplicate", "stale_reference", "index_drift", "secret", "unreachable", "never_recalled", "bad_file",
]
# The order findings are counted and shown in.
FINDING_KINDS: tuple[FindingKind, ...] = (
    "near_duplicate", "stale_reference", "index_drift", "secret", "unreachable", "never_recalled", "bad_file",
)
KIND_TITLES: Mapping[FindingKind, str] = MappingProxyType({
    "near_duplicate": "near-duplicates",
    "stale_reference": "stale references",
    "index_drift": "index drift",
    "secret": "secrets",
    "unreachable": "unreachable at the prompt",
    "never_recalled": "never recalled",
    "bad_file": "bad files",
})


@dataclass(frozen=True, slots=True)
class IndexReader:
    """An agent that loads a folder's ``MEMORY.md`` into its context, and how much of it: the first
    ``max_lines`` lines of the trimmed text, then cut at the last line break before ``max_chars``
    (in UTF-16 code units, as JavaScript counts)."""

    title: str
    max_lines: int
    max_chars: int


@dataclass(frozen=True, slots=True)
class HealthRoot:
    """One memory folder to check: ``reader``, the agent that loads its index (None: no agent
    is known to); ``project``, the folder its file references resolve against (a git top; None:
    references are not checked); ``kind`` says what the folder is (project, user, team, --root)."""

    path: str
    kind: str = "--root"
    reader: IndexReader | None = None
    project: str | None = None


@dataclass(frozen=True, slots=True)
class RecallSet:
    """Folders one prompt recalls from together (one agent's, or the configured roots): duplicates
    and reachability are judged within one set, as the fast stage sees it."""

    title: str
    roots: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HealthPlan:
    """What to check: every folder once, and the recall sets they take part in."""

    roots: tuple[HealthRoot, ...]
    sets: tuple[RecallSet, ...]


@dataclass(frozen=True, slots=True)
class RecalledPrompt:
    """One prompt of the recall trail: when it began, the folders it recalled from, and each
    memory delivered for it as (folder, path relative to that folder)."""

    time: float
    roots: tuple[str, ...]
    delivered: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem: its kind, the files it concerns (absolute paths; the store's refs beside them),
    one plain sentence on what is wrong, and what to do about it. ``line`` is 1-based in the first
    file when a line names it; ``fixable`` when ``doctor --fix`` mends it; ``detail`` holds JSON values."""

    kind: FindingKind
    files: tuple[str, ...]
    message: str
    action: str
    refs: tuple[str, ...] = ()
    line: int | None = None
    fixable: bool = False
    detail: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> dict[str, Any]:
        """As ``doctor --json`` prints it."""
        return {
            "kind": self.kind, "files": list(self.files), "refs": list(self.refs), "line": self.line,
            "message": self.message, "action": self.action, "fixable": self.fixable, "detail": dict(self.detail),
        }


@dataclass(frozen=True, slots=True)
class CheckedRoot:
    """What was checked in one folder: its memories and index files, and what could not be checked there."""

    path: str
    kind: str
    memories: int
    index_files: int
    reader: str | None
    project: str | None


@dataclass(frozen=True, slots=True)
class HealthReport:
    """Every finding in the plan's folders (in FINDING_KINDS order), what was checked, notes on what
    was not (one line each: a check skipped and why), and the seconds each check took."""

    findings: tuple[Finding, ...]
    roots: tuple[CheckedRoot, ...]
    notes: tuple[str, ...] = ()
    elapsed_s: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    index_texts: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    """The bytes of each index file as checked (absolute path -> bytes): what a repair is made from."""

    def counts(self) -> dict[FindingKind, int]:
        """How many findings of each kind, every kind listed."""
        counts = {kind: 0 for kind in FINDING_KINDS}
        for finding in self.findings:
            counts[finding.kind] += 1
        return counts

    @property
    def clean(self) -> bool:
        """Whether nothing was found (``doctor`` exits 0)."""
        return not self.findings

    def to_json(self) -> dict[str, Any]:
        """As ``doctor --json`` prints it: counts first."""
        return {
            "counts": self.counts(),
            "findings": [f.to_json() for f in self.findings],
            "roots": [
                {"path": r.path, "kind": r.kind, "memories": r.memories, "index_files": r.index_files,
                 "index_reader": r.reader, "project": r.project}
                for r in self.roots
            ],
            "notes": list(self.notes),
            "elapsed_s": {k: round(v, 3) for k, v in self.elapsed_s.items()},
        }
