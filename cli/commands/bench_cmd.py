"""`recall-kit bench delivery`: delivery rates through the real session lifecycle."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from recall_kit import ConfigError, ModelSelector, load_selector_config
from recall_kit._config import SelectorConfig
from recall_kit._evaluation import EvalDataset, PlainBaseline, load_dataset, run
from recall_kit._lifecycle_bench import run_lifecycle_bench
from recall_kit._probe import RecallProbe, run_turns, turn_outcomes
from recall_kit_cli._format import InputError, parse_number_list
from recall_kit_cli.commands.bench_report import (
    delivery_table,
    lifecycle_report,
    lifecycle_table,
    outcome_report,
    refined_report,
)



@click.group("bench")
def bench() -> None:
    """Benchmarks: delivery rate on an eval dataset, latency on generated stores."""


@bench.command("delivery")
@click.argument("dataset_dir")
@click.option("--fast-only", is_flag=True, help="No model stage (the default without --base-url/--model).")
@click.option("--base-url", help="OpenAI-compatible endpoint: adds the refined phase.")
@click.option("--model", help="Model name at that endpoint.")
@click.option("--model-timeout", type=float, help="Seconds before the model stage gives up (default 30).")
@click.option(
    "--model-latency-ms",
    "latency_profile",
    help="Lifecycle bench: a scripted oracle model answering after these latencies, e.g. 40,250,600,1500,3000.",
)
@click.option("--limit", type=int, help="Only the first N queries.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def delivery(
    dataset_dir: str,
    fast_only: bool,
    base_url: str | None,
    model: str | None,
    model_timeout: float | None,
    latency_profile: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """Delivery metrics (DESIGN.md section 6) overall and per kind, beside a plain BM25 baseline."""
    if limit is not None and limit < 1:
        raise InputError(f"--limit needs a positive number, got {limit}")
    dataset = _load(dataset_dir, limit)
    if latency_profile is not None:
        if fast_only or base_url or model:
            raise InputError("--model-latency-ms runs its own scripted model; drop --fast-only/--base-url/--model")
        latencies = parse_number_list(latency_profile, "--model-latency-ms")
        with _progress(3 * len(dataset.queries), "lifecycle") as tick:
            lifecycle = run_lifecycle_bench(
                dataset_dir, latencies_ms=latencies, limit=limit, progress=lambda done, total: tick()
            )
        report = lifecycle_report(dataset, lifecycle)
    else:
        config = None if fast_only or not (base_url or model) else _endpoint(base_url, model, model_timeout)
        report = _session_report(dataset, config)
    with _progress(len(dataset.queries), "baseline") as tick:
        baseline = run(dataset, PlainBaseline(dataset.snapshot).deliver, on_query=lambda _: tick())
    report["baseline"] = outcome_report(dataset, baseline)
    if as_json:
        click.echo(json.dumps(report, ensure_ascii=False))
    elif "lifecycle" in report:
        click.echo(lifecycle_table(report))
    else:
        click.echo(delivery_table(report))


def _load(dataset_dir: str, limit: int | None) -> EvalDataset:
    try:
        dataset = load_dataset(dataset_dir)
    except (FileNotFoundError, ValueError, KeyError, TypeError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        raise InputError(f"{dataset_dir}: {detail}" if dataset_dir not in detail else detail) from None
    if limit is not None:
        dataset = EvalDataset(dataset.root, dataset.snapshot, dataset.queries[:limit])
    return dataset


def _endpoint(base_url: str | None, model: str | None, timeout: float | None) -> SelectorConfig:
    try:
        config = load_selector_config(base_url=base_url, model=model, timeout=timeout)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    if not config.configured:
        raise InputError(f"the refined phase needs --base-url and --model (missing {' and '.join(config.missing())})")
    return config


def _session_report(dataset: EvalDataset, config: SelectorConfig | None) -> dict[str, Any]:
    """Every query through a real session; tool-using turns when a model refines."""

    def probe() -> RecallProbe:
        return RecallProbe(dataset.snapshot, ModelSelector.from_config(config) if config else None)

    with _progress(len(dataset.queries), "recall") as tick:
        turns = run_turns(
            [q.query for q in dataset.queries], probe, tool_turn=config is not None, on_turn=lambda _: tick()
        )
    report = outcome_report(dataset, turn_outcomes(dataset.queries, turns, "initial"))
    if config is not None:
        report["refined"] = refined_report(dataset, turns)
        report["refined"]["endpoint"] = f"model {config.model} at {config.base_url}, timeout {config.timeout:g} s"
    return report


@contextlib.contextmanager
def _progress(length: int, label: str) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr when it is a terminal; otherwise a silent tick."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield lambda: bar.update(1)
