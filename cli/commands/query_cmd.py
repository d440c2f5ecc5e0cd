"""`recall-kit query`: what the fast stage would deliver for one prompt."""

from __future__ import annotations

import json

import click

from recall_kit._evaluation import open_snapshot
from recall_kit._heuristic import FastHeuristic, FastResult
from recall_kit_cli.main import cli

BODY_BUDGET = 1200  # characters of body shown per document


@cli.command("query")
@click.argument("text")
@click.option(
    "--root",
    "roots",
    multiple=True,
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="A memory folder (repeatable).",
)
@click.option("--fast-only", is_flag=True, help="Only the fast heuristic (no model stage).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def query(text: str, roots: tuple[str, ...], fast_only: bool, as_json: bool) -> None:
    """Show which memories TEXT would receive, with scores and the fast stage's time."""
    snapshot = open_snapshot(roots)
    result = FastHeuristic(snapshot).recall(text)
    # The model stage arrives with the session; until then both modes show the fast stage.
    if as_json:
        click.echo(json.dumps(_as_json(result, len(snapshot.docs)), ensure_ascii=False))
        return
    click.echo(_render(result, len(snapshot.docs)))


def _as_json(result: FastResult, store_size: int) -> dict[str, object]:
    return {
        "strategy": result.strategy,
        "fast_ms": round(result.elapsed_ms, 3),
        "docs_scanned": result.docs_scanned,
        "store_size": store_size,
        "docs": [
            {"ref": s.doc.ref, "name": s.doc.name, "score": round(s.score, 4)} for s in result.docs
        ],
        "ranked": [{"ref": s.doc.ref, "score": round(s.score, 4)} for s in result.ranked[:10]],
        "rendered": _render_docs(result),
    }


def _render(result: FastResult, store_size: int) -> str:
    lines = [
        f"fast stage: {result.elapsed_ms:.3f} ms, {store_size} docs, "
        f"{result.docs_scanned} scored, strategy {result.strategy}"
    ]
    if not result.docs:
        lines.append("nothing delivered (no confident match)")
    for scored in result.docs:
        lines.append(f"  {scored.score:8.3f}  {scored.doc.ref}  {scored.doc.name}")
    if result.docs:
        lines += ["", _render_docs(result)]
    return "\n".join(lines)


def _render_docs(result: FastResult) -> str:
    blocks = []
    for scored in result.docs:
        doc = scored.doc
        body = doc.body.strip()
        if len(body) > BODY_BUDGET:
            body = body[:BODY_BUDGET] + f"\n[... truncated, {len(doc.body) - BODY_BUDGET} more characters]"
        blocks.append(f"## {doc.name} ({doc.ref})\n{doc.description}\n\n{body}")
    return "\n\n".join(blocks)
