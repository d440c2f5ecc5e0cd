"""`recall-kit bench latency`: fast-stage cost on generated stores, beside rank-bm25."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator

import click

from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpCommand


@click.command("latency", cls=HelpCommand)
@click.option("--docs", default="100,1000,10000,50000", show_default=True, help="Store sizes.")
@click.option(
    "--enriched", is_flag=True,
    help="Instead: the fast stage on one generated store on disk, read without and with a generated "
    "enrichment sidecar, timed side by side on the same prompts.",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def latency(docs: str, enriched: bool, as_json: bool) -> None:
    """Fast-stage cost on generated stores, beside rank-bm25. Also the cost of a one-file update.

    Example: recall-kit bench latency --docs 1000,10000 [--enriched]
    """
    from memory_store import MAX_ROOT_ENTRIES
    from recall_kit_bench import (
        enriched_latency_table,
        latency_table,
        measure_enriched_latency,
        measure_latency,
    )

    try:
        sizes = [int(size) for size in docs.split(",") if size.strip()]
    except ValueError:
        raise InputError(f"--docs takes comma-separated integers, got {docs!r}") from None
    if not sizes or min(sizes) < 1:
        raise InputError("--docs needs sizes of at least 1")
    if max(sizes) > MAX_ROOT_ENTRIES:  # generated in memory: 10^11 documents grew 20 MB a second, silently
        raise InputError(f"--docs sizes go up to {MAX_ROOT_ENTRIES:,}, the most a root holds; got {max(sizes):,}")
    # a bar on stderr only when a person watches it; each size is one step
    with click.progressbar(sizes, label="latency", file=sys.stderr, item_show_func=_size_label) if sys.stderr.isatty() \
            else _plain(sizes) as steps:
        if enriched:
            enriched_rows = [measure_enriched_latency(size) for size in steps]
            rows, table = [row.as_dict() for row in enriched_rows], enriched_latency_table(enriched_rows)
        else:
            plain_rows = [measure_latency(size) for size in steps]  # without rank-bm25 its columns say absent
            rows, table = [row.as_dict() for row in plain_rows], latency_table(plain_rows)
    click.echo(json.dumps({"enriched" if enriched else "sizes": rows}) if as_json else table)


def _size_label(size: int | None) -> str:
    return "" if size is None else f"{size} docs"


@contextlib.contextmanager
def _plain(sizes: list[int]) -> Iterator[list[int]]:
    yield sizes
