"""`bench delivery` tables for people, formatted from the harness's typed reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from recall_kit_cli._format import fmt_rate

if TYPE_CHECKING:  # only the bench commands load the harness, inside the command
    from recall_kit_bench import (
        DeliveryBenchReport,
        DeliveryReport,
        LifecycleReport,
        Metrics,
        Percentiles,
        RefinedReport,
    )

FOLDS = 5


def _rates(m: Metrics | None) -> tuple[float | None, ...]:
    """strict, loose, silence, precision; all None for a kind the other side lacks."""
    if m is None:
        return (None, None, None, None)
    return (m.strict_delivery, m.loose_delivery, m.negative_silence, m.precision)


def _ms(stats: Percentiles, with_max: bool = True) -> str:
    shown = f"p50 {stats.p50:.3f} p99 {stats.p99:.3f}"
    return f"{shown} max {stats.max:.3f}" if with_max else shown


def _header(report: DeliveryReport) -> list[str]:
    m = report.overall
    return [
        f"{report.dataset}: {report.docs} docs, {m.queries} queries "
        f"({m.answerable} answerable, {m.negatives} negatives)",
        "",
    ]


def _side_by_side(ours: DeliveryReport, other: DeliveryReport, heading: str) -> list[str]:
    lines = [
        f"{'kind':<14}{'n':>5}  {'strict':>13}  {'loose':>13}  {'silence':>13}  {'precision':>13}",
        f"{'':<14}{'':>5}  {heading:>13}  {heading:>13}  {heading:>13}  {heading:>13}",
    ]
    rows = [("all", ours.overall, other.overall)] + [
        (kind, m, other.by_kind.get(kind)) for kind, m in ours.by_kind.items()
    ]
    for kind, mine, theirs in rows:
        cells = "  ".join(f"{fmt_rate(a)} / {fmt_rate(b)}" for a, b in zip(_rates(mine), _rates(theirs)))
        lines.append(f"{kind:<14}{mine.queries:>5}  {cells}")
    return lines


def delivery_table(report: DeliveryBenchReport) -> str:
    """The no-tool delivery beside the plain baseline, the fold spread and the costs."""
    ours, base = report.delivery, report.baseline
    lines = _header(ours) + _side_by_side(ours, base, "ours / base")
    lines.append("")
    folds = ours.folds or {}
    lines.append(
        f"fold spread ({FOLDS} folds by hash of id): "
        + ", ".join(f"{k} {fmt_rate(v.min)}..{fmt_rate(v.max)}" for k, v in folds.items())
    )
    lines.append(
        f"fast stage ms {_ms(ours.fast_ms, with_max=False)}; "
        f"initial wait ms {_ms(ours.initial_wait_ms)}; "
        f"baseline ms {_ms(base.fast_ms, with_max=False)}"
    )
    if report.unenriched is not None:
        lines += ["", f"enrichment: {report.sidecar} ({report.enriched_docs} of {ours.docs} docs enriched and fresh)"]
        lines += _side_by_side(ours, report.unenriched, "enr / unenr")
        folds = report.unenriched.folds or {}
        lines.append(
            "unenriched fold spread: " + ", ".join(f"{k} {fmt_rate(v.min)}..{fmt_rate(v.max)}" for k, v in folds.items())
        )
    if report.refined is not None:
        lines += [""] + _refined_lines(report.refined)
    lines += [f"skipped {error}" for error in ours.load_errors]
    return "\n".join(lines)


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
            f"{label:<22}{m.queries:>5}  {fmt_rate(m.strict_delivery):>7}  {fmt_rate(m.loose_delivery):>7}"
            f"  {fmt_rate(m.negative_silence):>7}  {fmt_rate(m.precision):>9}"
        )
    lines.append(
        f"model ms {_ms(summary.model_ms)}; begin to settled ms {_ms(summary.settled_ms)}; "
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


def lifecycle_table(report: DeliveryBenchReport, life: LifecycleReport) -> str:
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
    lines += _side_by_side(ours, base, "ours / base")
    lines += [
        f"initial phase {_counts(free.initial_phase)}",
        "",
        "tool-using turn:",
        f"  refined delivery at the first tool-result turn: {using.refined_at_first_tool_result:.3f} of answerable"
        f" queries got new documents there (strict {fmt_rate(using.first_tool_result.strict_delivery)},"
        f" precision {fmt_rate(using.first_tool_result.precision)})",
        f"  by the first tool result (initial + tool): strict {fmt_rate(using.turn.strict_delivery)}"
        f" loose {fmt_rate(using.turn.loose_delivery)} silence {fmt_rate(using.turn.negative_silence)}"
        f" precision {fmt_rate(using.turn.precision)}",
        f"duplicate deliveries: {life.duplicates}",
        f"initial wait ms {_ms(life.initial_wait_ms)}; with a fast result {_ms(life.initial_wait_with_fast_result_ms)}",
        f"fast stage ms {_ms(life.fast_ms, with_max=False)}",
        "",
        f"old blocking design (await the recall up to {blocking.deadline_ms:g} ms before the model request):",
        f"  added latency ms {_ms(blocking.added_latency_ms)}; strict {fmt_rate(blocking.overall.strict_delivery)}"
        f" loose {fmt_rate(blocking.overall.loose_delivery)} silence {fmt_rate(blocking.overall.negative_silence)}"
        f" precision {fmt_rate(blocking.overall.precision)}",
        "",
        "strict delivery per model latency: no-tool turn (initial point), tool-using turn (by the first",
        "tool result), old blocking design:",
        f"{'model ms':>9}  {'n':>4}  {'no-tool':>8}  {'tool-using':>10}  {'blocking':>8}",
    ]
    for latency, m in free.by_latency.items():
        lines.append(
            f"{latency:>9}  {m.queries:>4}  {fmt_rate(m.strict_delivery):>8}"
            f"  {fmt_rate(_strict(using.by_latency, latency)):>10}  {fmt_rate(_strict(blocking.by_latency, latency)):>8}"
        )
    lines += [f"skipped {error}" for error in ours.load_errors]
    return "\n".join(lines)

