"""How much held-out learning can give a dataset: of the answerable prompts the fast stage misses, how
many share specific words with a prompt of another fold for the same memory (what learning would
have taught it).

    .venv/bin/python bench/learning_overlap.py bench/datasets/agent-memories [--enriched]
"""

from __future__ import annotations

import argparse
import contextlib
from collections import defaultdict
from pathlib import Path

from recall_kit import FastHeuristic, learnable_words
from recall_kit_bench import fold_of, load_dataset

FOLDS = 5


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
    missed, shared = 0, defaultdict(int)
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:
        for query in dataset.queries:
            if not query.relevant or {s.doc.ref for s in heuristic.recall(query.query).docs} & query.relevant:
                continue
            missed += 1
            mine = set(learnable_words(query.query).keys)
            best = max(
                (len(mine & set(learnable_words(other.query).keys))
                 for ref in query.relevant for other in by_memory[ref]
                 if fold_of(other.id, FOLDS) != fold_of(query.id, FOLDS)),
                default=0,
            )
            shared[min(best, 2)] += 1
    print(f"missed answerable prompts: {missed}; sharing 0 / 1 / 2+ specific words with another fold's "
          f"prompt for the same memory: {shared[0]} / {shared[1]} / {shared[2]}")


if __name__ == "__main__":
    main()
