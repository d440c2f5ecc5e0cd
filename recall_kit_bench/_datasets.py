"""An eval dataset folder (docs/metrics.md): ``memories/**/*.md`` and ``queries.jsonl``, read and written."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from memory_store import (
    Enrichment,
    MemoryDoc,
    MemoryRoot,
    MemoryStore,
    MemoryStoreError,
    Snapshot,
    format_memory,
    parse_json,
    sidecar_path,
)
from recall_kit_bench._errors import DatasetError

DATASET_SCOPE = "memories"  # the scope label a dataset's memories/ folder is opened under
# Where a memory's enrichment words are kept: in the root's sidecar, as `recall-kit enrich` writes
# them, or in the memory's own frontmatter (keywords, usage_scenarios), as an agent writes them.
EnrichmentPlacement = Literal["sidecar", "frontmatter"]
PLACEMENTS: tuple[EnrichmentPlacement, ...] = ("sidecar", "frontmatter")
_QUERY_KEYS = frozenset({"id", "query", "relevant", "kind"})  # a queries.jsonl line's own keys; the rest is extra

# path relative to the memories folder -> (name, description, body)
MemorySpec = Mapping[str, tuple[str, str, str]]
# (id, query, relevant paths, kind)
QuerySpec = tuple[str, str, list[str], str]


@dataclass(frozen=True, slots=True)
class EvalQuery:
    """One line of queries.jsonl; ``relevant`` holds refs (scope/path)."""

    id: str
    query: str
    relevant: frozenset[str]
    kind: str
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EvalDataset:
    """A dataset folder: its memories as one snapshot and its queries."""

    root: Path
    snapshot: Snapshot
    queries: tuple[EvalQuery, ...]


def load_dataset(
    path: str | Path, *, enrichment: bool | str | Path = True, placement: EnrichmentPlacement = "sidecar"
) -> EvalDataset:
    """Read ``memories/**/*.md`` and ``queries.jsonl`` from a dataset folder.

    ``enrichment``: True attaches the dataset's own sidecar when it has one
    (``memories/.recall-kit/enrichment.jsonl``), False none, a path that sidecar file instead.
    ``placement="frontmatter"`` reads instead a copy of the memories with the sidecar's words written
    into each one's frontmatter (``frontmatter_copy``), and no sidecar: the same words, where an
    agent writes them. Raises DatasetError, naming the line, for a folder or a query line that is
    not as specified.
    """
    root = Path(path)
    memories = root / "memories"
    if not memories.is_dir() or not (root / "queries.jsonl").is_file():
        raise DatasetError(f"{root} is not a dataset (needs memories/ and queries.jsonl)")
    if not isinstance(enrichment, bool) and not Path(enrichment).is_file():
        raise DatasetError(f"enrichment sidecar not found: {enrichment}")
    if placement not in PLACEMENTS:
        raise DatasetError(f"unknown enrichment placement {placement!r}; one of {', '.join(PLACEMENTS)}")
    snapshot = _load_memories(memories, enrichment)
    if placement == "frontmatter" and enrichment is not False:
        with tempfile.TemporaryDirectory(prefix="recall-kit-frontmatter-") as folder:
            snapshot = _load_memories(frontmatter_copy(memories, snapshot, Path(folder) / "memories"), False)
    return EvalDataset(root, snapshot, tuple(read_queries(root / "queries.jsonl")))


def read_queries(path: Path, problems: list[str] | None = None) -> Iterator[EvalQuery]:
    """Each query of a ``queries.jsonl`` file, in order: the one reader of the format (the benchmarks'
    and ``bench/check_datasets.py``'s). A line that is not as specified (not UTF-8, not a JSON object,
    a key missing, ``relevant`` not a list of distinct paths, an id given twice) raises DatasetError
    naming it (``path:N``); with ``problems``, that one-line reason is appended there and the line
    skipped, so that a checker names every bad line at once."""
    seen: set[str] = set()
    with open(path, "rb") as lines:  # bytes: a line that is not UTF-8 is named, not a traceback
        for number, raw in enumerate(lines, 1):
            try:
                query = _line_query(raw, f"{path}:{number}", seen)
            except DatasetError as exc:
                if problems is None:
                    raise
                problems.append(str(exc))
                continue
            if query is not None:
                yield query


def _line_query(raw: bytes, where: str, seen: set[str]) -> EvalQuery | None:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{where}: not UTF-8 (invalid byte at offset {exc.start} of the line)") from None
    if not line.strip():
        return None
    query = _query(line, where)
    if query.id in seen:
        raise DatasetError(f"{where}: the id {query.id!r} is given twice")
    seen.add(query.id)
    return query


def _query(line: str, where: str) -> EvalQuery:
    try:
        item = parse_json(line)
    except ValueError as exc:
        raise DatasetError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(item, dict):
        raise DatasetError(f"{where}: a query line is a JSON object")
    missing = [key for key in ("id", "query", "relevant") if key not in item]
    if missing:
        raise DatasetError(f"{where}: missing key {missing[0]!r}")
    relevant = item["relevant"]
    if not isinstance(item["query"], str) or not isinstance(relevant, list):
        raise DatasetError(f"{where}: 'query' must be a string and 'relevant' a list of paths")
    if not all(isinstance(rel, str) for rel in relevant) or len(set(relevant)) != len(relevant):
        raise DatasetError(f"{where}: 'relevant' must be a list of distinct paths")
    return EvalQuery(
        id=str(item["id"]),
        query=item["query"],
        relevant=frozenset(f"{DATASET_SCOPE}/{rel}" for rel in relevant),
        kind=str(item.get("kind", "")),
        extra={k: v for k, v in item.items() if k not in _QUERY_KEYS},
    )


def _load_memories(memories: Path, enrichment: bool | str | Path) -> Snapshot:
    sidecars = enrichment if isinstance(enrichment, bool) else {DATASET_SCOPE: Path(enrichment)}
    with MemoryStore.open((DATASET_SCOPE, memories), watch=False, enrichment=sidecars) as store:
        return store.snapshot()


def memory_text(doc: MemoryDoc, enrichment: Enrichment | None = None) -> str:
    """``doc``'s file through the store's one frontmatter writer, with ``enrichment``'s keywords and
    usage scenarios added to its own frontmatter lists (its own first, each once)."""
    extra = enrichment or Enrichment()
    return format_memory(
        name=doc.name,
        description=doc.description,
        type=doc.type,
        body=doc.body,
        keywords=tuple(dict.fromkeys((*doc.keywords, *extra.keywords))),
        usage_scenarios=tuple(dict.fromkeys((*doc.usage_scenarios, *extra.usage_scenarios))),
        extra=doc.extra,
    )


def frontmatter_copy(memories: Path, snapshot: Snapshot, into: Path) -> Path:
    """Copy the ``memories`` folder to ``into`` (symlinks as links, no ``.recall-kit``), each memory that
    ``snapshot`` holds enrichment for rewritten with those words in its frontmatter (``memory_text``);
    every other file as it was. Returns ``into``."""
    shutil.copytree(memories, into, symlinks=True, ignore=shutil.ignore_patterns(".recall-kit"))
    root = MemoryRoot(into)  # writes inside the copy, never through a symlink (one may point at the dataset)
    for doc in snapshot.docs.values():
        if doc.enrichment is not None:
            try:
                root.remove(doc.path)  # the copied file, or the copied link (never its target)
                root.write(doc.path, memory_text(doc, doc.enrichment), overwrite=False)
            except MemoryStoreError as exc:
                raise DatasetError(f"cannot place the enrichment of {doc.path} in its frontmatter: {exc}") from None
    return into


def dataset_sidecar(path: str | Path) -> Path | None:
    """The dataset's own enrichment sidecar, when it has one."""
    sidecar = sidecar_path(Path(path) / "memories")
    return sidecar if sidecar.is_file() else None


def write_memory(root: Path, path: str, name: str, description: str, body: str, *, type: str = "project") -> Path:
    """Write one memory file at ``root/path`` (creating folders) and return its path."""
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(format_memory(name=name, description=description, type=type, body=body), encoding="utf-8")
    return file


def write_eval_dataset(root: Path, memories: MemorySpec, queries: Iterable[QuerySpec]) -> Path:
    """Write ``root/memories/**`` and ``root/queries.jsonl``, which ``load_dataset`` reads back; return ``root``."""
    for path, (name, description, body) in memories.items():
        write_memory(root / "memories", path, name, description, body)
    lines = [
        json.dumps({"id": qid, "query": query, "relevant": relevant, "kind": kind})
        for qid, query, relevant, kind in queries
    ]
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root
