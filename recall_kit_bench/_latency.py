"""The fast stage's cost on generated stores, beside rank-bm25's full scoring."""

from __future__ import annotations

import gc
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_store import MemoryDoc, Snapshot
from recall_kit import FastHeuristic
from recall_kit_bench._errors import BaselineUnavailable
from recall_kit_bench._evaluation import BASELINE_TOP, Percentiles, PlainBaseline, percentiles

_SYLLABLES = (
    "ka ri to na mo se lu pe vi da ro gan tel mar sin dor bel quo fir zen "
    "pra lo ki tu ne sa po mi ve ho"
).split()
_FUNCTION_WORDS = (
    "the of and to a in is it you that he was for on are with as his they be at one have this from "
    "or had by not but what some we can out other were all there when up use your how said an each she"
).split()
ZIPF_EXPONENT = 1.07  # word frequencies in English text follow roughly 1 / rank^1.07
VOCABULARY_SIZE = 30_000


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """Fast-stage and update cost at one store size, beside rank-bm25's full scoring.

    ``baseline_ms`` is None when rank-bm25 (the ``bench`` extra) is not installed; ``baseline_absent``
    then says so in one line naming the extra."""

    docs: int
    fast_ms: Percentiles
    fast_cpu_ms: Percentiles  # thread CPU time: the same calls without other processes' share
    baseline_ms: Percentiles | None
    update_ms: Percentiles
    query_after_update_ms: Percentiles
    build_s: float
    baseline_absent: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON object (``baseline_ms`` as ``rank_bm25_ms``: null, with ``rank_bm25_absent``
        saying why, when rank-bm25 is not installed)."""
        data: dict[str, Any] = {
            "docs": self.docs,
            "fast_ms": self.fast_ms.as_dict(),
            "fast_cpu_ms": self.fast_cpu_ms.as_dict(),
            "rank_bm25_ms": None if self.baseline_ms is None else self.baseline_ms.as_dict(),
            "update_ms": self.update_ms.as_dict(),
            "query_after_update_ms": self.query_after_update_ms.as_dict(),
            "build_s": round(self.build_s, 3),
        }
        if self.baseline_ms is None:
            data["rank_bm25_absent"] = self.baseline_absent
        return data


def generated_vocabulary(size: int = VOCABULARY_SIZE, seed: int = 7) -> list[str]:
    """Distinct pronounceable pseudo-words, most frequent first."""
    import random

    rng = random.Random(seed)
    # The most frequent ranks of real text are function words; a tokenizer drops them.
    words: dict[str, None] = dict.fromkeys(_FUNCTION_WORDS)
    while len(words) < size:
        words["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    return list(words)


def generated_snapshot(n_docs: int, vocabulary: Sequence[str], seed: int = 11) -> Snapshot:
    """A store of ``n_docs`` memories whose words follow a Zipf distribution over ``vocabulary``."""
    import itertools
    import random

    rng = random.Random(seed)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(len(vocabulary))))

    def words(count: int) -> str:
        return " ".join(rng.choices(vocabulary, cum_weights=cumulative, k=count))

    docs = {}
    for i in range(n_docs):
        path = f"project-{i % 40}/memory-{i}.md"
        body = "\n".join(words(rng.randint(8, 20)) for _ in range(rng.randint(3, 10)))
        docs[f"gen/{path}"] = _generated_doc(path, words(rng.randint(3, 6)), words(rng.randint(8, 16)), body)
    return Snapshot.build(1, docs, (), frozenset(docs))


def _generated_doc(path: str, name: str, description: str, body: str) -> MemoryDoc:
    return MemoryDoc(
        scope="gen",
        path=path,
        abspath=Path("/generated") / path,
        name=name,
        description=description,
        type="project",
        keywords=(),
        extra={},
        body=body,
        mtime=0.0,
        size=len(body),
        content_hash="",
    )


def generated_queries(vocabulary: Sequence[str], count: int, seed: int = 13) -> list[str]:
    """Prompts of 3-10 words: common and rare words, stop words, and one typo in five."""
    import random

    rng = random.Random(seed)
    queries = []
    for i in range(count):
        words = [rng.choice(vocabulary[50:500]) for _ in range(rng.randint(1, 3))]
        words += [rng.choice(vocabulary) for _ in range(rng.randint(2, 5))]
        words += rng.sample(["the", "how", "do", "we", "is", "what", "for"], 2)
        if i % 5 == 0:
            word = max(words, key=len)
            cut = rng.randrange(1, len(word) - 1)
            words.append(word[:cut] + word[cut + 1 :])  # a dropped letter
        rng.shuffle(words)
        queries.append(" ".join(words))
    return queries


def measure_latency(
    n_docs: int, *, queries: int = 300, baseline_queries: int = 30, updates: int = 30
) -> LatencyRow:
    """Time FastHeuristic.recall, rank-bm25's get_scores, and one-file index updates.

    Without rank-bm25 (the ``bench`` extra) the row has no baseline and says why."""
    vocabulary = generated_vocabulary()
    snapshot = generated_snapshot(n_docs, vocabulary)
    prompts = generated_queries(vocabulary, queries)
    started = time.perf_counter()
    heuristic = FastHeuristic(snapshot)
    build_s = time.perf_counter() - started
    gc.collect()  # the garbage of generating the store is not the query's to pay for
    for prompt in prompts[:20]:  # warm caches before timing
        heuristic.recall(prompt)
    fast, fast_cpu = [], []
    for prompt in prompts:
        cpu_started = time.thread_time()
        fast.append(heuristic.recall(prompt).elapsed_ms)
        fast_cpu.append((time.thread_time() - cpu_started) * 1000.0)

    refs = sorted(snapshot.docs)
    baseline, absent = _baseline_ms(snapshot, prompts[:baseline_queries])

    update = []
    after_update = []
    docs = dict(snapshot.docs)
    version = snapshot.version
    for i in range(updates):
        ref = refs[(i * 7919) % len(refs)]
        old = docs[ref]
        docs[ref] = _generated_doc(old.path, old.name, old.description, old.body + f"\nedit {i} {vocabulary[i]}")
        version += 1
        changed = Snapshot.build(version, docs, (), frozenset({ref}))
        started = time.perf_counter()
        heuristic.apply(changed)
        update.append((time.perf_counter() - started) * 1000.0)
        # The first query touching the edited document's (common) words right after the edit.
        after_update.append(heuristic.recall(f"{old.name} {old.description}").elapsed_ms)
    return LatencyRow(
        n_docs,
        percentiles(fast),
        percentiles(fast_cpu),
        None if baseline is None else percentiles(baseline),
        percentiles(update),
        percentiles(after_update),
        build_s,
        absent,
    )


def _baseline_ms(snapshot: Snapshot, prompts: Sequence[str]) -> tuple[list[float] | None, str | None]:
    """rank-bm25's get_scores and top 2 for each prompt, in ms; or None and why it cannot run."""
    try:
        bm25 = PlainBaseline(snapshot)
    except BaselineUnavailable as exc:
        return None, str(exc)
    refs = bm25.refs
    baseline = []
    for prompt in prompts:
        started = time.perf_counter()
        scores = bm25.scores(prompt)
        sorted(range(len(refs)), key=lambda i: -scores[i])[:BASELINE_TOP]
        baseline.append((time.perf_counter() - started) * 1000.0)
    return baseline, None
