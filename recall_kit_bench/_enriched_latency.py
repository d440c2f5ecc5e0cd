"""The fast stage on an enriched generated store: the same files with and without their sidecar, timed side by side.

Enrichment is generated as a model writing search keys would write it: 12-20 keys of 1-3 words
and 3 example requests per memory, drawn from the memories' own words and from as many again
that no memory holds (synonyms, broader terms). Written to disk and read back through
``MemoryStore``, so the index sees what the product's would.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_store import (
    Enrichment,
    EnrichmentEntry,
    MemoryStore,
    Snapshot,
    sidecar_path,
    write_enrichment,
)
from recall_kit import FastHeuristic
from recall_kit_bench._datasets import EnrichmentPlacement, memory_text
from recall_kit_bench._errors import HarnessError
from recall_kit_bench._evaluation import Percentiles, percentiles
from recall_kit_bench._latency import (
    _FUNCTION_WORDS,
    VOCABULARY_SIZE,
    ZIPF_EXPONENT,
    generated_queries,
    generated_snapshot,
    generated_vocabulary,
)

ENRICHED_SCOPE = "gen"
KEYWORDS_PER_MEMORY = (12, 20)
KEYWORD_WORDS = (1, 2, 3)
KEYWORD_WORD_WEIGHTS = (0.75, 0.20, 0.05)  # mostly single terms: head fields come out about 3.3 times longer in words
SCENARIOS_PER_MEMORY = 3
SCENARIO_CONTENT_WORDS = (2, 4)  # after a 2-4 word opening: requests of 4-8 words
# Openings of example requests; their words are mostly stop words, as in real requests.
_REQUEST_OPENINGS = (
    "how do i", "what is the", "why does the", "can you", "where is the", "help me with the", "when should we",
)
NEW_WORDS = VOCABULARY_SIZE  # words only enrichment uses: the enrichment vocabulary is twice the memories'
GENERATOR_MODEL = "generated"  # the sidecar's informational model name


def enrichment_vocabulary(vocabulary: Sequence[str], seed: int = 17) -> list[str]:
    """The memories' content words interleaved with as many words no memory holds, most frequent first."""
    stop = set(_FUNCTION_WORDS)
    own = [word for word in vocabulary if word not in stop]
    held = set(vocabulary) | stop
    new = [word for word in generated_vocabulary(len(vocabulary) + 2 * NEW_WORDS, seed) if word not in held]
    new = new[:NEW_WORDS]
    return [word for pair in itertools.zip_longest(own, new) for word in pair if word is not None]


def generated_enrichment(n_docs: int, vocabulary: Sequence[str], seed: int = 19) -> list[Enrichment]:
    """Keywords and example requests for each of ``n_docs`` memories, Zipf-distributed over ``vocabulary``."""
    rng = random.Random(seed)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(len(vocabulary))))

    def words(count: int) -> list[str]:
        return rng.choices(vocabulary, cum_weights=cumulative, k=count)

    enrichments = []
    for _ in range(n_docs):
        keywords: dict[str, None] = {}
        wanted = rng.randint(*KEYWORDS_PER_MEMORY)
        while len(keywords) < wanted:
            keywords[" ".join(words(rng.choices(KEYWORD_WORDS, KEYWORD_WORD_WEIGHTS)[0]))] = None
        scenarios = tuple(
            f"{rng.choice(_REQUEST_OPENINGS)} {' '.join(words(rng.randint(*SCENARIO_CONTENT_WORDS)))}"
            for _ in range(SCENARIOS_PER_MEMORY)
        )
        enrichments.append(Enrichment(tuple(keywords), scenarios))
    return enrichments


def write_enriched_store(
    root: Path, n_docs: int, *, placement: EnrichmentPlacement = "sidecar", vocabulary: Sequence[str] | None = None
) -> Snapshot:
    """Write ``generated_snapshot``'s memories under ``root`` with generated enrichment: in the root's
    sidecar (keyed by path and SHA-256 of each file's bytes) or in each file's frontmatter.

    Returns the generated (in-memory, unenriched) snapshot the files were written from.
    """
    vocabulary = vocabulary if vocabulary is not None else generated_vocabulary()
    snapshot = generated_snapshot(n_docs, vocabulary)
    enrichments = generated_enrichment(n_docs, enrichment_vocabulary(vocabulary))
    entries = []
    for doc, enrichment in zip((snapshot.docs[ref] for ref in sorted(snapshot.docs)), enrichments):
        data = memory_text(doc, enrichment if placement == "frontmatter" else None).encode("utf-8")
        path = root / doc.path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if placement == "sidecar":
            entries.append(
                EnrichmentEntry(
                    doc.path, hashlib.sha256(data).hexdigest(), enrichment.keywords, enrichment.usage_scenarios,
                    GENERATOR_MODEL,
                )
            )
    if placement == "sidecar":
        write_enrichment(sidecar_path(root), entries)
    return snapshot


def read_generated_store(root: Path, *, enrichment: bool) -> Snapshot:
    """The store under ``root`` as the product reads it, once (no watcher); with or without its sidecar."""
    with MemoryStore.open((ENRICHED_SCOPE, root), watch=False, enrichment=enrichment) as store:
        snapshot = store.snapshot()
    if snapshot.errors:
        raise HarnessError(f"generated store has load errors: {snapshot.errors[0].ref}: {snapshot.errors[0].reason}")
    return snapshot


@dataclass(frozen=True, slots=True)
class HeadSize:
    """Average words and characters per memory in its head fields (name, description, keywords, usage scenarios)."""

    words: float
    chars: float

    @staticmethod
    def of(snapshot: Snapshot) -> HeadSize:
        """The averages over ``snapshot``'s memories, their enrichment terms included."""
        words = chars = 0
        for doc in snapshot.docs.values():
            enrichment = doc.enrichment or Enrichment()
            texts = [
                doc.name, doc.description, *doc.keywords, *doc.usage_scenarios,
                *enrichment.keywords, *enrichment.usage_scenarios,
            ]
            words += sum(len(text.split()) for text in texts)
            chars += sum(len(text) for text in texts)
        n = max(1, len(snapshot.docs))
        return HeadSize(words / n, chars / n)


@dataclass(frozen=True, slots=True)
class EnrichedLatencyRow:
    """Fast-stage cost at one store size, unenriched and enriched, timed on the same prompts in turn."""

    docs: int
    enriched_docs: int  # memories whose sidecar entry was fresh when read
    head_plain: HeadSize
    head_enriched: HeadSize
    plain_ms: Percentiles
    plain_cpu_ms: Percentiles
    enriched_ms: Percentiles
    enriched_cpu_ms: Percentiles
    build_plain_s: float
    build_enriched_s: float

    @property
    def head_ratio(self) -> float:
        """How many times longer the enriched head fields are, in words."""
        return self.head_enriched.words / self.head_plain.words if self.head_plain.words else 0.0

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON object: head sizes, then the unenriched and enriched costs side by side."""
        return {
            "docs": self.docs,
            "enriched_docs": self.enriched_docs,
            "head_words": {"unenriched": round(self.head_plain.words, 1), "enriched": round(self.head_enriched.words, 1)},
            "head_chars": {"unenriched": round(self.head_plain.chars, 1), "enriched": round(self.head_enriched.chars, 1)},
            "head_ratio": round(self.head_ratio, 2),
            "unenriched": {"fast_ms": self.plain_ms.as_dict(), "fast_cpu_ms": self.plain_cpu_ms.as_dict(),
                           "build_s": round(self.build_plain_s, 3)},
            "enriched": {"fast_ms": self.enriched_ms.as_dict(), "fast_cpu_ms": self.enriched_cpu_ms.as_dict(),
                         "build_s": round(self.build_enriched_s, 3)},
        }


def measure_enriched_latency(n_docs: int, *, queries: int = 300) -> EnrichedLatencyRow:
    """Time FastHeuristic.recall on one generated store read without and with its sidecar.

    Both indexes answer the same prompts, alternately first, so machine noise falls on both.
    """
    vocabulary = generated_vocabulary()
    with tempfile.TemporaryDirectory(prefix="recall-kit-enriched-") as folder:
        write_enriched_store(Path(folder), n_docs, vocabulary=vocabulary)
        plain_snapshot = read_generated_store(Path(folder), enrichment=False)
        enriched_snapshot = read_generated_store(Path(folder), enrichment=True)
    started = time.perf_counter()
    plain = FastHeuristic(plain_snapshot)
    build_plain_s = time.perf_counter() - started
    started = time.perf_counter()
    enriched = FastHeuristic(enriched_snapshot)
    build_enriched_s = time.perf_counter() - started
    prompts = generated_queries(vocabulary, queries)
    gc.collect()  # the garbage of generating the store is not the query's to pay for
    heuristics = (plain, enriched)
    for prompt in prompts[:20]:  # warm caches before timing
        for heuristic in heuristics:
            heuristic.recall(prompt)
    wall: tuple[list[float], list[float]] = ([], [])
    cpu: tuple[list[float], list[float]] = ([], [])
    for i, prompt in enumerate(prompts):
        for k in (0, 1) if i % 2 == 0 else (1, 0):
            cpu_started = time.thread_time()
            wall[k].append(heuristics[k].recall(prompt).elapsed_ms)
            cpu[k].append((time.thread_time() - cpu_started) * 1000.0)
    return EnrichedLatencyRow(
        n_docs,
        sum(doc.enrichment is not None for doc in enriched_snapshot.docs.values()),
        HeadSize.of(plain_snapshot),
        HeadSize.of(enriched_snapshot),
        percentiles(wall[0]),
        percentiles(cpu[0]),
        percentiles(wall[1]),
        percentiles(cpu[1]),
        build_plain_s,
        build_enriched_s,
    )
