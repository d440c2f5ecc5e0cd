"""`bench delivery` reports: the JSON object (issue 3's keys) and the tables for people."""

from __future__ import annotations

from typing import Any, Sequence

from recall_kit._evaluation import (
    EvalDataset,
    QueryOutcome,
    metrics,
    metrics_by_fold,
    metrics_by_kind,
    percentiles,
)
from recall_kit._probe import ProbedTurn, refinement_summary, turn_outcomes
from recall_kit_cli._format import fmt_rate

FOLDS = 5
METRIC_KEYS = ("strict_delivery", "loose_delivery", "negative_silence", "precision")
COUNT_KEYS = ("queries", "answerable", "negatives", "delivered_docs")


def outcome_report(dataset: EvalDataset, outcomes: list[QueryOutcome]) -> dict[str, Any]:
    """Section 6's metrics overall, per kind and per fold, with the fast stage and initial wait."""
    report: dict[str, Any] = {"dataset": str(dataset.root), "docs": len(dataset.snapshot.docs)}
    report.update(metrics(outcomes).as_dict())
    report["by_kind"] = {kind: m.as_dict() for kind, m in metrics_by_kind(outcomes).items()}
    folds = metrics_by_fold(outcomes, FOLDS)
    report["folds"] = {key: _spread([getattr(m, key) for m in folds]) for key in METRIC_KEYS}
    fast = percentiles([o.fast_ms for o in outcomes])
    report["fast_ms"] = {"p50": fast["p50"], "p99": fast["p99"]}
    report["initial_wait_ms"] = percentiles([o.wait_ms for o in outcomes])
    report["load_errors"] = [f"{e.ref}: {e.reason}" for e in dataset.snapshot.errors]
    return report


def refined_report(dataset: EvalDataset, turns: Sequence[ProbedTurn]) -> dict[str, Any]:
    """The refined phase (issue 4): the settled selection at the first tool-result turn."""
    refined = turn_outcomes(dataset.queries, turns, "refined")
    report: dict[str, Any] = metrics(refined).as_dict()
    report["by_kind"] = {kind: m.as_dict() for kind, m in metrics_by_kind(refined).items()}
    report["tool_result"] = metrics(turn_outcomes(dataset.queries, turns, "tool_result")).as_dict()
    report["turn"] = metrics(turn_outcomes(dataset.queries, turns, "turn")).as_dict()
    report.update(refinement_summary(turns))
    return report


def lifecycle_report(dataset: EvalDataset, lifecycle: dict[str, Any]) -> dict[str, Any]:
    """Issue 3's top-level keys from the tool-free turns of the lifecycle bench, and all of it."""
    free = lifecycle["tool_free"]
    report: dict[str, Any] = {"dataset": str(dataset.root), "docs": len(dataset.snapshot.docs)}
    report.update({key: free[key] for key in COUNT_KEYS + METRIC_KEYS})
    report["by_kind"] = free["by_kind"]
    report["fast_ms"] = {"p50": lifecycle["fast_ms"]["p50"], "p99": lifecycle["fast_ms"]["p99"]}
    report["initial_wait_ms"] = lifecycle["initial_wait_ms"]
    report["load_errors"] = [f"{e.ref}: {e.reason}" for e in dataset.snapshot.errors]
    report["lifecycle"] = lifecycle
    return report


def _spread(values: list[float | None]) -> dict[str, float | None]:
    present = [v for v in values if v is not None]
    if not present:
        return {"min": None, "max": None}
    return {"min": min(present), "max": max(present)}


def _ms(stats: dict[str, float], keys: Sequence[str] = ("p50", "p99", "max")) -> str:
    return " ".join(f"{key} {stats[key]:.3f}" for key in keys if key in stats)


def _header(report: dict[str, Any]) -> list[str]:
    return [
        f"{report['dataset']}: {report['docs']} docs, {report['queries']} queries "
        f"({report['answerable']} answerable, {report['negatives']} negatives)",
        "",
    ]


def _side_by_side(report: dict[str, Any], other: dict[str, Any], heading: str) -> list[str]:
    lines = [
        f"{'kind':<14}{'n':>5}  {'strict':>13}  {'loose':>13}  {'silence':>13}  {'precision':>13}",
        f"{'':<14}{'':>5}  {heading:>13}  {heading:>13}  {heading:>13}  {heading:>13}",
    ]
    rows = [("all", report, other)] + [
        (kind, m, other["by_kind"].get(kind, {})) for kind, m in report["by_kind"].items()
    ]
    for kind, ours, theirs in rows:
        cells = "  ".join(f"{fmt_rate(ours[k])} / {fmt_rate(theirs.get(k))}" for k in METRIC_KEYS)
        lines.append(f"{kind:<14}{ours['queries']:>5}  {cells}")
    return lines


def delivery_table(report: dict[str, Any]) -> str:
    """The no-tool delivery beside the plain baseline, the fold spread and the costs."""
    base = report["baseline"]
    lines = _header(report) + _side_by_side(report, base, "ours / base")
    lines.append("")
    lines.append(
        f"fold spread ({FOLDS} folds by hash of id): "
        + ", ".join(f"{k} {fmt_rate(v['min'])}..{fmt_rate(v['max'])}" for k, v in report["folds"].items())
    )
    lines.append(
        f"fast stage ms p50 {report['fast_ms']['p50']:.3f} p99 {report['fast_ms']['p99']:.3f}; "
        f"initial wait ms {_ms(report['initial_wait_ms'])}; "
        f"baseline ms p50 {base['fast_ms']['p50']:.3f} p99 {base['fast_ms']['p99']:.3f}"
    )
    if "refined" in report:
        lines += [""] + _refined_lines(report["refined"])
    lines += [f"skipped {error}" for error in report["load_errors"]]
    return "\n".join(lines)


def _refined_lines(refined: dict[str, Any]) -> list[str]:
    lines = [
        f"refined phase at the first tool-result turn ({refined['endpoint']}):",
        f"{'selection':<22}{'n':>5}  {'strict':>7}  {'loose':>7}  {'silence':>7}  {'precision':>9}",
    ]
    rows = [("refined selection", refined), ("tool-result delivery", refined["tool_result"]),
            ("turn (initial + tool)", refined["turn"])]
    rows += [(f"refined, {kind}", m) for kind, m in refined["by_kind"].items()]
    for label, m in rows:
        lines.append(
            f"{label:<22}{m['queries']:>5}  {fmt_rate(m['strict_delivery']):>7}  {fmt_rate(m['loose_delivery']):>7}"
            f"  {fmt_rate(m['negative_silence']):>7}  {fmt_rate(m['precision']):>9}"
        )
    lines.append(
        f"model ms {_ms(refined['model_ms'])}; begin to settled ms {_ms(refined['settled_ms'])}; "
        f"unsettled {refined['unsettled']}"
    )
    lines.append(
        f"validation: {refined['queries_with_rejected_refs']} queries with rejected refs "
        f"{_counts(refined['rejected_refs'])}; fallback {_counts(refined['fallback'])}"
    )
    lines.append(
        f"strategy {_counts(refined['strategy'])}; response mode {_counts(refined['response_mode'])}; "
        f"initial phase {_counts(refined['initial_phase'])}"
    )
    return lines


def _counts(counts: dict[str, int]) -> str:
    return "(" + (", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none") + ")"


def lifecycle_table(report: dict[str, Any]) -> str:
    """Issue 5's figures: tool-free and tool-using turns beside the old blocking design."""
    life, base = report["lifecycle"], report["baseline"]
    free, using, blocking = life["tool_free"], life["tool_using"], life["blocking"]
    profile = ",".join(f"{ms:g}" for ms in life["latencies_ms"])
    tool = "..".join(f"{ms:g}" for ms in life["tool_ms"])
    lines = _header(report) + [
        f"model latency profile {profile} ms (scripted server, oracle answers); tool calls {tool} ms",
        "",
        "tool-free turn, initial point (ours / plain BM25 top 2):",
    ]
    lines += _side_by_side(report, base, "ours / base")
    lines += [
        f"initial phase {_counts(free['initial_phase'])}",
        "",
        "tool-using turn:",
        f"  refined delivery at the first tool-result turn: {using['refined_at_first_tool_result']:.3f} of answerable"
        f" queries got new documents there (strict {fmt_rate(using['first_tool_result']['strict_delivery'])},"
        f" precision {fmt_rate(using['first_tool_result']['precision'])})",
        f"  by the first tool result (initial + tool): strict {fmt_rate(using['turn']['strict_delivery'])}"
        f" loose {fmt_rate(using['turn']['loose_delivery'])} silence {fmt_rate(using['turn']['negative_silence'])}"
        f" precision {fmt_rate(using['turn']['precision'])}",
        f"duplicate deliveries: {life['duplicates']}",
        f"initial wait ms {_ms(life['initial_wait_ms'])}; with a fast result {_ms(life['initial_wait_with_fast_result_ms'])}",
        f"fast stage ms {_ms(life['fast_ms'], ('p50', 'p99'))}",
        "",
        f"old blocking design (await the recall up to {blocking['deadline_ms']:g} ms before the model request):",
        f"  added latency ms {_ms(blocking['added_latency_ms'])}; strict {fmt_rate(blocking['strict_delivery'])}"
        f" loose {fmt_rate(blocking['loose_delivery'])} silence {fmt_rate(blocking['negative_silence'])}"
        f" precision {fmt_rate(blocking['precision'])}",
        "",
        "strict delivery per model latency: no-tool turn (initial point), tool-using turn (by the first",
        "tool result), old blocking design:",
        f"{'model ms':>9}  {'n':>4}  {'no-tool':>8}  {'tool-using':>10}  {'blocking':>8}",
    ]
    for latency, m in free["by_latency"].items():
        turn = using["by_latency"].get(latency, {})
        block = blocking["by_latency"].get(latency, {})
        lines.append(
            f"{latency:>9}  {m['queries']:>4}  {fmt_rate(m['strict_delivery']):>8}"
            f"  {fmt_rate(turn.get('strict_delivery')):>10}  {fmt_rate(block.get('strict_delivery')):>8}"
        )
    lines += [f"skipped {error}" for error in report["load_errors"]]
    return "\n".join(lines)
