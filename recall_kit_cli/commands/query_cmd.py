"""`recall-kit query`: what one prompt receives through the real recall path, fast then refined."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import click

from recall_kit import ConfigError, FastHeuristic, MemoryStoreError, SelectorConfig, open_recaller
from recall_kit.settings import Settings
from recall_kit.limits import bounded_prompt
from recall_kit.turns import ObservedTurn, TurnRunner
from recall_kit.tuning import GateVerdict
from recall_kit_cli._format import InputError, ModelUnavailable
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, clean_ref, clean_block, counted, echo, echo_json, echo_rows, warn
from recall_kit_cli._config_file import load, model_off_reason, root_option, roots_of

if TYPE_CHECKING:
    from memory_store import Snapshot

RANKED_SHOWN = 10  # ungated ranking entries in --json and in -v
FALLBACK = "showing the fast result"


@click.command("query", cls=HelpCommand)
@click.argument("text")
@root_option
@click.option("--fast-only", is_flag=True, help="Only the fast heuristic (no model stage).")
@click.option("--base-url", help="OpenAI-compatible endpoint URL.")
@click.option("--model", help="Model name at that endpoint.")
@click.option("--model-timeout", type=float, help="Seconds the model may take (default 30).")
@click.option("--require-model", is_flag=True, help="Exit 3 when the model gives no answer.")
@click.option("--format", "fmt", type=click.Choice(["text", "block", "json"]), default="text",
              help="block: just the memory block, if any.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("-v", "--verbose", is_flag=True, help="Also the near misses and why the gate held them.")
@click.option("--no-cache", is_flag=True, help="Skip the per-user index cache.")
def query(
    text: str, roots: tuple[str, ...], fast_only: bool, base_url: str | None, model: str | None,
    model_timeout: float | None, require_model: bool, fmt: str, as_json: bool, verbose: bool, no_cache: bool,
) -> None:
    """Show what TEXT receives: the fast delivery now, the model's refinement after.

    \b
    Example:
      recall-kit query "how do we deploy ledgerline?" --root examples/memories -v
    """
    fmt = "json" if as_json else fmt
    if require_model and fast_only:
        raise InputError("--require-model and --fast-only exclude each other")
    settings = load(roots=roots, base_url=base_url, model=model, timeout=model_timeout)
    paths = roots_of(settings).paths
    config, off_reason, refused = _selector_config(fast_only, settings)
    text = bounded_prompt(text)  # what recall reads of it; a pasted log costs no more than its head
    try:
        recaller = open_recaller(paths, watch=False, use_cache=not no_cache, cache_dir=settings.cache_dir.value,
                                 selector=config, learn=settings.learn.value and config is not None)
    except (MemoryStoreError, ConfigError) as exc:
        raise InputError(str(exc)) from None
    snapshot, heuristic = recaller.snapshot(), recaller.heuristic
    if off_reason and fmt == "text":
        echo(f"refinement off: {clean(off_reason)}")
    elif refused and fmt == "block":  # the block alone would not tell that a project file's endpoint was refused
        warn(f"refinement off: {off_reason}")

    def show_initial(turn: ObservedTurn) -> None:
        if fmt == "text":
            lines, block = _initial_text(turn, snapshot, verbose)
            echo_rows(lines)
            if block:
                echo("", clean_block(block))
            if verbose:
                echo_rows(_near_miss_lines(turn, heuristic))

    async def one_turn() -> ObservedTurn:
        async with recaller:  # closed on this loop: the selector's connections belong to it
            runner = TurnRunner(recaller)
            # with a model: wait for it (bounded by its timeout) as if a tool ran, then the tool-result point
            between = runner.settle_bound() if config else None
            return await runner.run(text, between=between, on_initial=show_initial)

    turn = asyncio.run(one_turn())
    # no model configured is one more way of getting no model answer: the fast result, then exit 3
    summary, answered = _outcome(turn, config) if config else (f"refinement is off ({off_reason})", False)
    if fmt == "json":
        payload = _initial_json(turn, len(snapshot.docs))
        payload["load_errors"] = [f"{e.ref}: {e.reason}" for e in snapshot.errors]
        payload["refinement"] = _refinement_json(config, off_reason)
        payload["refined"] = _refined_json(turn, config, summary, answered) if config else None
        if verbose:
            payload["near_misses"] = [_near_miss_json(verdict) for verdict in _near_misses(turn, heuristic)]
        echo_json(payload)
    elif fmt == "block":
        block = turn.initial.text if turn.initial else (turn.tool_result.text if turn.tool_result else "")
        if block:
            echo(clean_block(block.rstrip("\n")))
    elif config:
        lines, block = _refined_text(turn, summary, answered)
        echo_rows(lines)
        if block:
            echo("", clean_block(block))
    if require_model and not answered:
        raise ModelUnavailable(f"--require-model: {summary}")


def _selector_config(fast_only: bool, settings: Settings) -> tuple[SelectorConfig | None, str | None, bool]:
    """The endpoint to refine with, or None and the one-line reason refinement is off; and whether
    it is off because an untrusted project file names the endpoint."""
    if fast_only:
        return None, "--fast-only", False
    config = settings.selector
    off = model_off_reason(config)
    return (None, off, config.refusal is not None) if off else (config, None, False)


def _outcome(turn: ObservedTurn, config: SelectorConfig) -> tuple[str, bool]:
    """One plain line on what the model stage did, and whether the model's own answer was used."""
    selection = turn.selection
    if selection is None or turn.settled_ms is None:
        if turn.initial is not None and turn.initial.phase == "refined":
            return "the model had already answered at the initial point (shown above)", True
        return f"no answer from the model within the {config.timeout:g} s timeout: {FALLBACK}", False
    fallback = selection.fallback
    if fallback is None:
        return (f"refined after {turn.settled_ms:.3f} ms (model {selection.latency_ms:.3f} ms): "
                f"strategy {selection.strategy}, response mode {selection.response_mode or '-'}"), True
    reason = fallback.reason
    if fallback.kind == "unreachable":
        return f"model unreachable ({reason.removeprefix('transport error: ')}): {FALLBACK}", False
    if fallback.kind == "timeout":
        return f"model timed out ({reason}): {FALLBACK}", False
    if fallback.kind == "http_error":
        return f"model failed ({reason}): {FALLBACK}", False
    if fallback.kind == "no_candidates":
        return f"model not asked (no candidate memories): {FALLBACK}", False
    return f"model answer unusable ({reason}): {FALLBACK}", False


def _near_misses(turn: ObservedTurn, heuristic: FastHeuristic) -> list[GateVerdict]:
    """The gate's verdicts on the ranked documents that were not delivered."""
    delivered = set(turn.initial_refs)
    ranked, evidence, _ = heuristic.rank(turn.query)
    return [
        verdict for verdict in heuristic.gate.explain(ranked, evidence)[:RANKED_SHOWN]
        if verdict.scored.doc.ref not in delivered
    ]


def _why(verdict: GateVerdict) -> str:
    return f"{verdict}, excluded from this turn" if verdict.passed else str(verdict)


def _near_miss_json(verdict: GateVerdict) -> dict[str, Any]:
    scored = verdict.scored
    return {
        "ref": scored.doc.ref, "score": round(scored.score, 4), "why": _why(verdict), "passed": verdict.passed,
        "reasons": [{"rule": r.rule, "has": round(r.has, 4), "needs": r.needs} for r in verdict.reasons],
    }


def _near_miss_lines(turn: ObservedTurn, heuristic: FastHeuristic) -> list[str]:
    misses = _near_misses(turn, heuristic)
    if not misses:
        return ["near misses: none"]
    return ["near misses (ranked, not delivered):"] + [
        f"  {verdict.scored.score:8.3f}  {clean_ref(verdict.scored.doc.ref)}: {_why(verdict)}" for verdict in misses
    ]


def _scores(turn: ObservedTurn) -> dict[str, float]:
    return {s.doc.ref: s.score for s in turn.fast.ranked} if turn.fast is not None else {}


def _doc_json(doc: Any, scores: dict[str, float]) -> dict[str, Any]:
    score = scores.get(doc.ref)
    return {"ref": doc.ref, "name": doc.name, "score": None if score is None else round(score, 4)}


def _initial_json(turn: ObservedTurn, store_size: int) -> dict[str, Any]:
    fast, initial, scores = turn.fast, turn.initial, _scores(turn)
    return {
        "query": turn.query,
        "store_size": store_size,
        "strategy": initial.strategy if initial else (fast.strategy if fast else "none"),
        "fast_ms": round(fast.elapsed_ms, 3) if fast else None,
        "docs_scanned": fast.docs_scanned if fast else 0,
        "docs": [_doc_json(d, scores) for d in initial.docs] if initial else [],
        "rendered": initial.text if initial else "",
        "initial": None if initial is None else {
            "phase": initial.phase,
            "point": initial.point,
            "placement": initial.placement,
            "latency_ms": round(initial.latency_ms, 3),
            "wait_ms": round(turn.wait_ms, 3),
        },
        "fast": None if fast is None else {
            "strategy": fast.strategy,
            "docs": [_doc_json(s.doc, scores) for s in fast.docs],
            "ranked": [_doc_json(s.doc, scores) for s in fast.ranked[:RANKED_SHOWN]],
        },
    }


def _refinement_json(config: SelectorConfig | None, off_reason: str | None) -> dict[str, Any]:
    if config is None:
        return {"enabled": False, "reason": off_reason}
    # the endpoint and model only: the key and any credentials in the URL stay out of every output
    return {"enabled": True, "base_url": config.shown_base_url, "model": config.model,
            "timeout_s": config.timeout}


def _refined_json(turn: ObservedTurn, config: SelectorConfig, summary: str, answered: bool) -> dict[str, Any]:
    selection, tool, scores = turn.selection, turn.tool_result, _scores(turn)
    return {
        "summary": summary,
        "model_answered": answered,
        "settled": turn.settled_ms is not None,
        "settled_ms": None if turn.settled_ms is None else round(turn.settled_ms, 3),
        "model_ms": round(selection.latency_ms, 3) if selection else None,
        "strategy": selection.strategy if selection else None,
        "response_mode": selection.response_mode if selection else None,
        "accepted": list(selection.accepted) if selection else [],
        "rejected": [{"ref": r, "reason": why} for r, why in selection.rejected] if selection else [],
        "fallback_reason": selection.fallback_reason if selection else None,
        "docs": [_doc_json(d, scores) for d in selection.docs] if selection else [],
        "tool_result": None if tool is None else {
            "docs": list(tool.refs),
            "phase": tool.phase,
            "strategy": tool.strategy,
            "placement": tool.placement,
            "latency_ms": round(tool.latency_ms, 3),
            "rendered": tool.text,
        },
    }


def _doc_lines(docs: Any, scores: dict[str, float]) -> list[str]:
    lines = []
    for doc in docs:
        score = scores.get(doc.ref)
        shown = "score       -" if score is None else f"score {score:7.3f}"
        lines.append(f"  {shown}  {clean_ref(doc.ref)}  {clean(doc.name)}")
    return lines


_PROBLEMS_SHOWN = 3  # load errors named in the text output; `recall-kit validate` lists them all


def _initial_text(turn: ObservedTurn, snapshot: Snapshot, verbose: bool) -> tuple[list[str], str]:
    """The status lines (fitted to the terminal) and the rendered block (shown whole)."""
    fast, initial, scores = turn.fast, turn.initial, _scores(turn)
    lines = []
    if fast is not None:
        lines.append(f"searched {counted(len(snapshot.docs), 'memory', 'memories')} in {fast.elapsed_ms:.1f} ms")
    for error in snapshot.errors[:_PROBLEMS_SHOWN]:
        lines.append(f"  not read: {clean_ref(error.ref)}: {clean(error.reason)}")
    if len(snapshot.errors) > _PROBLEMS_SHOWN:
        lines.append(f"  and {len(snapshot.errors) - _PROBLEMS_SHOWN} more not read (recall-kit validate lists them)")
    if initial is None:
        lines.append(f"delivered at once ({turn.wait_ms:.1f} ms): nothing, no confident match")
        return lines, ""
    lines.append(f"delivered at once ({turn.wait_ms:.1f} ms): {counted(len(initial.docs), 'memory', 'memories')}")
    if verbose:
        lines.append(
            f"  phase {initial.phase}, strategy {initial.strategy}, {initial.latency_ms:.3f} ms after begin, "
            f"placement {initial.placement}; fast stage {fast.elapsed_ms if fast else 0:.3f} ms, "
            f"{fast.docs_scanned if fast else 0} scored"
        )
    lines += _doc_lines(initial.docs, scores)
    return lines, initial.text


def _refined_text(turn: ObservedTurn, summary: str, answered: bool) -> tuple[list[str], str]:
    selection, tool = turn.selection, turn.tool_result
    lines = ["", clean(summary)]
    if selection is None or turn.settled_ms is None:
        return lines, ""
    if selection.accepted or answered:
        lines.append("  accepted: " + (", ".join(clean(ref) for ref in selection.accepted) or "(none)"))
    for ref, reason in selection.rejected:
        lines.append(f"  rejected: {clean(ref)} ({clean(reason)})")
    lines.append("  full selection:" if selection.docs else "  full selection: (nothing)")
    lines += ["  " + line for line in _doc_lines(selection.docs, _scores(turn))]
    if tool is None:
        lines.append("first tool-result point: nothing new")
    else:
        lines.append(
            f"first tool-result point: {len(tool.docs)} new, strategy {tool.strategy}, placement {tool.placement}"
        )
        return lines, tool.text
    return lines, ""
