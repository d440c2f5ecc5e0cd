"""`recall-kit bench latency`: fast-stage cost on generated stores, beside rank-bm25."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
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
    from recall_kit_bench import BaselineUnavailable, measure_enriched_latency, measure_latency

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
        try:
            for size in steps:
                rows.append(measure_enriched_latency(size) if enriched else measure_latency(size))
        except BaselineUnavailable as exc:
            raise InputError(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"enriched" if enriched else "sizes": [row.as_dict() for row in rows]}))
    elif enriched:
        _echo_table(_ENRICHED_COLUMNS, rows, _ENRICHED_LEGEND)
    else:
        _echo_table(_COLUMNS, rows, _LEGEND)


Column = tuple[str, int, Callable[[Any], object]]  # title, width, the cell for one row


def _ms(pick: Callable[[Any], float]) -> Callable[[Any], str]:
    return lambda row: f"{pick(row):.3f}"


_COLUMNS: list[Column] = [
    ("docs", 7, lambda row: row.docs),
    ("fast p50", 9, _ms(lambda row: row.fast_ms.p50)),
    ("fast p99", 9, _ms(lambda row: row.fast_ms.p99)),
    ("cpu p99", 8, _ms(lambda row: row.fast_cpu_ms.p99)),
    ("rank-bm25 p50", 13, _ms(lambda row: row.baseline_ms.p50)),
    ("rank-bm25 p99", 13, _ms(lambda row: row.baseline_ms.p99)),
    ("update p50", 10, _ms(lambda row: row.update_ms.p50)),
    ("update p99", 10, _ms(lambda row: row.update_ms.p99)),
    ("after-update p99", 16, _ms(lambda row: row.query_after_update_ms.p99)),
    ("build s", 8, lambda row: f"{row.build_s:.2f}"),
]
_LEGEND = (
    "(milliseconds; fast = FastHeuristic.recall (wall clock; cpu = its thread's CPU time), rank-bm25 = "
    "BM25Okapi.get_scores + top 2, update = index update after one changed file, after-update = the next "
    "query on its words)"
)
_ENRICHED_COLUMNS: list[Column] = [
    ("docs", 7, lambda row: row.docs),
    ("head words", 13, lambda row: f"{row.head_plain.words:.1f} -> {row.head_enriched.words:.1f}"),
    ("unenriched p50", 14, _ms(lambda row: row.plain_ms.p50)),
    ("p99", 6, _ms(lambda row: row.plain_ms.p99)),
    ("cpu p99", 7, _ms(lambda row: row.plain_cpu_ms.p99)),
    ("enriched p50", 12, _ms(lambda row: row.enriched_ms.p50)),
    ("p99", 6, _ms(lambda row: row.enriched_ms.p99)),
    ("cpu p99", 7, _ms(lambda row: row.enriched_cpu_ms.p99)),
]
_ENRICHED_LEGEND = (
    "(milliseconds; FastHeuristic.recall on the same files read without and with their enrichment sidecar, "
    "the same prompts in turn; head words = name, description, keywords and usage scenarios per memory)"
)


def _echo_table(columns: list[Column], rows: list[Any], legend: str) -> None:
    click.echo("  ".join(f"{title:>{width}}" for title, width, _ in columns))
    for row in rows:
        click.echo("  ".join(f"{cell(row)!s:>{width}}" for _, width, cell in columns))
    click.echo(legend)


def _size_label(size: int | None) -> str:
    return "" if size is None else f"{size} docs"


@contextlib.contextmanager
def _plain(sizes: list[int]) -> Iterator[list[int]]:
    yield sizes
