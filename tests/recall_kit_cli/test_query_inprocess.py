"""The query and bench commands, end to end through the click application."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from recall_kit_cli._app import cli



QUERY_KEYS = {"queries", "answerable", "negatives", "strict_delivery", "loose_delivery", "negative_silence", "precision"}


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    (root / "db").mkdir(parents=True)
    (root / "db" / "postgres.md").write_text(
        "---\nname: Postgres setup\ndescription: routewise stores trips in PostgreSQL behind pgbouncer\n"
        "type: project\n---\nRun alembic upgrade head for migrations.\n"
    )
    (root / "editor.md").write_text(
        "---\nname: Editor\ndescription: Neovim with lazy.nvim and tabs of width 4\ntype: user\n---\nNo format on save.\n"
    )
    return root


def test_query_json_lists_the_delivered_document(memory_root: Path) -> None:
    result = CliRunner().invoke(
        cli, ["query", "routewise pgbouncer connection", "--root", str(memory_root), "--json", "--fast-only"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [d["ref"] for d in data["docs"]] == ["mem/db/postgres.md"]
    assert data["strategy"] == "heuristic" and data["fast_ms"] >= 0
    assert "alembic upgrade head" in data["rendered"]


def test_query_text_says_when_nothing_is_delivered(memory_root: Path) -> None:
    result = CliRunner().invoke(cli, ["query", "sourdough starter", "--root", str(memory_root)])
    assert result.exit_code == 0
    assert "delivered at once (" in result.output and "): nothing, no confident match" in result.output


def test_query_with_a_missing_root_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["query", "x", "--root", str(tmp_path / "absent")])
    assert result.exit_code == 2


def test_bench_delivery_json_has_the_issue_keys_and_a_baseline(tmp_path: Path, memory_root: Path) -> None:
    dataset = tmp_path / "ds"
    (dataset).mkdir()
    memory_root.rename(dataset / "memories")
    queries = [
        {"id": "a", "query": "routewise pgbouncer postgres", "relevant": ["db/postgres.md"], "kind": "lexical"},
        {"id": "b", "query": "sourdough starter feeding", "relevant": [], "kind": "negative"},
    ]
    (dataset / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    result = CliRunner().invoke(cli, ["bench", "delivery", str(dataset), "--fast-only", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert QUERY_KEYS <= report.keys() and QUERY_KEYS <= report["baseline"].keys()
    assert set(report["by_kind"]) == {"lexical", "negative"}
    assert QUERY_KEYS <= report["by_kind"]["lexical"].keys()
    assert report["strict_delivery"] == 1.0 and report["negative_silence"] == 1.0
    assert set(report["fast_ms"]) == {"p50", "p99"}
    assert set(report["initial_wait_ms"]) == {"p50", "p99", "max"}
    text = CliRunner().invoke(cli, ["bench", "delivery", str(dataset)])
    assert text.exit_code == 0 and "ours / base" in text.output


def test_bench_delivery_rejects_a_folder_that_is_not_a_dataset(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["bench", "delivery", str(tmp_path)])
    assert result.exit_code == 2 and "not a dataset" in result.output


def test_bench_latency_on_small_generated_stores() -> None:
    result = CliRunner().invoke(cli, ["bench", "latency", "--docs", "20,50", "--json"])
    assert result.exit_code == 0, result.output
    sizes = json.loads(result.output)["sizes"]
    assert [row["docs"] for row in sizes] == [20, 50]
    assert "enriched" not in sizes[0]  # the enriched comparison is only run when asked for
    for row in sizes:
        assert {"p50", "p99"} <= row["fast_ms"].keys() and {"p50", "p99"} <= row["update_ms"].keys()
        assert row["rank_bm25_ms"]["p50"] >= 0


def test_bench_latency_enriched_times_the_same_store_with_and_without_its_sidecar() -> None:
    result = CliRunner().invoke(cli, ["bench", "latency", "--docs", "30", "--enriched", "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)["enriched"]
    assert row["docs"] == 30 and row["enriched_docs"] == 30
    assert row["head_words"]["enriched"] > 2.5 * row["head_words"]["unenriched"] > 0
    for side in ("unenriched", "enriched"):
        for timing in ("fast_ms", "fast_cpu_ms"):
            assert 0 < row[side][timing]["p50"] <= row[side][timing]["p99"] <= row[side][timing]["max"]
    text = CliRunner().invoke(cli, ["bench", "latency", "--docs", "30", "--enriched"])
    assert text.exit_code == 0 and "enriched p50" in text.output
    assert text.output.splitlines()[1].split()[0] == "30"


def test_bench_latency_rejects_bad_sizes() -> None:
    assert CliRunner().invoke(cli, ["bench", "latency", "--docs", "ten"]).exit_code == 2
