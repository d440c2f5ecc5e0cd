"""How much held-out learning can give a dataset: of the answerable prompts the fast stage misses, how
many share specific words with a prompt of another fold for the same memory (what learning would
have taught it), and so the most that learning the prompts' words could add to strict and
paraphrase delivery if every such prompt were then delivered and nothing else changed.

    .venv/bin/python bench/learning_overlap.py bench/datasets/agent-memories [--enriched]

"Stem" counts a shared 5-letter start as well ("parcel" and "parcelhub", "off-site" and "offsite"):
the ceiling a learner that matched learned words by their stems would have.
"""

from __future__ import annotations

import argparse
import contextlib
from collections import Counter, defaultdict
from pathlib import Path

from recall_kit import FastHeuristic, learnable_words
from recall_kit_bench import fold_of, load_dataset

FOLDS = 5
STEM = 5


def stems(words: set[str]) -> set[str]:
    return {word.replace("_", "")[:STEM] for word in words}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--enriched", action="store_true", help="Read the dataset's own enrichment sidecar.")
    args = parser.parse_args()
    dataset = load_dataset(args.dataset, enrichment=args.enriched)
    by_memory = defaultdict(list)
    for query in dataset.queries:
        for ref in query.relevant:
            by_memory[ref].append(query)
    answerable = Counter(query.kind for query in dataset.queries if query.relevant)
    missed, shared, by_stem = Counter(), defaultdict(int), Counter()
    reachable = Counter()
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:
        for query in dataset.queries:
            if not query.relevant or {s.doc.ref for s in heuristic.recall(query.query).docs} & query.relevant:
                continue
            missed[query.kind] += 1
            mine = set(learnable_words(query.query).keys)
            taught = [
                set(learnable_words(other.query).keys)
                for ref in query.relevant for other in by_memory[ref]
                if fold_of(other.id, FOLDS) != fold_of(query.id, FOLDS)
            ]
            best = max((len(mine & words) for words in taught), default=0)
            shared[min(best, 2)] += 1
            reachable[query.kind] += best > 0
            by_stem[query.kind] += any(stems(mine) & stems(words) for words in taught)
    total = sum(answerable.values())
    print(f"missed answerable prompts: {sum(missed.values())}; sharing 0 / 1 / 2+ specific words with another "
          f"fold's prompt for the same memory: {shared[0]} / {shared[1]} / {shared[2]}")
    print(f"ceiling of learning the prompts' words: strict +{sum(reachable.values()) / total:.3f}, paraphrase "
          f"+{reachable['paraphrase'] / max(answerable['paraphrase'], 1):.3f}; by {STEM}-letter stems: strict "
          f"+{sum(by_stem.values()) / total:.3f}, paraphrase +{by_stem['paraphrase'] / max(answerable['paraphrase'], 1):.3f}")


if __name__ == "__main__":
    main()
