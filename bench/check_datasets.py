"""Validate recall-kit eval datasets and memory stores.

Usage: python bench/check_datasets.py PATH [PATH ...]

A PATH holding `queries.jsonl` is a dataset (memories under `PATH/memories/`); any other folder
is checked as a bare memory store. Prints counts per kind; exits 1 when anything is wrong.
Memory files are read by the store itself (``memory_store.MemoryStore``), so a file passes here
exactly when the store would load it; a dataset memory must also have a body. Query lines are read
by the benchmarks' own reader (``recall_kit_bench.read_queries``), so a line passes here exactly
when the benchmarks can read it; this adds the checks of what a line says (kinds, relevant paths,
semantic queries that share no word with their memory).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memory_store import MemoryDoc, MemoryStore
from recall_kit_bench import DATASET_SCOPE, EvalQuery, read_queries

KNOWN_KINDS = frozenset(
    {
        "lexical", "paraphrase", "typo", "multi", "semantic", "negative",
        "zh", "ja", "ko", "mixed", "fullwidth", "body-only",
    }
)
FOREIGN_KIND = re.compile(r"^locomo-\d+$")  # the converted LoCoMo split keeps its own kinds

# Words too common to count as shared content between a `semantic` query and its memory.
STOP_WORDS = frozenset(
    """
    the and for are but not you your yours with this that these those from into onto over under
    was were been being have has had having does did doing done can could should would will shall
    may might must what which who whom whose when where why how all any both each few more most
    other some such only own same than too very just also about again then there here they them
    their its our ours out off she her him his who she let lets get got use using used one two
    now way still yet ever never per via etc else like
    """.split()
)
WORD = re.compile(r"[^\W\d_]{3,}")
FULLWIDTH = re.compile(r"[\uff01-\uff5e\u3000]")
CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    memories: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    def problem(self, where: object, reason: str) -> None:
        self.problems.append(f"{where}: {reason}")


def word_forms(word: str) -> set[str]:
    """The word and its crude suffix-stripped forms (s/es/ed/ing); any shared form counts as shared."""
    forms = {word}
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)]
            forms.add(stem)
            if suffix in ("ing", "ed", "es"):
                forms.add(stem + "e")  # using -> use, saved -> save, releases -> release
    return forms


def content_words(text: str) -> set[str]:
    """Lowercased word runs of >= 3 letters minus stop words, each with its stripped forms."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words: set[str] = set()
    for word in WORD.findall(folded):
        if word not in STOP_WORDS:
            words |= word_forms(word)
    return words


def memory_text(memory: MemoryDoc) -> str:
    return f"{memory.name}\n{memory.description}\n{' '.join(memory.keywords)}\n{memory.body}"


def load_store(root: Path, report: Report) -> dict[str, MemoryDoc]:
    """Every memory under root by relative POSIX path, as the store reads them; what it skips, and a
    memory with an empty body (nothing to recall), become problems."""
    with MemoryStore.open((DATASET_SCOPE, root), watch=False, enrichment=False, learned=False) as store:
        snapshot = store.snapshot()
    for error in snapshot.errors:
        report.problem(root / error.path, error.reason)
    memories = {}
    for doc in snapshot.docs.values():
        if doc.body.strip():
            memories[doc.path] = doc
        else:
            report.problem(root / doc.path, "empty body")
    report.memories = len(memories)
    if not memories:
        report.problem(root, "no memory files")
    return memories


def check_query(query: EvalQuery, where: str, memories: dict[str, MemoryDoc], report: Report) -> None:
    kind = query.kind
    if not (kind in KNOWN_KINDS or FOREIGN_KIND.match(kind)):
        report.problem(where, f"unknown kind {kind!r}")
        return
    if not query.query.strip():
        report.problem(where, "empty query")
        return
    report.kinds[kind] += 1
    relevant = sorted(ref.removeprefix(DATASET_SCOPE + "/") for ref in query.relevant)
    for path in relevant:
        if path not in memories:
            report.problem(where, f"relevant path {path!r} is not a memory")
    if (kind == "negative") != (not relevant):
        report.problem(where, "negative queries, and only they, have relevant: []")
    if kind == "multi" and len(relevant) < 2:
        report.problem(where, "multi needs at least two relevant memories")
    if kind == "fullwidth" and not FULLWIDTH.search(query.query):
        report.problem(where, "fullwidth query has no full-width character")
    if kind in ("zh", "ja", "ko") and not CJK.search(query.query):
        report.problem(where, f"{kind} query has no CJK text")
    if kind == "semantic":
        query_words = content_words(query.query)
        for path in relevant:
            if path in memories:
                shared = query_words & content_words(memory_text(memories[path]))
                if shared:
                    report.problem(where, f"semantic query shares {sorted(shared)} with {path}")


def check_dataset(folder: Path) -> Report:
    report = Report()
    memories = load_store(folder / "memories", report)
    unread: list[str] = []  # the lines the reader could not read, each named with its number
    for query in read_queries(folder / "queries.jsonl", unread):
        check_query(query, f"queries.jsonl ({query.id})", memories, report)
    report.problems.extend(unread)
    if not report.kinds:
        report.problem(folder, "no queries")
    return report


def check_path(path: Path) -> Report:
    if (path / "queries.jsonl").is_file():
        return check_dataset(path)
    report = Report()
    load_store(path, report)
    return report


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    failed = False
    for arg in argv:
        path = Path(arg)
        if not path.is_dir():
            print(f"{path}: not a folder", file=sys.stderr)
            return 2
        report = check_path(path)
        total = sum(report.kinds.values())
        counts = ", ".join(f"{kind} {n}" for kind, n in sorted(report.kinds.items()))
        print(f"{path}: {report.memories} memories, {total} queries" + (f" ({counts})" if counts else ""))
        for problem in report.problems:
            print(f"  PROBLEM {problem}")
        failed = failed or bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
