"""`recall-kit query`: what one prompt receives through the real recall path, fast then refined."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click

from recall_kit import (
    ConfigError,
    MemoryStoreError,
    ModelSelector,
    SelectorConfig,
    load_selector_config,
    ObservedTurn,
    TurnRunner,
    open_indexed,
)
from recall_kit_cli._format import InputError

RANKED_SHOWN = 10  # ungated ranking entries in --json


@click.command("query")
@click.argument("text")
@click.option("--root", "roots", multiple=True, required=True, help="A memory folder (repeatable).")
@click.option("--fast-only", is_flag=True, help="Only the fast heuristic (no model stage).")
@click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", help="Model name at that endpoint.")
@click.option("--model-timeout", type=float, help="Seconds before the model stage gives up (default 30).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--no-cache", is_flag=True, help="Read and index every file; skip the per-user index cache.")
def query(
    text: str,
    roots: tuple[str, ...],
    fast_only: bool,
    base_url: str | None,
    model: str | None,
    model_timeout: float | None,
    as_json: bool,
    no_cache: bool,
) -> None:
    """Show what TEXT receives: the fast delivery at once, then the model's refinement."""
    config, off_reason = _selector_config(fast_only, base_url, model, model_timeout)
    try:
        indexed = open_indexed(roots, use_cache=not no_cache)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
    snapshot = indexed.snapshot
    if off_reason and not as_json:
        click.echo(f"refinement off: {off_reason}")

    def show_initial(turn: ObservedTurn) -> None:
        if not as_json:
            click.echo(_initial_text(turn, len(snapshot.docs)))

    async def one_turn() -> ObservedTurn:
        runner = TurnRunner(
            snapshot, ModelSelector.from_config(config) if config else None, heuristic=indexed.heuristic
        )
        try:
            # with a model: wait for it (bounded by its timeout) as if a tool ran, then the tool-result point
            between = runner.settle_bound() if config else None
            return await runner.run(text, between=between, on_initial=show_initial)
        finally:
            await runner.aclose()

    turn = asyncio.run(one_turn())
    if as_json:
        payload = _initial_json(turn, len(snapshot.docs))
        payload["load_errors"] = [f"{e.ref}: {e.reason}" for e in snapshot.errors]
        payload["refinement"] = _refinement_json(config, off_reason)
        payload["refined"] = _refined_json(turn, config) if config else None
        click.echo(json.dumps(payload, ensure_ascii=False))
    elif config:
        click.echo(_refined_text(turn, config))


def _selector_config(
    fast_only: bool, base_url: str | None, model: str | None, timeout: float | None
) -> tuple[SelectorConfig | None, str | None]:
    """The endpoint to refine with, or None and the one-line reason refinement is off."""
    if fast_only:
        return None, "--fast-only"
    try:
        config = load_selector_config(base_url=base_url, model=model, timeout=timeout)
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    if not config.configured:
        missing = " and ".join(config.missing())
        return None, (
            f"no model configured (missing {missing}; use --base-url/--model, "
            "RECALL_KIT_BASE_URL/RECALL_KIT_MODEL, or [selector] in recall-kit.toml)"
        )
    return config, None


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
    # the endpoint and model only: the key stays out of every output
    return {"enabled": True, "base_url": config.base_url, "model": config.model, "timeout_s": config.timeout}


def _refined_json(turn: ObservedTurn, config: SelectorConfig) -> dict[str, Any]:
    selection, tool, scores = turn.selection, turn.tool_result, _scores(turn)
    return {
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
        shown = "       -" if score is None else f"{score:8.3f}"
        lines.append(f"  {shown}  {doc.ref}  {doc.name}")
    return lines


def _initial_text(turn: ObservedTurn, store_size: int) -> str:
    fast, initial, scores = turn.fast, turn.initial, _scores(turn)
    lines = []
    if fast is not None:
        lines.append(
            f"fast stage: {fast.elapsed_ms:.3f} ms, {store_size} docs, "
            f"{fast.docs_scanned} scored, strategy {fast.strategy}"
        )
    if initial is None:
        lines.append(f"initial point (waited {turn.wait_ms:.3f} ms): nothing delivered (no confident match)")
        return "\n".join(lines)
    lines.append(
        f"initial point (waited {turn.wait_ms:.3f} ms): phase {initial.phase}, strategy {initial.strategy}, "
        f"{initial.latency_ms:.3f} ms after begin, placement {initial.placement}"
    )
    lines += _doc_lines(initial.docs, scores)
    lines += ["", initial.text]
    return "\n".join(lines)


def _refined_text(turn: ObservedTurn, config: SelectorConfig) -> str:
    selection, tool = turn.selection, turn.tool_result
    if turn.settled_ms is None or selection is None:
        if turn.initial is not None and turn.initial.phase == "refined":
            return "refined: the recall had already settled at the initial point (shown above)"
        return f"refined: no answer from {config.model} within the {config.timeout:g} s model timeout"
    lines = [
        "",
        f"refined after {turn.settled_ms:.3f} ms (model {selection.latency_ms:.3f} ms): "
        f"strategy {selection.strategy}, response mode {selection.response_mode or '-'}",
        "  accepted: " + (", ".join(selection.accepted) or "(none)"),
    ]
    for ref, reason in selection.rejected:
        lines.append(f"  rejected: {ref} ({reason})")
    if selection.fallback_reason:
        lines.append(f"  fallback: {selection.fallback_reason}")
    lines.append("  full selection:" if selection.docs else "  full selection: (nothing)")
    lines += ["  " + line for line in _doc_lines(selection.docs, _scores(turn))]
    if tool is None:
        lines.append("first tool-result point: nothing new")
    else:
        lines.append(
            f"first tool-result point: {len(tool.docs)} new, strategy {tool.strategy}, placement {tool.placement}"
        )
        lines += ["", tool.text]
    return "\n".join(lines)
