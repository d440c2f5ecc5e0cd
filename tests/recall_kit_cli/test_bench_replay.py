"""`recall-kit bench replay`: bad arguments are one line and exit 2; with the engine's learning,
the JSON report's shape (baseline and learned as `bench delivery` reports them, repeat, folds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import REPORT_KEYS, RunCli, assert_one_line_error, json_out


@pytest.mark.parametrize(
    "args, words",
    [
        (("--oracle-accuracy", "1.5"), ("--oracle-accuracy", "0 to 1")),
        (("--oracle-accuracy", "most"), ("--oracle-accuracy",)),
        (("--oracle-accuracy", "nan"), ("--oracle-accuracy",)),
        (("--folds", "1"), ("folds", "2 to 1000")),
        (("--folds", "1000000000000"), ("folds", "2 to 1000")),
        (("--folds", "five"), ("--folds", "whole number")),
        (("--seed", "x"), ("--seed", "whole number")),
        (("--passes", "0"), ("passes", "1 to 100")),
        (("--passes", "1000000000000"), ("passes", "1 to 100")),
        (("--passes", "two"), ("--passes", "whole number")),
        (("--measure-folds", "0,9"), ("measured folds", "0..4")),
        (("--measure-folds", ","), ("--measure-folds",)),
        (("--measure-folds", "1", "--folds", "1"), ("folds",)),
        (("--enrichment", "x.jsonl", "--no-enrichment"), ("exclude each other",)),
        (("--enrichment", "missing.jsonl"), ("enrichment sidecar not found",)),
    ],
)
def test_bench_replay_refuses_bad_arguments_in_one_line(
    run_cli: RunCli, dataset: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    assert_one_line_error(run_cli("bench", "replay", str(dataset), *args), *words)


def test_bench_replay_refuses_a_folder_that_is_not_a_dataset(run_cli: RunCli, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("bench", "replay", str(tmp_path)), "is not a dataset")


def test_bench_replay_json_has_baseline_learned_repeat_folds_and_settings(run_cli: RunCli, dataset: Path) -> None:
    report = json_out(run_cli("bench", "replay", str(dataset), "--repeat", "--oracle-accuracy", "0.8", "--json"))
    for side in ("baseline", "learned"):
        assert REPORT_KEYS <= report[side].keys() and "by_kind" in report[side]
        assert set(report[side]["folds"]["strict_delivery"]) == {"median", "min", "max"}
    assert REPORT_KEYS <= report["repeat"].keys()
    assert report["settings"]["oracle_accuracy"] == 0.8 and report["settings"]["wrong_answers"] == 1  # round(0.2 * 5)
    assert [f["fold"] for f in report["folds"]] == report["settings"]["measured_folds"]
    assert report["cost"]["sidecar_bytes_per_memory"]["median"] is not None
    text = run_cli("bench", "replay", str(dataset), "--measure-folds", "1")
    assert text.returncode == 0 and "base / learned" in text.stdout


def test_bench_replay_turn_ends_early_learns_after_each_turn(run_cli: RunCli, dataset: Path) -> None:
    report = json_out(run_cli("bench", "replay", str(dataset), "--turn-ends-early", "--measure-folds", "1", "--json"))
    assert report["settings"]["turn_ends_early"] is True
    assert all(f["learned_after_turn"] == f["trained"] > 0 for f in report["folds"])


def test_bench_replay_passes_trains_on_each_prompt_that_many_times(run_cli: RunCli, dataset: Path) -> None:
    one = json_out(run_cli("bench", "replay", str(dataset), "--measure-folds", "1", "--json"))
    two = json_out(run_cli("bench", "replay", str(dataset), "--passes", "2", "--measure-folds", "1", "--json"))
    assert two["settings"]["passes"] == 2 and one["settings"]["passes"] == 1
    assert [f["trained"] for f in two["folds"]] == [2 * f["trained"] for f in one["folds"]]
    text = run_cli("bench", "replay", str(dataset), "--passes", "2", "--measure-folds", "1")
    assert text.returncode == 0 and "2 training passes" in text.stdout


def test_bench_replay_skip_certain_reports_the_turns_the_model_was_skipped_on(run_cli: RunCli, dataset: Path) -> None:
    report = json_out(run_cli("bench", "replay", str(dataset), "--skip-certain", "--measure-folds", "1", "--json"))
    assert report["settings"]["skip_certain"] is True
    assert all(0 <= f["model_skipped_differs"] <= f["model_skipped"] <= f["trained"] for f in report["folds"])
