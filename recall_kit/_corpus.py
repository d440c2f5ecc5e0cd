"""Many documents analysed at once into integer term ids: what a whole-store index build reads.

Each distinct whitespace chunk is analysed once (``_tokenize``'s cache); the token stream is then
expanded from chunk ids to term ids with numpy, so no Python code runs per token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from recall_kit._tokenize import analysed_chunks, split_chunks


@dataclass(frozen=True, slots=True)
class Corpus:
    """Documents' fields as term ids: per field, the (document, term id) of every token in order."""

    refs: list[str]
    terms: list[str]  # term id -> term
    field_tokens: list[tuple[np.ndarray, np.ndarray]]  # per field: document index, term id
    surfaces: list[str]  # surface id -> folded surface word
    surface_pairs: tuple[np.ndarray, np.ndarray]  # (document index, surface id), repeats allowed


class _Ids(dict[str, int]):
    """A vocabulary that gives each new key the next id."""

    def __missing__(self, key: str) -> int:
        value = self[key] = len(self)
        return value


def analyse_corpus(refs: Sequence[str], docs_fields: Sequence[Sequence[str]], n_fields: int) -> Corpus:
    """Analyse each document's field texts (``docs_fields[i][f]``) as ``analyze_terms`` would."""
    n_docs = len(refs)
    chunk_ids = _Ids()
    field_chunks: list[tuple[np.ndarray, np.ndarray]] = []
    for field in range(n_fields):
        per_doc = [split_chunks(texts[field]) for texts in docs_fields]
        ids = np.fromiter(map(chunk_ids.__getitem__, chain.from_iterable(per_doc)), dtype=np.int64)
        docs = np.repeat(np.arange(n_docs, dtype=np.int64), np.fromiter(map(len, per_doc), np.int64, n_docs))
        field_chunks.append((docs, ids))
    entries = analysed_chunks(list(chunk_ids))  # chunk id -> (terms, surface words)
    terms = _Ids()
    chunk_terms = _Expansion([entry[0] for entry in entries], terms)
    surfaces = _Ids()
    chunk_surfaces = _Expansion([entry[2] for entry in entries], surfaces)
    field_tokens = [chunk_terms.expand(docs, ids) for docs, ids in field_chunks]
    surface_parts = [chunk_surfaces.expand(docs, ids) for docs, ids in field_chunks]
    surface_pairs = (
        np.concatenate([docs for docs, _ in surface_parts]),
        np.concatenate([ids for _, ids in surface_parts]),
    )
    return Corpus(list(refs), list(terms), field_tokens, list(surfaces), surface_pairs)


class _Expansion:
    """chunk id -> the ids of the items (terms or surfaces) it yields, packed flat with offsets."""

    def __init__(self, items_per_chunk: list[tuple[str, ...]], vocabulary: _Ids) -> None:
        self.flat = np.fromiter(map(vocabulary.__getitem__, chain.from_iterable(items_per_chunk)), dtype=np.int64)
        self.counts = np.fromiter(map(len, items_per_chunk), dtype=np.int64, count=len(items_per_chunk))
        self.starts = np.cumsum(self.counts) - self.counts

    def expand(self, docs: np.ndarray, chunk_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # Chunk k yields counts[k] items from flat[starts[k]:]: repeat each start, add 0, 1, ... within it.
        counts = self.counts[chunk_ids]
        total = int(counts.sum())
        ends = np.cumsum(counts)
        within = np.arange(total, dtype=np.int64) - np.repeat(ends - counts, counts)
        return np.repeat(docs, counts), self.flat[np.repeat(self.starts[chunk_ids], counts) + within]
