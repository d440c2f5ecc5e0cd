"""The grid search that chose the gate's constants (bench/bench_heuristic.py) gates every dataset query
exactly as GateSettings.select does: it reads the same features (tuning.gate_features) and calls the
engine's own rules over columns of them (GateSettings.judge), learned credit and suppression included."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from memory_store import LearningUpdate, MemoryStore
from recall_kit import FastHeuristic, learnable_words
from recall_kit.tuning import GateSettings
from recall_kit_bench import DATASET_SCOPE, load_dataset

BENCH = Path(__file__).parents[3] / "bench"
DATASETS = BENCH / "datasets"
GATES = {
    "default": GateSettings(),
    "tie rule on": GateSettings(tie_ratio=0.8, tie_min_head_terms=2.5),
    "strict": GateSettings(min_coverage=0.3, min_head_terms=2, second_score_ratio=0.5, min_phrase_terms=3),
    "loose": GateSettings(
        min_coverage=0.15, generic_weight=0.5, enrichment_head_credit=1.0, second_min_coverage=0.3,
        enrichment_vocabulary_weight=1.0,
    ),
    "learned words count half": GateSettings(learned_head_credit=0.5, min_head_terms=1.5),
    "unmatched-words rule eager": GateSettings(unmatched_share=0.2, unmatched_known_share=0.1),
}


@pytest.fixture(scope="module")
def bench_heuristic() -> ModuleType:
    """bench/bench_heuristic.py, loaded from its file (bench/ is scripts, not an installed package)."""
    spec = importlib.util.spec_from_file_location("bench_heuristic_under_test", BENCH / "bench_heuristic.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def _selected(gate: GateSettings, case) -> list[str]:
    return [scored.doc.ref for scored in gate.select(case.ranked, case.evidence)]


@pytest.mark.parametrize(
    ("dataset", "enrichment"),
    [
        ("agent-memories", True), ("agent-memories", False), ("multilingual", True), ("multilingual", False),
        ("hard-cases", False), ("coding-memories", True),
    ],
)
def test_the_gate_search_delivers_what_select_delivers_on_every_dataset_query(
    bench_heuristic: ModuleType, dataset: str, enrichment: bool
) -> None:
    cases = bench_heuristic.collect(dataset, DATASETS / dataset, enrichment)
    table = bench_heuristic.Table(cases)
    for gate in GATES.values():
        searched = bench_heuristic.delivered_refs(table, gate)
        assert searched == [_selected(gate, case) for case in cases]
    delivered = sum(map(bool, bench_heuristic.delivered_refs(table, GateSettings())))
    assert 0 < delivered < len(cases)  # the gate both delivers and stays silent here: the comparison means something


def test_the_gate_search_agrees_with_the_fast_stage_on_a_store_that_has_learned(
    bench_heuristic: ModuleType, tmp_path: Path
) -> None:
    dataset = tmp_path / "agent-memories"
    shutil.copytree(DATASETS / "agent-memories", dataset)
    plain = load_dataset(dataset, enrichment=False)
    heuristic = FastHeuristic(plain.snapshot)
    updates = []
    for number, query in enumerate(plain.queries):  # taught as a model would: chosen ones gain, a refused one is held
        words = learnable_words(query.query)
        if query.relevant and words.keys and number % 2 == 0:
            updates += [LearningUpdate(ref.partition("/")[2], keys=words.keys) for ref in query.relevant]
        ranked = heuristic.recall(query.query).ranked
        if ranked and ranked[0].doc.ref not in query.relevant and words.words and number % 3 == 0:
            updates.append(LearningUpdate(ranked[0].doc.path, suppress=words.words))
    with MemoryStore.open((DATASET_SCOPE, dataset / "memories"), watch=False, enrichment=False) as store:
        store.record_learning(DATASET_SCOPE, updates)

    cases = bench_heuristic.collect("agent-memories+learned", dataset, False)
    learned = load_dataset(dataset, enrichment=False)
    assert sum(doc.learned is not None for doc in learned.snapshot.docs.values()) > 10
    table = bench_heuristic.Table(cases)
    for gate in GATES.values():
        fast = FastHeuristic(learned.snapshot, gate=gate)
        expected = [[scored.doc.ref for scored in fast.recall(query.query).docs] for query in learned.queries]
        assert [_selected(gate, case) for case in cases] == expected
        assert bench_heuristic.delivered_refs(table, gate) == expected


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--frontir"], "unknown option --frontir"),
        (["--frontier", "coding-memories-3"], "--frontier takes a variant, not coding-memories-3"),
    ],
)
def test_a_mistyped_option_is_one_line_not_a_search(args: list[str], says: str) -> None:
    # an option the script does not know used to start the whole 25-minute search
    done = subprocess.run([sys.executable, str(BENCH / "bench_heuristic.py"), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()] and says in done.stderr
    assert not done.stdout


def test_help_prints_the_usage_and_searches_nothing() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "bench_heuristic.py"), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0
    assert done.stdout.startswith("Choosing the confidence gate") and "--frontier [VARIANT]" in done.stdout
    assert "fold 0:" not in done.stdout  # what the search prints first
