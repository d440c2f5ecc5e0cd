"""`recall-kit list`: the memories (and the files skipped) under one or more roots."""

from __future__ import annotations

import json

import click

from memory_store import LoadError, MemoryDoc, MemoryStore
from memory_store import MemoryStoreError
from recall_kit_cli._format import InputError
import click

DESCRIPTION_WIDTH = 80  # characters of description shown per line in text mode


@click.command("list")
@click.option("--root", "roots", multiple=True, required=True, help="A memory folder (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def list_memories(roots: tuple[str, ...], as_json: bool) -> None:
    """List the memory documents under each --root, and every file skipped with its reason."""
    try:
        with MemoryStore.open(*roots, watch=False) as store:
            snapshot = store.snapshot()
            store_roots = store.roots
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
    docs = sorted(snapshot.docs.values(), key=lambda d: d.ref)
    if as_json:
        payload = {
            "roots": [{"scope": label, "path": path} for label, path in store_roots],
            "version": snapshot.version,
            "docs": [doc_json(doc) for doc in docs],
            "errors": [error_json(err) for err in snapshot.errors],
        }
        click.echo(json.dumps(payload, ensure_ascii=False))
        return
    click.echo(f"{len(docs)} memories, {len(snapshot.errors)} skipped, in " + ", ".join(
        f"{label} ({path})" for label, path in store_roots))
    width = max((len(doc.ref) for doc in docs), default=0)
    for doc in docs:
        click.echo(f"  {doc.type:<9} {doc.ref:<{width}}  {doc.name} - {_clip(doc.description)}")
    if snapshot.errors:
        click.echo("skipped:")
        for err in snapshot.errors:
            click.echo(f"  {err.ref}: {err.reason}")


def doc_json(doc: MemoryDoc) -> dict[str, object]:
    return {
        "ref": doc.ref,
        "scope": doc.scope,
        "path": doc.path,
        "type": doc.type,
        "name": doc.name,
        "description": doc.description,
        "keywords": list(doc.keywords),
    }


def error_json(err: LoadError) -> dict[str, str]:
    return {"ref": err.ref, "scope": err.scope, "path": err.path, "reason": err.reason}


def _clip(text: str) -> str:
    return text if len(text) <= DESCRIPTION_WIDTH else text[: DESCRIPTION_WIDTH - 3] + "..."
