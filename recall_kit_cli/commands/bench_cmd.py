"""`recall-kit bench delivery`: delivery rates through the real session lifecycle."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from recall_kit import SelectorConfig
from recall_kit_cli._format import InputError, parse_number_list
from recall_kit_cli._config_file import selector_config
from recall_kit_cli._help import HelpGroup
from recall_kit_cli.commands.bench_latency_cmd import latency

if TYPE_CHECKING:  # the harness is imported inside the commands: other commands never load it
    from recall_kit_bench import (
        DeliveryReport,
        EnrichmentPlacement,
        EvalDataset,
        PlainBaseline,
        RefinedReport,
        ReplaySettings,
    )



@click.group("bench", cls=HelpGroup)
def bench() -> None:
    """Benchmarks: delivery rate on an eval dataset, latency on generated stores.

    Example: recall-kit bench delivery bench/datasets/agent-memories
    """


bench.add_command(latency)


_Command = TypeVar("_Command", bound=Callable[..., Any])


def _enrichment_options(verb: str) -> Callable[[_Command], _Command]:
    """--enrichment FILE and --no-enrichment, as every bench command that reads a dataset takes them."""

    def add(command: _Command) -> _Command:
        command = click.option(
            "--no-enrichment", is_flag=True, help=f"{verb} the memories without any enrichment sidecar."
        )(command)
        return click.option(
            "--enrichment",
            "sidecar",
            type=click.Path(dir_okay=False),
            help="Enrichment sidecar kept outside the dataset (default: memories/.recall-kit/enrichment.jsonl when present).",
        )(command)

    return add


@bench.command("delivery")
@click.argument("dataset_dir")
@click.option("--fast-only", is_flag=True, help="No model stage (the default without --base-url/--model).")
@click.option("--base-url", help="OpenAI-compatible endpoint: adds the refined phase.")
@click.option("--model", help="Model name at that endpoint.")
@click.option("--model-timeout", type=float, help="Model stage deadline, s (default 30).")
@click.option(
    "--model-latency-ms",
    "latency_profile",
    help="Lifecycle bench: a scripted oracle model answering after these latencies, e.g. 40,250,600,1500,3000.",
)
@click.option("--limit", type=int, help="Only the first N queries.")
@_enrichment_options("Measure")
@click.option(
    "--frontmatter", "placement", flag_value="frontmatter", default="sidecar",
    help="The sidecar's words in each memory's frontmatter.",
)
@click.option("--plot", type=click.Path(dir_okay=False), help="Also draw the figures to this PNG (plot extra).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def delivery(
    dataset_dir: str,
    fast_only: bool,
    base_url: str | None,
    model: str | None,
    model_timeout: float | None,
    latency_profile: str | None,
    limit: int | None,
    sidecar: str | None,
    no_enrichment: bool,
    placement: EnrichmentPlacement,
    plot: str | None,
    as_json: bool,
) -> None:
    """Delivery per kind beside plain BM25, enriched beside unenriched.

    Example: recall-kit bench delivery bench/datasets/agent-memories --fast-only
    """
    from recall_kit_bench import (
        DeliveryBenchReport,
        DeliveryReport,
        dataset_sidecar,
        delivery_table,
        enriched_docs,
        run,
        run_lifecycle_bench,
    )

    if limit is not None and limit < 1:
        raise InputError(f"--limit needs a positive number, got {limit}")
    if sidecar is not None and no_enrichment:
        raise InputError("--enrichment and --no-enrichment exclude each other")
    if plot is not None:
        _check_plot(plot)  # before the long runs: a plot that cannot be drawn fails at once
    found = None if no_enrichment else sidecar or dataset_sidecar(dataset_dir)
    if placement == "frontmatter" and (found is None or latency_profile is not None):
        raise InputError("--frontmatter needs a sidecar to place, and no --model-latency-ms")
    dataset = _load(dataset_dir, limit, found if found is not None else False)
    enriched = enriched_docs(dataset)
    if placement == "frontmatter":
        dataset = _load(dataset_dir, limit, found if found is not None else False, placement)
    plain, absent = _plain_baseline(dataset)
    unenriched = None
    lifecycle, refined = None, None
    if latency_profile is not None:
        if fast_only or base_url or model:
            raise InputError("--model-latency-ms runs its own scripted model; drop --fast-only/--base-url/--model")
        latencies = parse_number_list(latency_profile, "--model-latency-ms")
        with _progress(3 * len(dataset.queries), "lifecycle") as tick:
            lifecycle = run_lifecycle_bench(
                dataset_dir, latencies_ms=latencies, limit=limit, progress=lambda done, total: tick()
            )
        ours = DeliveryReport.of_lifecycle(dataset, lifecycle)
    else:
        config = None if fast_only or not (base_url or model) else _endpoint(base_url, model, model_timeout)
        ours, refined = _session_report(dataset, config)
        if found is not None:
            unenriched, _ = _session_report(_load(dataset_dir, limit, False), None)
    baseline = None
    if plain is not None:
        with _progress(len(dataset.queries), "baseline") as tick:
            baseline = DeliveryReport.of(dataset, run(dataset, plain.deliver, on_query=lambda _: tick()))
    report = DeliveryBenchReport(
        ours,
        baseline,
        refined,
        lifecycle,
        unenriched,
        None if found is None else str(found),
        enriched,
        absent,
        placement,
    )
    if plot is not None:
        from recall_kit_bench import HarnessError, plot_delivery

        try:
            plot_delivery(report, plot)
        except (HarnessError, RuntimeError, OSError) as exc:  # matplotlib's own failures are RuntimeErrors
            raise InputError(f"--plot {plot}: {exc}") from None
    click.echo(json.dumps(report.as_dict(), ensure_ascii=False) if as_json else delivery_table(report))


def _load(
    dataset_dir: str, limit: int | None, enrichment: bool | str | Path, placement: EnrichmentPlacement = "sidecar"
) -> EvalDataset:
    from recall_kit_bench import DatasetError, EvalDataset, load_dataset

    try:
        dataset = load_dataset(dataset_dir, enrichment=enrichment, placement=placement)
    except DatasetError as exc:
        raise InputError(str(exc)) from None
    if limit is not None:
        dataset = EvalDataset(dataset.root, dataset.snapshot, dataset.queries[:limit])
    return dataset


def _plain_baseline(dataset: EvalDataset) -> tuple[PlainBaseline | None, str | None]:
    """The plain BM25 baseline, or None and why not (rank-bm25 comes with the bench extra): the
    benchmark runs on a plain install and shows the baseline's column as absent."""
    from recall_kit_bench import BaselineUnavailable, PlainBaseline

    try:
        return PlainBaseline(dataset.snapshot), None
    except BaselineUnavailable as exc:
        return None, str(exc)


def _check_plot(plot: str) -> None:
    from recall_kit_bench import HarnessError, check_plot_path

    try:
        check_plot_path(plot)
    except HarnessError as exc:
        raise InputError(f"--plot {plot}: {exc}") from None


def _endpoint(base_url: str | None, model: str | None, timeout: float | None) -> SelectorConfig:
    config = selector_config(base_url=base_url, model=model, timeout=timeout)
    if config.refusal:
        raise InputError(config.refusal)
    if not config.configured:
        raise InputError(f"the refined phase needs --base-url and --model (missing {' and '.join(config.missing())})")
    return config


def _session_report(
    dataset: EvalDataset, config: SelectorConfig | None
) -> tuple[DeliveryReport, RefinedReport | None]:
    """Every query through a real session; tool-using turns when a model refines."""
    from recall_kit import Recaller, open_recaller
    from recall_kit_bench import DeliveryReport, RefinedReport, run_turns, turn_outcomes

    def recaller() -> Recaller:
        return open_recaller(dataset.snapshot, selector=config)

    with _progress(len(dataset.queries), "recall") as tick:
        turns = run_turns(
            [q.query for q in dataset.queries], recaller, tool_turn=config is not None, on_turn=lambda _: tick()
        )
    ours = DeliveryReport.of(dataset, turn_outcomes(dataset.queries, turns, "initial"))
    if config is None:
        return ours, None
    endpoint = f"model {config.model} at {config.base_url}, timeout {config.timeout:g} s"
    return ours, RefinedReport.of(dataset, turns, endpoint)


@contextlib.contextmanager
def _progress(length: int, label: str) -> Iterator[Callable[[], None]]:
    """A progress bar on stderr when it is a terminal; otherwise a silent tick."""
    if not sys.stderr.isatty():
        yield lambda: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield lambda: bar.update(1)


@bench.command("replay")
@click.argument("dataset_dir")
@_enrichment_options("Replay")
@click.option("--oracle-accuracy", type=str, default="1", help="Share of the oracle's answers that are right (default 1).")
@click.option("--repeat", is_flag=True, help="Also measure the trained prompts themselves after learning.")
@click.option("--turn-ends-early", is_flag=True,
              help="End each training turn right after its initial point, before the oracle answers.")
@click.option("--skip-certain", is_flag=True,
              help="Skip the model on a prompt whose fast answer is certain (one unique, strong match).")
@click.option("--passes", "passes_text", type=str, default="1",
              help="Train on the other folds' prompts this many times (default 1).")
@click.option("--seed", type=str, default="0", help="Seed of the oracle's wrong answers (default 0).")
@click.option("--folds", "folds_text", type=str, default="5", help="Folds by hash of the query id (default 5).")
@click.option("--measure-folds", help="Only these folds, e.g. 0,1 (default: all).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def replay(
    dataset_dir: str,
    sidecar: str | None,
    no_enrichment: bool,
    oracle_accuracy: str,
    repeat: bool,
    turn_ends_early: bool,
    skip_certain: bool,
    passes_text: str,
    seed: str,
    folds_text: str,
    measure_folds: str | None,
    as_json: bool,
) -> None:
    """Fast-stage delivery after learning, beside learning off. The oracle's refined selections teach it.

    \b
    Example:
      recall-kit bench replay bench/datasets/agent-memories --no-enrichment
    """
    from recall_kit import UsageError
    from recall_kit_bench import HarnessError, ReplaySettings, dataset_sidecar, replay_table, run_replay

    if sidecar is not None and no_enrichment:
        raise InputError("--enrichment and --no-enrichment exclude each other")
    settings = ReplaySettings(
        folds=_integer(folds_text, "--folds"),
        measure_folds=None if measure_folds is None else tuple(_integers(measure_folds, "--measure-folds")),
        oracle_accuracy=_share(oracle_accuracy, "--oracle-accuracy"),
        seed=_integer(seed, "--seed"),
        repeat=repeat,
        turn_ends_early=turn_ends_early,
        passes=_integer(passes_text, "--passes"),
        skip_certain=skip_certain,
    )
    try:
        settings.measured()
    except UsageError as exc:
        raise InputError(str(exc)) from None
    found = None if no_enrichment else sidecar or dataset_sidecar(dataset_dir)
    dataset = _load(dataset_dir, None, found if found is not None else False)
    with _progress(_replay_steps(dataset, settings), "replay") as tick:
        try:
            report = run_replay(
                dataset,
                sidecar=None if found is None else Path(found),
                settings=settings,
                progress=lambda done, total: tick(),
            )
        except (HarnessError, UsageError) as exc:
            raise InputError(str(exc)) from None
    click.echo(json.dumps(report.as_dict(), ensure_ascii=False) if as_json else replay_table(report))


def _replay_steps(dataset: EvalDataset, settings: ReplaySettings) -> int:
    """The progress bar's length: every query once per measured fold (trained or measured), plus the repeats."""
    from recall_kit_bench import fold_split

    steps = 0
    for fold in settings.measured():
        mine, others = fold_split(dataset, settings.folds, fold)
        steps += len(mine) + len(others) * (settings.passes + settings.repeat)
    return steps


def _integer(text: str, option: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{option} takes a whole number, got {text!r}") from None


def _integers(text: str, option: str) -> list[int]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise InputError(f"{option} takes comma-separated fold numbers, got {text!r}")
    return [_integer(item, option) for item in items]


def _share(text: str, option: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{option} takes a share from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise InputError(f"{option} takes a share from 0 to 1, got {text!r}")
    return value
