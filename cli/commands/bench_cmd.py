"""`recall-kit bench delivery|latency`: the delivery-rate and latency benchmarks."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from recall_kit._evaluation import (
    EvalDataset,
    PlainBaseline,
    QueryOutcome,
    fast_deliver,
    load_dataset,
    measure_latency,
    metrics,
    metrics_by_fold,
    metrics_by_kind,
    percentiles,
    run,
)
from recall_kit._heuristic import FastHeuristic
from recall_kit_cli.main import cli

FOLDS = 5
METRIC_KEYS = ("strict_delivery", "loose_delivery", "negative_silence", "precision")


@cli.group("bench")
def bench() -> None:
    """Benchmarks: delivery rate on an eval dataset, latency on generated stores."""


@bench.command("delivery")
@click.argument("dataset_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--fast-only", is_flag=True, help="Only the fast heuristic (no model stage).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def delivery(dataset_dir: str, fast_only: bool, as_json: bool) -> None:
    """Delivery metrics (DESIGN.md section 6) overall and per kind, beside a plain BM25 baseline."""
    try:
        dataset = load_dataset(dataset_dir)
    except (FileNotFoundError, ValueError, KeyError) as exc:
        raise click.UsageError(str(exc)) from None
    # The model stage arrives with the session; until then the fast path is the recall path.
    ours = _run_with_progress(dataset, fast_deliver(FastHeuristic(dataset.snapshot)), "recall")
    baseline = _run_with_progress(dataset, PlainBaseline(dataset.snapshot).deliver, "baseline")
    report = _report(dataset, ours)
    report["baseline"] = _report(dataset, baseline)
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    else:
        click.echo(_delivery_table(report))


def _run_with_progress(dataset: EvalDataset, deliver: Any, label: str) -> list[QueryOutcome]:
    if not sys.stderr.isatty():
        return run(dataset, deliver)
    with click.progressbar(length=len(dataset.queries), label=label, file=sys.stderr) as bar:
        return run(dataset, deliver, on_query=lambda _: bar.update(1))


def _report(dataset: EvalDataset, outcomes: list[QueryOutcome]) -> dict[str, Any]:
    report: dict[str, Any] = {"dataset": str(dataset.root), "docs": len(dataset.snapshot.docs)}
    report.update(metrics(outcomes).as_dict())
    report["by_kind"] = {kind: m.as_dict() for kind, m in metrics_by_kind(outcomes).items()}
    folds = metrics_by_fold(outcomes, FOLDS)
    report["folds"] = {
        key: _spread([getattr(m, key) for m in folds]) for key in METRIC_KEYS
    }
    fast = percentiles([o.fast_ms for o in outcomes])
    report["fast_ms"] = {"p50": fast["p50"], "p99": fast["p99"]}
    report["initial_wait_ms"] = percentiles([o.wait_ms for o in outcomes])
    report["load_errors"] = [f"{e.ref}: {e.reason}" for e in dataset.snapshot.errors]
    return report


def _spread(values: list[float | None]) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    if not present:
        return {"min": None, "max": None}
    return {"min": min(present), "max": max(present)}


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.3f}"


def _delivery_table(report: dict[str, Any]) -> str:
    base = report["baseline"]
    lines = [
        f"{report['dataset']}: {report['docs']} docs, {report['queries']} queries "
        f"({report['answerable']} answerable, {report['negatives']} negatives)",
        "",
        f"{'kind':<14}{'n':>5}  {'strict':>13}  {'loose':>13}  {'silence':>13}  {'precision':>13}",
        f"{'':<14}{'':>5}  {'ours / base':>13}  {'ours / base':>13}  {'ours / base':>13}  {'ours / base':>13}",
    ]
    rows = [("all", report, base)] + [
        (kind, m, base["by_kind"][kind]) for kind, m in report["by_kind"].items()
    ]
    for kind, ours, theirs in rows:
        cells = "  ".join(f"{_fmt(ours[k])} / {_fmt(theirs[k])}" for k in METRIC_KEYS)
        lines.append(f"{kind:<14}{ours['queries']:>5}  {cells}")
    lines.append("")
    lines.append(
        f"fold spread ({FOLDS} folds by hash of id): "
        + ", ".join(
            f"{k} {_fmt(v['min'])}..{_fmt(v['max'])}" for k, v in report["folds"].items()
        )
    )
    lines.append(
        f"fast stage ms p50 {report['fast_ms']['p50']:.3f} p99 {report['fast_ms']['p99']:.3f}; "
        f"initial wait ms p50 {report['initial_wait_ms']['p50']:.3f} "
        f"p99 {report['initial_wait_ms']['p99']:.3f} max {report['initial_wait_ms']['max']:.3f}; "
        f"baseline ms p50 {base['fast_ms']['p50']:.3f} p99 {base['fast_ms']['p99']:.3f}"
    )
    for error in report["load_errors"]:
        lines.append(f"skipped {error}")
    return "\n".join(lines)


@bench.command("latency")
@click.option("--docs", default="100,1000,10000,50000", show_default=True, help="Store sizes.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def latency(docs: str, as_json: bool) -> None:
    """Fast-stage cost on generated stores, beside rank-bm25 scoring, plus one-file update cost."""
    try:
        sizes = [int(size) for size in docs.split(",") if size.strip()]
    except ValueError:
        raise click.UsageError(f"--docs takes comma-separated integers, got {docs!r}") from None
    if not sizes or min(sizes) < 1:
        raise click.UsageError("--docs needs sizes of at least 1")
    rows = []
    for size in sizes:
        if sys.stderr.isatty():
            click.echo(f"generating and measuring {size} docs ...", err=True)
        rows.append(measure_latency(size).as_dict())
    if as_json:
        click.echo(json.dumps({"sizes": rows}))
        return
    click.echo(
        f"{'docs':>7}  {'fast p50':>9}  {'fast p99':>9}  {'cpu p99':>8}  {'rank-bm25 p50':>13}  {'rank-bm25 p99':>13}"
        f"  {'update p50':>10}  {'update p99':>10}  {'after-update p99':>16}  {'build s':>8}"
    )
    for row in rows:
        click.echo(
            f"{row['docs']:>7}  {row['fast_ms']['p50']:>9.3f}  {row['fast_ms']['p99']:>9.3f}"
            f"  {row['fast_cpu_ms']['p99']:>8.3f}"
            f"  {row['rank_bm25_ms']['p50']:>13.3f}  {row['rank_bm25_ms']['p99']:>13.3f}"
            f"  {row['update_ms']['p50']:>10.3f}  {row['update_ms']['p99']:>10.3f}"
            f"  {row['query_after_update_ms']['p99']:>16.3f}  {row['build_s']:>8.2f}"
        )
    click.echo(
        "(milliseconds; fast = FastHeuristic.recall (wall clock; cpu = its thread's CPU time), rank-bm25 = BM25Okapi.get_scores + top 2, "
        "update = index update after one changed file, after-update = the next query on its words)"
    )
