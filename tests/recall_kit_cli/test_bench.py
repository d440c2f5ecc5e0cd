"""`recall-kit bench delivery`: the report's keys in every mode, the refined phase against a real
(scripted, loopback) endpoint, the lifecycle bench under a latency profile, and bad input."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from cli_support import EXAMPLES, REPORT_KEYS, RunCli, assert_one_line_error, clean_environ, json_out

from recall_kit.testing import Reply, ScriptedChatServer


def assert_issue_3_report(report: dict) -> None:
    assert REPORT_KEYS <= report.keys()
    assert report["queries"] == 5 and report["answerable"] == 4 and report["negatives"] == 1
    assert set(report["by_kind"]) == {"lexical", "semantic", "negative"}
    for per_kind in report["by_kind"].values():
        assert REPORT_KEYS <= per_kind.keys()
    assert set(report["fast_ms"]) == {"p50", "p99"}
    assert set(report["initial_wait_ms"]) == {"p50", "p99", "max"}
    assert REPORT_KEYS <= report["baseline"].keys()


def test_bench_fast_only_json_has_issue_3_keys_folds_and_the_baseline(run_cli: RunCli, dataset: Path) -> None:
    report = json_out(run_cli("bench", "delivery", str(dataset), "--fast-only", "--json"))
    assert_issue_3_report(report)
    assert report["strict_delivery"] >= 0.5 and report["negative_silence"] == 1.0
    # no model in this run: what the wait measures is the fast stage on this machine, timed in bench/, not here
    assert set(report["folds"]) == {"strict_delivery", "loose_delivery", "negative_silence", "precision"}
    assert "refined" not in report and "lifecycle" not in report


def test_bench_without_a_model_runs_fast_only_and_prints_the_side_by_side_table(
    run_cli: RunCli, dataset: Path
) -> None:
    result = run_cli("bench", "delivery", str(dataset))
    assert result.returncode == 0, result.stderr
    assert "ours / base" in result.stdout and "fold spread" in result.stdout
    assert "refined phase" not in result.stdout
    assert result.stderr == ""  # no progress bar when stderr is not a terminal


def test_bench_with_an_oracle_endpoint_reports_the_refined_phase(run_cli: RunCli, dataset: Path) -> None:
    with ScriptedChatServer(oracle=dataset / "queries.jsonl", latency_ms=150) as server:
        args = ("bench", "delivery", str(dataset), "--base-url", server.base_url, "--model", "scripted")
        report = json_out(run_cli(*args, "--json"))
        text = run_cli(*args)
    assert_issue_3_report(report)
    refined = report["refined"]
    assert refined["strict_delivery"] == 1.0 and refined["precision"] == 1.0  # the oracle's choice
    assert refined["negative_silence"] == 1.0 and refined["turn"]["strict_delivery"] == 1.0
    assert refined["model_ms"]["p50"] >= 150 and refined["unsettled"] == 0
    assert refined["fallback"] == {} and refined["queries_with_rejected_refs"] == 0
    assert refined["strategy"] == {"model": 5}
    assert text.returncode == 0 and "refined phase at the first tool-result turn" in text.stdout


def test_bench_counts_rejected_refs_and_fallbacks_by_reason(run_cli: RunCli, dataset: Path) -> None:
    with ScriptedChatServer(default=Reply.hallucinated(valid=1)) as server:
        report = json_out(run_cli(
            "bench", "delivery", str(dataset), "--base-url", server.base_url, "--json",
            env=clean_environ(RECALL_KIT_MODEL="scripted"),  # the model name may come from the environment
        ))
    refined = report["refined"]
    assert refined["queries_with_rejected_refs"] == 5
    assert refined["rejected_refs"] == {"not in the manifest": 10}
    with ScriptedChatServer(default=Reply.error(500, "internal error")) as server:
        failing = json_out(run_cli(
            "bench", "delivery", str(dataset), "--base-url", server.base_url, "--model", "scripted", "--json"))
    assert sum(failing["refined"]["fallback"].values()) == 5
    assert all("HTTP 500" in reason for reason in failing["refined"]["fallback"])


def test_bench_with_a_latency_profile_runs_the_lifecycle_bench(run_cli: RunCli, dataset: Path) -> None:
    args = ("bench", "delivery", str(dataset), "--model-latency-ms", "20,300", "--limit", "4")
    report = json_out(run_cli(*args, "--json"))
    assert REPORT_KEYS <= report.keys() and report["queries"] == 4
    assert set(report["fast_ms"]) == {"p50", "p99"} and set(report["initial_wait_ms"]) == {"p50", "p99", "max"}
    life = report["lifecycle"]
    assert life["duplicates"] == 0 and life["latencies_ms"] == [20, 300]
    assert life["initial_wait_ms"]["max"] < 290  # the ceiling ended it, not the 300 ms model
    assert life["blocking"]["added_latency_ms"]["max"] >= 290  # the old design waits for the model
    text = run_cli(*args)
    assert text.returncode == 0, text.stderr
    for phrase in ("tool-free turn", "first tool-result turn", "duplicate deliveries: 0", "old blocking design"):
        assert phrase in text.stdout


def test_bench_bad_input_exits_2_with_one_line(run_cli: RunCli, dataset: Path, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("bench", "delivery", str(tmp_path / "absent")), "not a dataset")
    assert_one_line_error(run_cli("bench", "delivery", str(dataset), "--model-latency-ms", "40,x"), "--model-latency-ms")
    for value in ("nan", "40,inf"):
        assert_one_line_error(run_cli("bench", "delivery", str(dataset), "--model-latency-ms", value), "--model-latency-ms")
    assert_one_line_error(run_cli("bench", "delivery", str(dataset), "--limit", "0"), "--limit")
    assert_one_line_error(run_cli("bench", "latency", "--docs", "20,99999999999"),
                          "--docs sizes go up to 50,000, the most a root holds; got 99,999,999,999")
    assert_one_line_error(
        run_cli("bench", "delivery", str(dataset), "--model-latency-ms", "40", "--base-url", "http://127.0.0.1:9/v1"),
        "--model-latency-ms",
    )
    assert_one_line_error(run_cli("bench", "delivery", str(dataset), "--base-url", "http://127.0.0.1:9/v1"), "model")
    (dataset / "queries.jsonl").write_text('{"id": "a", "query": "x"}\n')
    assert_one_line_error(run_cli("bench", "delivery", str(dataset)), "relevant")


def test_bench_delivery_reads_the_sidecars_words_from_frontmatter_when_asked(run_cli: RunCli, dataset: Path) -> None:
    from memory_store import EnrichmentEntry, sidecar_path, write_enrichment

    tea = dataset / "memories" / "tea.md"
    write_enrichment(sidecar_path(dataset / "memories"), [
        EnrichmentEntry("tea.md", hashlib.sha256(tea.read_bytes()).hexdigest(), ("beverage", "drink later"), ("what should I drink",), "t"),
    ])
    before = tea.read_bytes()
    side = json_out(run_cli("bench", "delivery", str(dataset), "--fast-only", "--json"))
    front = json_out(run_cli("bench", "delivery", str(dataset), "--frontmatter", "--json"))
    assert tea.read_bytes() == before  # a copy carries the words, never the dataset itself
    assert side["enrichment"]["placement"] == "sidecar" and front["enrichment"]["placement"] == "frontmatter"
    assert front["enrichment"]["enriched_docs"] == side["enrichment"]["enriched_docs"] == 1
    assert front["by_kind"]["semantic"]["strict_delivery"] == side["by_kind"]["semantic"]["strict_delivery"] == 1.0
    assert front["unenriched"]["by_kind"]["semantic"]["strict_delivery"] == 0.0  # the words did it, in both places
    text = run_cli("bench", "delivery", str(dataset), "--frontmatter")
    assert text.returncode == 0 and "its words in each memory's frontmatter" in text.stdout
    for refused in (("--no-enrichment",), ("--model-latency-ms", "40")):
        assert_one_line_error(
            run_cli("bench", "delivery", str(dataset), "--frontmatter", *refused), "frontmatter"
        )


def test_bench_delivery_plot_writes_a_real_png(run_cli: RunCli, dataset: Path, tmp_path: Path) -> None:
    import matplotlib.image

    out = tmp_path / "delivery.png"
    result = run_cli("bench", "delivery", str(dataset), "--fast-only", "--plot", str(out))
    assert result.returncode == 0, result.stderr
    pixels = matplotlib.image.imread(out)
    height, width = pixels.shape[:2]
    assert (width, height) == (1200, 450)
    colours = {tuple(round(float(c), 2) for c in pixel) for pixel in pixels[::7, ::7].reshape(-1, pixels.shape[2])}
    assert len(colours) > 20 and pixels.std() > 0.05  # bars, text and a histogram: not a blank canvas
    unwritable = run_cli("bench", "delivery", str(dataset), "--fast-only", "--plot", str(tmp_path / "no" / "x.png"))
    assert_one_line_error(unwritable, "--plot")


def test_a_plot_that_cannot_be_drawn_is_one_line_before_any_query_runs(
    run_cli: RunCli, dataset: Path, tmp_path: Path
) -> None:
    with ScriptedChatServer(oracle=dataset / "queries.jsonl") as server:
        endpoint = ("--base-url", server.base_url, "--model", "scripted")
        for plot, words in [
            (tmp_path / "figure.txt", ("--plot", "ending in .png")),
            (tmp_path / "no" / "figure.png", ("--plot", "no folder")),
            (tmp_path, ("--plot", "is a directory")),
        ]:
            result = run_cli("bench", "delivery", str(dataset), *endpoint, "--plot", str(plot))
            assert_one_line_error(result, *words)
        hidden = subprocess.run(  # a test double below the import system: the plot extra not installed
            [sys.executable, "-c", WITHOUT_MATPLOTLIB, "bench", "delivery", str(dataset), *endpoint,
             "--plot", str(tmp_path / "figure.png")],
            capture_output=True, text=True, timeout=120, env=clean_environ(), cwd=tmp_path,
        )
        assert_one_line_error(hidden, "--plot", "pip install 'recall-kit[plot]'")
        assert server.requests == []  # refused before the benchmark asked the model anything
    assert not (tmp_path / "figure.txt").exists() and not (tmp_path / "figure.png").exists()


WITHOUT_MATPLOTLIB = "import sys; sys.modules['matplotlib'] = None; from recall_kit_cli.main import main; main()"


# A test double below the import system: rank-bm25 hidden as if the bench extra were not installed
# (`import rank_bm25` raises ImportError), as on the README's plain `pip install -e .`.
WITHOUT_RANK_BM25 = "import sys; sys.modules['rank_bm25'] = None; from recall_kit_cli.main import main; main()"
BENCH_EXTRA_HINT = "pip install 'recall-kit[bench]'"


def run_without_rank_bm25(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_RANK_BM25, *args], capture_output=True, text=True, timeout=120,
        env=clean_environ(), cwd=cwd,
    )


def test_bench_delivery_without_rank_bm25_runs_and_marks_the_plain_bm25_column_absent(
    tmp_path: Path, dataset: Path
) -> None:
    table = run_without_rank_bm25("bench", "delivery", str(dataset), "--fast-only", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    everything = next(line for line in lines if line.startswith("all "))
    assert everything.count("/   -  ") == 4  # ours in every cell, the baseline's absent
    absent = [line for line in lines if line.startswith("base: absent")]
    assert len(absent) == 1 and "rank-bm25" in absent[0] and BENCH_EXTRA_HINT in absent[0]
    report = json_out(run_without_rank_bm25("bench", "delivery", str(dataset), "--fast-only", "--json", cwd=tmp_path))
    assert REPORT_KEYS <= report.keys() and report["queries"] == 5 and report["negative_silence"] == 1.0
    assert report["baseline"] is None and BENCH_EXTRA_HINT in report["baseline_absent"]


def test_bench_delivery_with_rank_bm25_reports_the_baseline_and_no_absence(run_cli: RunCli, dataset: Path) -> None:
    report = json_out(run_cli("bench", "delivery", str(dataset), "--fast-only", "--json"))
    assert REPORT_KEYS <= report["baseline"].keys() and "baseline_absent" not in report
    assert "base: absent" not in run_cli("bench", "delivery", str(dataset), "--fast-only").stdout


def test_bench_latency_without_rank_bm25_runs_and_marks_its_columns_absent(tmp_path: Path) -> None:
    table = run_without_rank_bm25("bench", "latency", "--docs", "20", cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[:2]
    cells = dict(zip([t.strip() for t in header.split("  ") if t.strip()], row.split()))
    assert cells["docs"] == "20" and cells["rank-bm25 p50"] == "-" and cells["rank-bm25 p99"] == "-"
    assert float(cells["fast p99"]) > 0
    assert "rank-bm25: absent (" in table.stdout and BENCH_EXTRA_HINT in table.stdout
    rows = json_out(run_without_rank_bm25("bench", "latency", "--docs", "20", "--json", cwd=tmp_path))["sizes"]
    assert rows[0]["rank_bm25_ms"] is None and BENCH_EXTRA_HINT in rows[0]["rank_bm25_absent"]


def test_without_rank_bm25_query_and_the_enriched_latency_bench_still_run(tmp_path: Path) -> None:
    query = run_without_rank_bm25("query", "how do I deploy ledgerline?", "--root", str(EXAMPLES), cwd=tmp_path)
    assert query.returncode == 0, query.stderr
    assert "deploy" in query.stdout
    enriched = run_without_rank_bm25("bench", "latency", "--docs", "20", "--enriched", cwd=tmp_path)
    assert enriched.returncode == 0, enriched.stderr
