"""`bench replay`'s harness: folds, the oracle's (seeded) answers over real loopback HTTP, real
sessions driven to settlement, the baseline path, the memories' copy and the report's shape."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from pathlib import Path

import pytest

from memory_store import MemoryStore, sidecar_path
from recall_kit import FastHeuristic, LearnEvent, ModelSelector, RecallEvent, SelectorConfig, UsageError, open_recaller
from recall_kit.testing import ScriptedChatServer
from recall_kit_bench import (
    DeliveryReport,
    EvalDataset,
    FoldResult,
    HarnessError,
    QueryOutcome,
    ReplayReport,
    ReplaySettings,
    TrainingSummary,
    baseline_fold,
    copy_memories,
    fast_deliver,
    fold_of,
    fold_split,
    load_dataset,
    oracle_answers,
    replay_table,
    run,
    run_replay,
    write_eval_dataset,
)
from session_support import EVAL_QUERIES, MEMORIES

QUERIES = [
    *EVAL_QUERIES,
    ("q7", "ship it to staging", ["deploy.md"], "paraphrase"),
    ("q8", "a good sourdough recipe", [], "negative"),
    ("q9", "ship the release to staging", ["deploy.md"], "paraphrase"),  # q7's words again: fold 1, q7's is 4
]


def many_queries(n: int) -> list[tuple[str, str, list[str], str]]:
    """``n`` queries, two answerable for each negative."""
    paths = list(MEMORIES)
    return [
        (f"m{i}", f"question number {i}", [] if i % 3 == 2 else [paths[i % len(paths)]], "negative" if i % 3 == 2 else "x")
        for i in range(n)
    ]


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    return write_eval_dataset(tmp_path / "mini", MEMORIES, QUERIES)


def test_folds_split_every_query_into_its_fold_or_the_trained_rest(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    seen: list[str] = []
    for fold in range(5):
        mine, others = fold_split(dataset, 5, fold)
        assert all(fold_of(q.id, 5) == fold for q in mine)
        assert {q.id for q in mine}.isdisjoint(q.id for q in others)
        assert len(mine) + len(others) == len(dataset.queries)
        assert [q.id for q in others] == [q.id for q in dataset.queries if q not in mine]  # file order
        seen += [q.id for q in mine]
    assert sorted(seen) == sorted(q.id for q in dataset.queries)


def test_a_perfect_oracle_answers_the_gold_refs_and_nothing_for_a_negative(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    answers = oracle_answers(dataset, 1.0, 0)
    assert answers.wrong == frozenset()
    assert answers.refs == tuple(tuple(sorted(q.relevant)) for q in dataset.queries)
    lines = answers.oracle_lines(dataset.queries)
    assert lines[0] == {"query": QUERIES[0][1], "relevant": ["db.md"]} and lines[5]["relevant"] == []


def test_the_wrong_share_is_exact_seeded_and_half_another_memory_half_nothing(tmp_path: Path) -> None:
    dataset = load_dataset(write_eval_dataset(tmp_path / "many", MEMORIES, many_queries(60)))
    answers = oracle_answers(dataset, 0.8, 7)
    assert len(answers.wrong) == 12  # round(0.2 * 60): a share, exactly
    assert oracle_answers(dataset, 0.8, 7) == answers  # the seed decides, nothing else
    assert oracle_answers(dataset, 0.8, 8).wrong != answers.wrong
    right = set(range(60)) - answers.wrong
    assert all(answers.refs[i] == tuple(sorted(dataset.queries[i].relevant)) for i in right)
    wrong_answerable = [i for i in sorted(answers.wrong) if dataset.queries[i].relevant]
    nothing = [i for i in wrong_answerable if answers.refs[i] == ()]
    other = [i for i in wrong_answerable if answers.refs[i]]
    assert abs(len(nothing) - len(other)) <= 1 and nothing and other
    for i in other:
        (ref,) = answers.refs[i]
        assert ref in dataset.snapshot.docs and ref not in dataset.queries[i].relevant
    for i in answers.wrong - set(wrong_answerable):  # a negative's wrong answer is a memory: nothing is right
        assert len(answers.refs[i]) == 1 and answers.refs[i][0] in dataset.snapshot.docs
    assert len(oracle_answers(dataset, 0.0, 0).wrong) == 60


def test_the_scripted_oracle_selects_the_planned_refs_over_loopback(tmp_path: Path, dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    answers = oracle_answers(dataset, 0.5, 3)
    oracle = tmp_path / "oracle.jsonl"
    oracle.write_text("".join(json.dumps(line) + "\n" for line in answers.oracle_lines(dataset.queries)))
    docs = list(dataset.snapshot.docs.values())

    async def select_all() -> list[tuple[str, ...]]:
        selector = ModelSelector(server.base_url, "scripted")
        try:
            return [tuple(sorted(d.ref for d in (await selector.select(q.query, docs)).docs)) for q in dataset.queries]
        finally:
            await selector.aclose()

    with ScriptedChatServer(oracle=oracle) as server:
        chosen = asyncio.run(select_all())
    assert chosen == list(answers.refs)
    assert any(answers.refs[i] != tuple(sorted(dataset.queries[i].relevant)) for i in answers.wrong)


def test_training_drives_each_prompt_through_a_real_session_to_its_settled_model_answer(
    tmp_path: Path, dataset_dir: Path
) -> None:
    from recall_kit_bench._replay import _TurnTelemetry, train  # the session driver, before learn= exists

    dataset = load_dataset(dataset_dir)
    with ScriptedChatServer(oracle=dataset_dir / "queries.jsonl", latency_ms=150) as server:
        config = SelectorConfig(base_url=server.base_url, model="scripted")
        events: list[RecallEvent] = []

        async def go() -> tuple[int, int, int]:
            telemetry = _TurnTelemetry(asyncio.get_running_loop())

            def sink(event: object) -> None:
                telemetry(event)
                if isinstance(event, RecallEvent):
                    events.append(event)

            recaller = open_recaller(
                [copy_memories(dataset, None, tmp_path)], selector=config, watch=False, use_cache=False, telemetry=sink
            )
            try:
                turns, unsettled, _ = await train(recaller, dataset.queries, lambda: None)
            finally:
                await recaller.aclose()
            return turns, unsettled, telemetry.fallbacks

        turns, unsettled, fallbacks = asyncio.run(go())
        requests = server.wait_for_requests(len(QUERIES))
    assert (turns, unsettled, fallbacks) == (len(QUERIES), 0, 0)
    assert [r.query for r in requests] == [q[1] for q in QUERIES]  # one model request per prompt, in order
    # every turn waited for its model answer (150 ms) before finishing: settled, not cancelled
    assert [e.settled for e in events] == [True] * len(QUERIES)
    assert all(e.model_ms is not None and e.model_ms >= 150 for e in events)


def test_the_baseline_is_the_bare_heuristic_over_the_untouched_memories(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    mine, _ = fold_split(dataset, 5, 0)
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:
        outcomes = baseline_fold(heuristic, dataset, mine)
        expected = [heuristic.recall(q.query).docs for q in mine]
    assert [o.query for o in outcomes] == mine
    assert [o.delivered for o in outcomes] == [tuple(s.doc.ref for s in docs) for docs in expected]


def test_the_copy_holds_the_memories_and_the_chosen_sidecar_only(tmp_path: Path, dataset_dir: Path) -> None:
    original = dataset_dir / "memories"
    (original / ".recall-kit").mkdir()
    (original / ".recall-kit" / "learned.jsonl").write_text('{"path": "db.md", "keys": [["x", 1, 1.0]]}\n')
    outside = tmp_path / "enrichment.jsonl"
    outside.write_text("")
    dataset = load_dataset(dataset_dir, enrichment=False)
    root = copy_memories(dataset, outside, tmp_path / "copy")
    assert root.name == "memories"  # the scope label the dataset's refs carry
    assert sorted(p.name for p in (root / ".recall-kit").iterdir()) == ["enrichment.jsonl"]
    assert sidecar_path(root).stat().st_mode & 0o777 == 0o600
    with MemoryStore.open(root, watch=False) as store:
        assert sorted(store.snapshot().docs) == sorted(dataset.snapshot.docs)
    assert (original / ".recall-kit" / "learned.jsonl").read_text().startswith('{"path"')  # untouched
    bare = copy_memories(dataset, None, tmp_path / "bare")
    assert not (bare / ".recall-kit").exists()


@pytest.mark.parametrize(
    "settings, words",
    [
        (ReplaySettings(folds=1), "folds"),
        (ReplaySettings(oracle_accuracy=1.5), "oracle accuracy"),
        (ReplaySettings(oracle_accuracy=float("nan")), "oracle accuracy"),
        (ReplaySettings(measure_folds=(5,)), "0..4"),
        (ReplaySettings(measure_folds=()), "0..4"),
        (ReplaySettings(passes=0), "passes"),
    ],
)
def test_settings_out_of_range_are_refused_before_anything_runs(
    dataset_dir: Path, settings: ReplaySettings, words: str
) -> None:
    with pytest.raises(UsageError, match=words):
        run_replay(load_dataset(dataset_dir), settings=settings)


def _report(dataset_dir: Path, repeat: bool) -> ReplayReport:
    """A report from real baseline outcomes; the 'learned' side is the baseline with one prompt fixed."""
    dataset = load_dataset(dataset_dir)
    settings = ReplaySettings(measure_folds=(0, 1, 2, 3, 4), repeat=repeat)
    folds = []
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:
        for f in range(5):
            mine, others = fold_split(dataset, 5, f)
            base = baseline_fold(heuristic, dataset, mine)
            learned = [o if o.query.id != "q3" else QueryOutcome(o.query, ("memories/tea.md",), 0.1, 0.1) for o in base]
            again = baseline_fold(heuristic, dataset, others) if repeat else []
            folds.append(FoldResult(f, tuple(base), tuple(learned), tuple(again), TrainingSummary(len(others), 0, 0), 120, 2))
    measured = [o.query for fold in folds for o in fold.baseline]
    return ReplayReport(EvalDataset(dataset.root, dataset.snapshot, tuple(measured)), settings, settings.measured(),
                        tuple(folds), None, 0)


def test_the_report_json_has_bench_delivery_keys_beside_the_deltas_folds_and_settings(dataset_dir: Path) -> None:
    report = _report(dataset_dir, repeat=False)
    data = json.loads(json.dumps(report.as_dict()))
    delivery_keys = DeliveryReport.of(report.dataset, report.baseline_outcomes).as_dict().keys()
    assert data["baseline"].keys() == delivery_keys and data["learned"].keys() == delivery_keys
    assert set(data["learned"]["by_kind"]) == {"lexical", "semantic", "paraphrase", "negative"}
    assert data["baseline"]["by_kind"]["semantic"]["strict_delivery"] == 0.0
    assert data["learned"]["by_kind"]["semantic"]["strict_delivery"] == 1.0
    assert data["delta"]["by_kind"]["semantic"]["strict_delivery"] == 1.0
    assert data["delta"]["strict_delivery"] == pytest.approx(
        data["learned"]["strict_delivery"] - data["baseline"]["strict_delivery"])
    assert set(data["learned"]["folds"]["strict_delivery"]) == {"median", "min", "max"}
    assert "repeat" not in data
    assert [f["fold"] for f in data["folds"]] == [0, 1, 2, 3, 4]
    assert sum(f["measured"] for f in data["folds"]) == len(QUERIES)
    assert data["cost"]["sidecar_bytes_per_memory"]["median"] == 120 / len(MEMORIES)
    assert "learn_update_ms_p50" not in data["cost"]  # no learner time reported: left out
    assert data["settings"] == {"folds": 5, "measured_folds": [0, 1, 2, 3, 4], "oracle_accuracy": 1.0,
                                "wrong_answers": 0, "seed": 0, "repeat": False, "turn_ends_early": False,
                                "passes": 1, "skip_certain": False, "enrichment": None}
    table = replay_table(report)
    assert "base / learned" in table and "semantic" in table and "+1.000" in table and "repeat" not in table


def test_repeat_reports_the_trained_prompts_by_kind(dataset_dir: Path) -> None:
    report = _report(dataset_dir, repeat=True)
    data = report.as_dict()
    repeat = data["repeat"]
    assert repeat["queries"] == sum(f.training.turns for f in report.folds) == 4 * len(QUERIES)
    assert {"strict_delivery", "negative_silence", "by_kind", "folds"} <= repeat.keys()
    assert set(repeat["by_kind"]) == {"lexical", "semantic", "paraphrase", "negative"}
    assert "negative_silence_where_baseline_delivered" in repeat
    assert all("repeat" in f for f in data["folds"])
    assert "repeat (the trained prompts again" in replay_table(report)


def test_replay_learns_from_the_oracle_and_repeats_what_it_was_taught(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    report = run_replay(dataset, settings=ReplaySettings(repeat=True))
    data = report.as_dict()
    assert sum(f["unsettled"] + f["fallbacks"] + f["learn_dropped"] for f in data["folds"]) == 0
    # "ship it to staging" shares no word with deploy.md; once its words came in two training turns (q7's
    # and q9's: every fold but 1 and 4, where one of them is measured), its repeat is delivered
    both = {f.fold for f in report.folds if not {fold_of("q7", 5), fold_of("q9", 5)} & {f.fold}}
    assert both == {0, 2, 3}
    assert all((f["sidecar_bytes"] > 0) == (f["fold"] in both) for f in data["folds"])
    assert all(0 < f["learned_memories"] <= len(MEMORIES) for f in data["folds"] if f["fold"] in both)  # memories
    for fold in report.folds:
        repeated = [o for o in fold.repeat if o.query.id == "q7"]
        if fold.fold != fold_of("q7", 5):
            assert [("memories/deploy.md" in o.delivered) for o in repeated] == [fold.fold in both]
    assert data["repeat"]["strict_delivery"] >= data["baseline"]["strict_delivery"]
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:  # the dataset itself was not written to
        assert [o.delivered for o in run(dataset, fast_deliver(heuristic))] == [
            o.delivered for o in sorted(report.baseline_outcomes, key=lambda o: o.query.id)
        ]
    assert not (dataset_dir / "memories" / ".recall-kit" / "learned.jsonl").exists()


def test_turns_that_end_before_the_oracle_answers_learn_what_full_turns_learn(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    full = run_replay(dataset, settings=ReplaySettings(repeat=True)).as_dict()
    early = run_replay(dataset, settings=ReplaySettings(repeat=True, turn_ends_early=True))
    data = early.as_dict()
    assert data["settings"]["turn_ends_early"] is True
    # every training turn finished before its answer, which then taught after the turn
    assert all(f["learned_after_turn"] == f["trained"] and f["unsettled"] == 0 for f in data["folds"])
    assert [f["learned_memories"] for f in data["folds"]] == [f["learned_memories"] for f in full["folds"]]
    for key in ("strict_delivery", "negative_silence"):
        assert data["learned"][key] == full["learned"][key] and data["repeat"][key] == full["repeat"][key]
    assert "ends before the oracle answers" in replay_table(early)


def test_the_turn_telemetry_counts_fallbacks_and_reads_learn_events() -> None:
    from recall_kit_bench._replay import _TurnTelemetry

    async def go() -> _TurnTelemetry:
        telemetry = _TurnTelemetry(asyncio.get_running_loop())
        settled = RecallEvent(session_id="s1", handle_id=1, query_chars=3, docs_scanned=1, docs_selected=0,
                              strategy="model", fast_ms=0.1, model_ms=1.0, settled=True)
        telemetry(settled)
        learned = LearnEvent(outcome="learned", reason=None, taught=("m/a.md",), suppressed=(), words=3, dropped=0,
                             duration_ms=2.5)
        telemetry(learned)
        telemetry(dataclasses.replace(learned, outcome="skipped", reason="nothing to teach", duration_ms=0.0))  # no time
        await asyncio.wait_for(telemetry.learned.wait(), 1)  # set from the learner's thread, on the loop
        return telemetry

    telemetry = asyncio.run(go())
    assert telemetry.fallbacks == 0 and telemetry.learn_ms == [2.5]
    assert telemetry.learn_outcomes == {"learned": 1, "skipped": 1}


def test_two_passes_put_a_suppressor_in_effect_for_a_negative_the_fast_stage_answers(tmp_path: Path) -> None:
    # "pgbouncer postgres dashboard colours" reaches db.md by its words; the oracle says nothing applies (and no
    # trained prompt shares half its words, so none releases the suppressor)
    queries = [*QUERIES, ("n1", "pgbouncer postgres dashboard colours", [], "negative")]
    dataset = load_dataset(write_eval_dataset(tmp_path / "mini", MEMORIES, queries))
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:
        assert fast_deliver(heuristic)("pgbouncer postgres dashboard colours")[0] == ["memories/db.md"]

    def repeated(passes: int) -> list[tuple[str, ...]]:
        report = run_replay(dataset, settings=ReplaySettings(repeat=True, passes=passes))
        assert report.as_dict()["settings"]["passes"] == passes
        assert all(f.training.turns == passes * len(fold_split(dataset, 5, f.fold)[1]) for f in report.folds)
        return [o.delivered for o in report.repeat_outcomes if o.query.id == "n1"]

    once, twice = repeated(1), repeated(2)
    assert once and all(got == ("memories/db.md",) for got in once)  # one answer: counted, not yet in effect
    assert len(twice) == len(once) and all(got == () for got in twice)  # the second answer puts it in effect


def test_skip_certain_counts_the_training_turns_settled_without_the_model(dataset_dir: Path) -> None:
    dataset = load_dataset(dataset_dir)
    with contextlib.closing(FastHeuristic(dataset.snapshot)) as heuristic:
        certain = {q.id for q in dataset.queries if heuristic.recall(q.query).certain}
    assert certain and len(certain) < len(dataset.queries)  # some prompts are certain, not all
    report = run_replay(dataset, settings=ReplaySettings(skip_certain=True))
    data = report.as_dict()
    assert data["settings"]["skip_certain"] is True
    for fold in report.folds:
        trained = fold_split(dataset, 5, fold.fold)[1]
        assert fold.training.skipped == sum(q.id in certain for q in trained)
        assert fold.training.skipped_differs == 0  # the oracle would have answered what the fast stage delivered
    assert "model skipped (the fast answer certain) on" in replay_table(report)
    plain = run_replay(dataset, settings=ReplaySettings())
    assert all(f.training.skipped == 0 for f in plain.folds) and "model skipped" not in replay_table(plain)
