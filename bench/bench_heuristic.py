"""Choosing the confidence gate (a cross-validated grid search), and micro benchmarks.

    .venv/bin/python bench/bench_heuristic.py [DATASET_DIR ...]     # the gate search
    .venv/bin/pytest bench/bench_heuristic.py --benchmark-only      # tokenizer/scoring timings

Each query's ranking and gate evidence are computed once; every grid point is then only a
re-gating. For each of FOLDS folds (a hash of the query id), the gate is chosen on the other
folds and scored on the held-out one; the held-out figures' spread is what the README cites.
The objective: the summed shortfall against issue 3's targets, with margins (semantic and
locomo's adversarial "negative" kind are reported, never chosen on).
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recall_kit._heuristic import Evidence, FastHeuristic, GateSettings, ScoredDoc
from recall_kit_bench import fold_of, load_dataset

FOLDS = 5
SILENCE_FLOOR = 0.85  # issue 3 asks 0.80 (0.90 on multilingual); a margin for unseen queries
PRECISION_FLOOR = 0.65  # issue 3 asks 0.60
NOT_CHOSEN_ON = {"semantic", "negative@locomo-dev"}  # reported, never tuned on

DEFAULT_DATASETS = [
    Path(__file__).parent / "datasets" / "agent-memories",
    Path(__file__).parent / "datasets" / "multilingual",
    Path(__file__).parents[2] / "shared" / "datasets" / "locomo-dev",
]

# Issue 3's targets plus a margin, since the gate is chosen on the very queries it is scored on.
TARGETS = {
    "agent-memories.lexical.strict": 0.97,
    "agent-memories.typo.strict": 0.92,
    "agent-memories.multi.strict": 0.92,
    "agent-memories.paraphrase.strict": 0.65,
    "agent-memories.silence": SILENCE_FLOOR,
    "agent-memories.precision": PRECISION_FLOOR,
    "multilingual.strict": 0.97,
    "multilingual.silence": 0.95,
    "locomo-dev.strict": 0.73,
}

GRID = {
    "min_coverage": [0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45],
    "unknown_weight": [0.5, 1.0, 1.5, 2.0, 3.0],
    "generic_weight": [0.0, 0.25, 0.5, 1.0],
    "cjk_unknown_weight": [0.0, 0.25],
    "min_terms": [1, 2],
    "min_head_terms": [0, 1],
    "second_score_ratio": [0.5, 0.6, 0.7],
    "second_min_coverage": [0.2, 0.3, 0.4],
}


@dataclass(frozen=True, slots=True)
class Case:
    dataset: str
    id: str
    kind: str
    relevant: frozenset[str]
    ranked: tuple[ScoredDoc, ...]
    evidence: list[Evidence]

    @property
    def tuned_on(self) -> bool:
        return self.kind not in NOT_CHOSEN_ON and f"{self.kind}@{self.dataset}" not in NOT_CHOSEN_ON


def collect(dataset_dir: Path) -> list[Case]:
    dataset = load_dataset(dataset_dir)
    heuristic = FastHeuristic(dataset.snapshot)
    cases = []
    for query in dataset.queries:
        ranked, evidence, _ = heuristic.rank(query.query)
        cases.append(Case(dataset_dir.name, query.id, query.kind, query.relevant, ranked[:2], evidence))
    return cases


class Table:
    """The cases as arrays, so that one grid point is a handful of vectorised comparisons."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases
        self.datasets = sorted({c.dataset for c in cases})
        self.dataset = np.array([self.datasets.index(c.dataset) for c in cases])
        self.kinds = sorted({(c.dataset, c.kind) for c in cases if c.relevant})
        self.kind = np.array([self.kinds.index((c.dataset, c.kind)) if c.relevant else -1 for c in cases])
        self.answerable = np.array([bool(c.relevant) for c in cases])
        self.has = np.array([len(c.ranked) for c in cases])
        self.hit = np.array([[_relevant(c, i) for i in range(2)] for c in cases])
        ratio = [c.ranked[1].score / c.ranked[0].score if len(c.ranked) > 1 else 0.0 for c in cases]
        self.ratio = np.array(ratio)
        self.terms = np.array([[_ev(c, i, Evidence.specific_terms) for i in range(2)] for c in cases])
        self.head = np.array([[_ev(c, i, Evidence.head_terms) for i in range(2)] for c in cases])
        self._coverage: dict[tuple[float, float], np.ndarray] = {}

    def coverage(self, *key: float) -> np.ndarray:
        if key not in self._coverage:
            self._coverage[key] = np.array(
                [[_ev(c, i, lambda e: e.coverage(*key)) for i in range(2)] for c in self.cases]
            )
        return self._coverage[key]


def _relevant(case: Case, i: int) -> bool:
    return len(case.ranked) > i and case.ranked[i].doc.ref in case.relevant


def _ev(case: Case, i: int, feature) -> float:
    return feature(case.evidence[i]) if len(case.evidence) > i else 0.0


def figures(table: Table, gate: GateSettings) -> dict[str, float]:
    """strict, silence and precision per dataset for ``gate``."""
    cov = table.coverage(gate.unknown_weight, gate.generic_weight, gate.cjk_unknown_weight)
    ok = (table.terms >= gate.min_terms) & (table.head >= gate.min_head_terms)
    first = (table.has > 0) & ok[:, 0] & (cov[:, 0] >= gate.min_coverage)
    second = (
        first
        & (table.has > 1)
        & (table.ratio >= gate.second_score_ratio)
        & ok[:, 1]
        & (cov[:, 1] >= gate.second_min_coverage)
    )
    delivered = first.astype(int) + second
    hits = (first & table.hit[:, 0]).astype(int) + (second & table.hit[:, 1])
    out: dict[str, float] = {}
    for index, name in enumerate(table.datasets):
        mine = table.dataset == index
        answerable = mine & table.answerable
        negatives = mine & ~table.answerable
        n_answerable, n_negatives = answerable.sum(), negatives.sum()
        n_delivered = delivered[mine].sum()
        out[f"{name}.strict"] = (hits[answerable] > 0).sum() / n_answerable if n_answerable else 1.0
        out[f"{name}.silence"] = (delivered[negatives] == 0).sum() / n_negatives if n_negatives else 1.0
        out[f"{name}.precision"] = hits[mine].sum() / n_delivered if n_delivered else 1.0
    for index, (name, kind) in enumerate(table.kinds):
        mine = table.kind == index
        out[f"{name}.{kind}.strict"] = (hits[mine] > 0).sum() / mine.sum()
    return out


def objective(result: dict[str, float]) -> float:
    """Shortfall against issue 3's targets (with margins), summed; higher is better."""
    shortfall = 0.0
    for key, target in TARGETS.items():
        if key in result:
            shortfall += max(0.0, target - result[key])
    return -shortfall


def best_gate(cases: list[Case]) -> GateSettings:
    tuned = Table([c for c in cases if c.tuned_on])
    best: tuple[float, GateSettings] | None = None
    for values in itertools.product(*GRID.values()):
        gate = GateSettings(**dict(zip(GRID, values)))
        score = objective(figures(tuned, gate))
        if best is None or score > best[0]:
            best = (score, gate)
    assert best is not None
    return best[1]


def main(dirs: list[Path]) -> None:
    cases = [case for d in dirs if (d / "queries.jsonl").exists() for case in collect(d)]
    held_out: list[dict[str, float]] = []
    for fold in range(FOLDS):
        train = [c for c in cases if fold_of(c.id, FOLDS) != fold]
        test = [c for c in cases if fold_of(c.id, FOLDS) == fold]
        gate = best_gate(train)
        result = figures(Table([c for c in test if c.tuned_on]), gate)
        held_out.append(result)
        print(f"fold {fold}: {gate}")
        print("   held out:", {k: round(v, 3) for k, v in result.items()})
    print("held-out spread:")
    for key in sorted({k for r in held_out for k in r}):
        values = [r[key] for r in held_out if key in r]
        print(f"   {key:32} min {min(values):.3f} mean {sum(values) / len(values):.3f} max {max(values):.3f}")
    final = best_gate(cases)
    print("chosen on all folds:", final)
    print("   ", {k: round(v, 3) for k, v in figures(Table([c for c in cases if c.tuned_on]), final).items()})


# --- pytest-benchmark micro benchmarks ------------------------------------------------------

AGENT_MEMORIES = Path(__file__).parent / "datasets" / "agent-memories"
PROMPT = "celery beat isn't scheduling import_from_parcelhub anymore, nothing ran at 02:30"


def test_benchmark_tokenize_prompt(benchmark) -> None:
    from recall_kit._tokenize import tokenize

    assert benchmark(tokenize, PROMPT)


def test_benchmark_tokenize_memory(benchmark) -> None:
    from recall_kit._tokenize import tokenize

    dataset = load_dataset(AGENT_MEMORIES)
    text = max((doc.body for doc in dataset.snapshot.docs.values()), key=len)
    assert benchmark(tokenize, text)


def test_benchmark_recall_agent_memories(benchmark) -> None:
    heuristic = FastHeuristic(load_dataset(AGENT_MEMORIES).snapshot)
    assert benchmark(heuristic.recall, PROMPT).ranked


def test_benchmark_recall_with_typo_10k(benchmark) -> None:
    from recall_kit_bench import generated_queries, generated_snapshot, generated_vocabulary

    vocabulary = generated_vocabulary()
    heuristic = FastHeuristic(generated_snapshot(10_000, vocabulary))
    prompt = generated_queries(vocabulary, 1)[0]  # the first generated prompt carries a typo
    assert benchmark(heuristic.recall, prompt).ranked


if __name__ == "__main__":
    main([Path(arg) for arg in sys.argv[1:]] or DEFAULT_DATASETS)
