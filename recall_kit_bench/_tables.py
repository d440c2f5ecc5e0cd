"""The bench reports as tables for people: `recall-kit bench delivery` and `recall-kit bench latency` print these."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar

from recall_kit_bench._enriched_latency import EnrichedLatencyRow
from recall_kit_bench._evaluation import Metrics, Percentiles
from recall_kit_bench._evaluation import metrics as _metrics
from recall_kit_bench._evaluation import metrics_by_kind as _metrics_by_kind
from recall_kit_bench._latency import LatencyRow
from recall_kit_bench._lifecycle import LifecycleReport
from recall_kit_bench._replay import ReplayReport
from recall_kit_bench._reports import FOLDS, DeliveryBenchReport, DeliveryReport, RefinedReport, Spread

Row = TypeVar("Row")
Column = tuple[str, int, Callable[[Row], object]]  # title, width, the cell for one row


def delivery_table(report: DeliveryBenchReport) -> str:
    """The whole report: the lifecycle bench's table when it ran, else the no-tool delivery's."""
    if report.lifecycle is not None:
        return _lifecycle_table(report, report.lifecycle)
    return _no_tool_table(report)


def latency_table(rows: Sequence[LatencyRow]) -> str:
    """Fast-stage, rank-bm25 and update costs, one line per store size, then the legend (and why the
    rank-bm25 columns are empty, when they are)."""
    absent = next((row.baseline_absent for row in rows if row.baseline_ms is None), None)
    legend = _LATENCY_LEGEND if absent is None else f"{_LATENCY_LEGEND}\nrank-bm25: absent ({absent})"
    return _table(_LATENCY_COLUMNS, rows, legend)


def enriched_latency_table(rows: Sequence[EnrichedLatencyRow]) -> str:
    """The fast stage without and with enrichment, one line per store size, then the legend."""
    return _table(_ENRICHED_COLUMNS, rows, _ENRICHED_LEGEND)


def _rate(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.3f}"


def _rates(m: Metrics | None) -> tuple[float | None, ...]:
    """strict, loose, silence, precision; all None for a kind the other side lacks."""
    if m is None:
        return (None, None, None, None)
    return (m.strict_delivery, m.loose_delivery, m.negative_silence, m.precision)


def _timings(stats: Percentiles, with_max: bool = True) -> str:
    shown = f"p50 {stats.p50:.3f} p99 {stats.p99:.3f}"
    return f"{shown} max {stats.max:.3f}" if with_max else shown


def _spread(folds: Mapping[str, Spread]) -> str:
    return ", ".join(f"{k} {_rate(v.min)}..{_rate(v.max)}" for k, v in folds.items())


def _header(report: DeliveryReport) -> list[str]:
    m = report.overall
    return [
        f"{report.dataset}: {report.docs} docs, {m.queries} queries "
        f"({m.answerable} answerable, {m.negatives} negatives)",
        "",
    ]


def _side_by_side(ours: DeliveryReport, other: DeliveryReport | None, heading: str) -> list[str]:
    """Ours beside ``other`` per kind; an absent ``other`` (the baseline could not run) shows as ``-``."""
    lines = [
        f"{'kind':<14}{'n':>5}  {'strict':>13}  {'loose':>13}  {'silence':>13}  {'precision':>13}",
        f"{'':<14}{'':>5}  {heading:>13}  {heading:>13}  {heading:>13}  {heading:>13}",
    ]
    rows = [("all", ours.overall, other.overall if other else None)] + [
        (kind, m, other.by_kind.get(kind) if other else None) for kind, m in ours.by_kind.items()
    ]
    for kind, mine, theirs in rows:
        cells = "  ".join(f"{_rate(a)} / {_rate(b)}" for a, b in zip(_rates(mine), _rates(theirs)))
        lines.append(f"{kind:<14}{mine.queries:>5}  {cells}")
    return lines


def _no_tool_table(report: DeliveryBenchReport) -> str:
    """The no-tool delivery beside the plain baseline, the fold spread and the costs."""
    ours, base = report.delivery, report.baseline
    lines = _header(ours) + _side_by_side(ours, base, "ours / base") + _absent(report)
    lines.append("")
    lines.append(f"fold spread ({FOLDS} folds by hash of id): " + _spread(ours.folds or {}))
    lines.append(
        f"fast stage ms {_timings(ours.fast_ms, with_max=False)}; "
        f"initial wait ms {_timings(ours.initial_wait_ms)}; "
        f"baseline ms {'-' if base is None else _timings(base.fast_ms, with_max=False)}"
    )
    if report.unenriched is not None:
        where = "" if report.placement == "sidecar" else f", its words in each memory's {report.placement}"
        lines += ["", f"enrichment: {report.sidecar} ({report.enriched_docs} of {ours.docs} docs enriched and fresh{where})"]
        lines += _side_by_side(ours, report.unenriched, "enr / unenr")
        lines.append("unenriched fold spread: " + _spread(report.unenriched.folds or {}))
    if report.refined is not None:
        lines += [""] + _refined_lines(report.refined)
    lines += [f"skipped {error}" for error in ours.load_errors]
    return "\n".join(lines)


def _absent(report: DeliveryBenchReport) -> list[str]:
    """The line saying the base column is empty, and why, when the plain baseline could not run."""
    return [] if report.baseline is not None else [f"base: absent ({report.baseline_absent})"]


def _refined_lines(refined: RefinedReport) -> list[str]:
    summary = refined.summary
    lines = [
        f"refined phase at the first tool-result turn ({refined.endpoint}):",
        f"{'selection':<22}{'n':>5}  {'strict':>7}  {'loose':>7}  {'silence':>7}  {'precision':>9}",
    ]
    rows = [("refined selection", refined.refined), ("tool-result delivery", refined.tool_result),
            ("turn (initial + tool)", refined.turn)]
    rows += [(f"refined, {kind}", m) for kind, m in refined.by_kind.items()]
    for label, m in rows:
        lines.append(
            f"{label:<22}{m.queries:>5}  {_rate(m.strict_delivery):>7}  {_rate(m.loose_delivery):>7}"
            f"  {_rate(m.negative_silence):>7}  {_rate(m.precision):>9}"
        )
    lines.append(
        f"model ms {_timings(summary.model_ms)}; begin to settled ms {_timings(summary.settled_ms)}; "
        f"unsettled {summary.unsettled}"
    )
    lines.append(
        f"validation: {summary.queries_with_rejected_refs} queries with rejected refs "
        f"{_counts(summary.rejected_refs)}; fallback {_counts(summary.fallback)}"
    )
    lines.append(
        f"strategy {_counts(summary.strategy)}; response mode {_counts(summary.response_mode)}; "
        f"initial phase {_counts(summary.initial_phase)}"
    )
    return lines


def _counts(counts: Mapping[str, int]) -> str:
    return "(" + (", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none") + ")"


def _strict(by_latency: Mapping[str, Metrics], latency: str) -> float | None:
    m = by_latency.get(latency)
    return m.strict_delivery if m is not None else None


def _lifecycle_table(report: DeliveryBenchReport, life: LifecycleReport) -> str:
    """Tool-free and tool-using turns under a model latency profile, beside the old blocking design."""
    ours, base = report.delivery, report.baseline
    free, using, blocking = life.tool_free, life.tool_using, life.blocking
    profile = ",".join(f"{ms:g}" for ms in life.latencies_ms)
    tool = "..".join(f"{ms:g}" for ms in life.tool_ms)
    lines = _header(ours) + [
        f"model latency profile {profile} ms (scripted server, oracle answers); tool calls {tool} ms",
        "",
        "tool-free turn, initial point (ours / plain BM25 top 2):",
    ]
    lines += _side_by_side(ours, base, "ours / base") + _absent(report)
    lines += [
        f"initial phase {_counts(free.initial_phase)}",
        "",
        "tool-using turn:",
        f"  refined delivery at the first tool-result turn: {using.refined_at_first_tool_result:.3f} of answerable"
        f" queries got new documents there (strict {_rate(using.first_tool_result.strict_delivery)},"
        f" precision {_rate(using.first_tool_result.precision)})",
        f"  by the first tool result (initial + tool): strict {_rate(using.turn.strict_delivery)}"
        f" loose {_rate(using.turn.loose_delivery)} silence {_rate(using.turn.negative_silence)}"
        f" precision {_rate(using.turn.precision)}",
        f"duplicate deliveries: {life.duplicates}",
        f"initial wait ms {_timings(life.initial_wait_ms)}; with a fast result {_timings(life.initial_wait_with_fast_result_ms)}",
        f"fast stage ms {_timings(life.fast_ms, with_max=False)}",
        "",
        f"old blocking design (await the recall up to {blocking.deadline_ms:g} ms before the model request):",
        f"  added latency ms {_timings(blocking.added_latency_ms)}; strict {_rate(blocking.overall.strict_delivery)}"
        f" loose {_rate(blocking.overall.loose_delivery)} silence {_rate(blocking.overall.negative_silence)}"
        f" precision {_rate(blocking.overall.precision)}",
        "",
        "strict delivery per model latency: no-tool turn (initial point), tool-using turn (by the first",
        "tool result), old blocking design; and the initial wait of the no-tool turns the fast stage",
        "handed nothing to (silent), p50 / mean ms:",
        f"{'model ms':>9}  {'n':>4}  {'no-tool':>8}  {'tool-using':>10}  {'blocking':>8}  {'silent':>6}  {'wait p50 / mean':>16}",
    ]
    for latency, m in free.by_latency.items():
        silent = free.silent_wait_by_latency.get(latency)
        waits = f"{silent['p50']:.2f} / {silent['mean']:.2f}" if silent else "-"
        lines.append(
            f"{latency:>9}  {m.queries:>4}  {_rate(m.strict_delivery):>8}"
            f"  {_rate(_strict(using.by_latency, latency)):>10}  {_rate(_strict(blocking.by_latency, latency)):>8}"
            f"  {int(silent['turns']) if silent else 0:>6}  {waits:>16}"
        )
    lines += [f"skipped {error}" for error in ours.load_errors]
    return "\n".join(lines)


_REPLAY_KEYS = (("strict", "strict_delivery"), ("silence", "negative_silence"), ("precision", "precision"))


def _signed(value: float | None) -> str:
    return "   -  " if value is None else f"{value:+6.3f}"


def _spread_cell(s: Spread, signed: bool = False) -> str:
    show = _signed if signed else _rate
    return f"{show(s.median)} ({show(s.min).strip()}..{show(s.max).strip()})"


def replay_table(report: ReplayReport) -> str:
    """Baseline and learned side by side per kind, the per-fold spreads and deltas, the repeat, the costs."""
    base, learned, settings = report.baseline, report.learned, report.settings
    m = learned.overall
    lines = [
        f"{learned.dataset}: {learned.docs} docs, {m.queries} measured queries ({m.answerable} answerable, "
        f"{m.negatives} negatives), folds {','.join(map(str, report.measured))} of {settings.folds} by hash of id",
        f"oracle accuracy {settings.oracle_accuracy:g} ({report.wrong_answers} wrong answers, seed {settings.seed}); "
        f"enrichment {report.sidecar or 'none'}"
        + ("; each training turn ends before the oracle answers" if settings.turn_ends_early else "")
        + (f"; {settings.passes} training passes" if settings.passes > 1 else "")
        + ("; the model skipped when the fast answer is certain" if settings.skip_certain else ""),
        "",
        f"{'kind':<14}{'n':>5}" + "".join(f"  {title:>22}" for title, _ in _REPLAY_KEYS),
        f"{'':<14}{'':>5}" + "".join(f"  {'base / learned  delta':>22}" for _ in _REPLAY_KEYS),
    ]
    rows = [("all", base.overall, learned.overall)] + [
        (kind, base.by_kind.get(kind), mine) for kind, mine in learned.by_kind.items()
    ]
    for kind, before, after in rows:
        cells = []
        for _, key in _REPLAY_KEYS:
            a = getattr(before, key) if before is not None else None
            b = getattr(after, key)
            delta = None if a is None or b is None else b - a
            cells.append(f"{_rate(a)} / {_rate(b)} {_signed(delta)}")
        lines.append(f"{kind:<14}{after.queries:>5}" + "".join(f"  {cell:>22}" for cell in cells))
    lines += ["", "per fold, median (min..max):"]
    for title, key in _REPLAY_KEYS:
        lines.append(
            f"  {title:<10} base {_spread_cell(report.fold_spread(lambda f: _metrics(f.baseline), key))}"
            f"  learned {_spread_cell(report.fold_spread(lambda f: _metrics(f.learned), key))}"
            f"  delta {_spread_cell(report.delta_spread(key), signed=True)}"
        )
    if settings.repeat:
        again = _metrics(report.repeat_outcomes)
        lines += ["", f"repeat (the trained prompts again, {again.queries} over the folds): "
                      f"strict {_rate(again.strict_delivery)} silence {_rate(again.negative_silence)} "
                      f"precision {_rate(again.precision)}"]
        for kind, km in _metrics_by_kind(report.repeat_outcomes).items():
            lines.append(f"  {kind:<12}{km.queries:>5}  strict {_rate(km.strict_delivery)}"
                         f"  silence {_rate(km.negative_silence)}")
    turns = sum(f.training.turns for f in report.folds)
    unsettled = sum(f.training.unsettled for f in report.folds)
    fallbacks = sum(f.training.fallbacks for f in report.folds)
    learn_ms = report.learn_ms()
    lines += [
        "",
        f"training: {turns} sessions, {unsettled} unsettled, {fallbacks} fell back; learner "
        + _counts(_summed(f.training.learn_outcomes for f in report.folds))
        + f"; {sum(f.training.learn_dropped for f in report.folds)} dropped (the learner fell behind)"
        + (f"; {sum(f.training.after_turn for f in report.folds)} refinements went on after their turn"
           if settings.turn_ends_early else ""),
        *([f"model skipped (the fast answer certain) on {sum(f.training.skipped for f in report.folds)} of {turns} "
           f"training turns; {sum(f.training.skipped_differs for f in report.folds)} of those delivered other than "
           "the oracle would have"] if settings.skip_certain else []),
        f"learning cost: learned sidecar bytes per memory {_bytes_cell(report.sidecar_bytes_per_memory())}"
        + ("" if learn_ms is None else f"; learner update p50 {learn_ms:.3f} ms"),
    ]
    lines += [f"skipped {error}" for error in learned.load_errors]
    return "\n".join(lines)


def _summed(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for each in counts:
        for key, n in each.items():
            total[key] = total.get(key, 0) + n
    return total


def _bytes_cell(s: Spread) -> str:
    if s.median is None or s.min is None or s.max is None:
        return "-"
    return f"{s.median:.1f} ({s.min:.1f}..{s.max:.1f})"


def _ms_cell(pick: Callable[[Row], float]) -> Callable[[Row], str]:
    return lambda row: f"{pick(row):.3f}"


_LATENCY_COLUMNS: list[Column[LatencyRow]] = [
    ("docs", 7, lambda row: row.docs),
    ("fast p50", 9, _ms_cell(lambda row: row.fast_ms.p50)),
    ("fast p99", 9, _ms_cell(lambda row: row.fast_ms.p99)),
    ("cpu p99", 8, _ms_cell(lambda row: row.fast_cpu_ms.p99)),
    ("rank-bm25 p50", 13, lambda row: "-" if row.baseline_ms is None else f"{row.baseline_ms.p50:.3f}"),
    ("rank-bm25 p99", 13, lambda row: "-" if row.baseline_ms is None else f"{row.baseline_ms.p99:.3f}"),
    ("update p50", 10, _ms_cell(lambda row: row.update_ms.p50)),
    ("update p99", 10, _ms_cell(lambda row: row.update_ms.p99)),
    ("after-update p99", 16, _ms_cell(lambda row: row.query_after_update_ms.p99)),
    ("build s", 8, lambda row: f"{row.build_s:.2f}"),
]
_LATENCY_LEGEND = (
    "(milliseconds; fast = FastHeuristic.recall (wall clock; cpu = its thread's CPU time), rank-bm25 = "
    "BM25Okapi.get_scores + top 2, update = index update after one changed file, after-update = the next "
    "query on its words)"
)
_ENRICHED_COLUMNS: list[Column[EnrichedLatencyRow]] = [
    ("docs", 7, lambda row: row.docs),
    ("head words", 13, lambda row: f"{row.head_plain.words:.1f} -> {row.head_enriched.words:.1f}"),
    ("unenriched p50", 14, _ms_cell(lambda row: row.plain_ms.p50)),
    ("p99", 6, _ms_cell(lambda row: row.plain_ms.p99)),
    ("cpu p99", 7, _ms_cell(lambda row: row.plain_cpu_ms.p99)),
    ("enriched p50", 12, _ms_cell(lambda row: row.enriched_ms.p50)),
    ("p99", 6, _ms_cell(lambda row: row.enriched_ms.p99)),
    ("cpu p99", 7, _ms_cell(lambda row: row.enriched_cpu_ms.p99)),
]
_ENRICHED_LEGEND = (
    "(milliseconds; FastHeuristic.recall on the same files read without and with their enrichment sidecar, "
    "the same prompts in turn; head words = name, description, keywords and usage scenarios per memory)"
)


def _table(columns: Sequence[Column[Row]], rows: Sequence[Row], legend: str) -> str:
    lines = ["  ".join(f"{title:>{width}}" for title, width, _ in columns)]
    lines += ["  ".join(f"{cell(row)!s:>{width}}" for _, width, cell in columns) for row in rows]
    lines.append(legend)
    return "\n".join(lines)
