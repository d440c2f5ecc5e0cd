"""`recall-kit bench latency`: fast-stage cost on generated stores, beside rank-bm25."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from typing import Any

import click

from recall_kit_cli._format import InputError


@click.command("latency")
@click.option("--docs", default="100,1000,10000,50000", show_default=True, help="Store sizes.")
@click.option(
    "--enriched", is_flag=True,
    help="Instead: the fast stage on one generated store on disk, read without and with a generated "
    "enrichment sidecar, timed side by side on the same prompts.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def latency(docs: str, enriched: bool, as_json: bool) -> None:
    """Fast-stage cost on generated stores, beside rank-bm25 scoring, plus one-file update cost.

    Example: recall-kit bench latency --docs 1000,10000 [--enriched]
    """
    from recall_kit_bench import measure_enriched_latency, measure_latency

    try:
        sizes = [int(size) for size in docs.split(",") if size.strip()]
    except ValueError:
        raise InputError(f"--docs takes comma-separated integers, got {docs!r}") from None
    if not sizes or min(sizes) < 1:
        raise InputError("--docs needs sizes of at least 1")
    rows = []
    # a bar on stderr only when a person watches it; each size is one step
    with click.progressbar(sizes, label="latency", file=sys.stderr, item_show_func=_size_label) if sys.stderr.isatty() \
            else _plain(sizes) as steps:
        for size in steps:
            rows.append(measure_enriched_latency(size) if enriched else measure_latency(size))
    if enriched:
        _echo_enriched(rows, as_json)
        return
    if as_json:
        click.echo(json.dumps({"sizes": [row.as_dict() for row in rows]}))
        return
    click.echo(
        f"{'docs':>7}  {'fast p50':>9}  {'fast p99':>9}  {'cpu p99':>8}  {'rank-bm25 p50':>13}  {'rank-bm25 p99':>13}"
        f"  {'update p50':>10}  {'update p99':>10}  {'after-update p99':>16}  {'build s':>8}"
    )
    for row in rows:
        click.echo(
            f"{row.docs:>7}  {row.fast_ms.p50:>9.3f}  {row.fast_ms.p99:>9.3f}"
            f"  {row.fast_cpu_ms.p99:>8.3f}"
            f"  {row.baseline_ms.p50:>13.3f}  {row.baseline_ms.p99:>13.3f}"
            f"  {row.update_ms.p50:>10.3f}  {row.update_ms.p99:>10.3f}"
            f"  {row.query_after_update_ms.p99:>16.3f}  {round(row.build_s, 3):>8.2f}"
        )
    click.echo(
        "(milliseconds; fast = FastHeuristic.recall (wall clock; cpu = its thread's CPU time), rank-bm25 = BM25Okapi.get_scores + top 2, "
        "update = index update after one changed file, after-update = the next query on its words)"
    )


def _echo_enriched(rows: list[Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"enriched": [row.as_dict() for row in rows]}))
        return
    click.echo(
        f"{'docs':>7}  {'head words':>13}  {'unenriched p50':>14}  {'p99':>6}  {'cpu p99':>7}"
        f"  {'enriched p50':>12}  {'p99':>6}  {'cpu p99':>7}"
    )
    for row in rows:
        head = f"{row.head_plain.words:.1f} -> {row.head_enriched.words:.1f}"
        click.echo(
            f"{row.docs:>7}  {head:>13}  {row.plain_ms.p50:>14.3f}  {row.plain_ms.p99:>6.3f}  {row.plain_cpu_ms.p99:>7.3f}"
            f"  {row.enriched_ms.p50:>12.3f}  {row.enriched_ms.p99:>6.3f}  {row.enriched_cpu_ms.p99:>7.3f}"
        )
    click.echo(
        "(milliseconds; FastHeuristic.recall on the same files read without and with their enrichment sidecar, "
        "the same prompts in turn; head words = name, description, keywords and usage scenarios per memory)"
    )


def _size_label(size: int | None) -> str:
    return "" if size is None else f"{size} docs"


@contextlib.contextmanager
def _plain(sizes: list[int]) -> Iterator[list[int]]:
    yield sizes
