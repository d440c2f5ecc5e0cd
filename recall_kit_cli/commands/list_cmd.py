"""`recall-kit list`: the memories (and the files skipped) under one or more roots."""

from __future__ import annotations

import click

from memory_store import SkippedFile, MemoryDoc
from recall_kit_cli._format import error_line, error_ref
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, clean_ref, echo, echo_json, echo_rows
from recall_kit_cli._config_file import open_store, root_option


@click.command("list", cls=HelpCommand)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def list_memories(roots: tuple[str, ...], as_json: bool) -> None:
    """List the memories under each root, and every file skipped with its reason.

    Lines are cut to the terminal's width; `validate` exits 1 when a file is skipped.

    \b
    Example:
      recall-kit list --root ~/memories
    """
    with open_store(roots) as store:
        snapshot = store.snapshot()
        store_roots = store.roots
    docs = sorted(snapshot.docs.values(), key=lambda d: d.ref)
    if as_json:
        echo_json({
            "roots": [{"scope": label, "path": path} for label, path in store_roots],
            "version": snapshot.version,
            "docs": [doc_json(doc) for doc in docs],
            "errors": [error_json(err) for err in snapshot.errors],
        })
        return
    echo_rows([f"{len(docs)} memories, {len(snapshot.errors)} skipped, in " + ", ".join(
        f"{clean(label)} ({clean(path)})" for label, path in store_roots)])
    width = min(max((len(clean_ref(doc.ref)) for doc in docs), default=0), 48)
    echo_rows(
        f"  {clean(doc.type):<9} {clean_ref(doc.ref):<{width}}  {clean(doc.name)} - {clean(doc.description)}"
        for doc in docs
    )
    if snapshot.errors:
        echo_rows(["skipped:", *(f"  {error_line(err)}" for err in snapshot.errors)])


def doc_json(doc: MemoryDoc) -> dict[str, object]:
    """A memory as `list --json` shows it: ref, scope, path, type, name, description and keywords."""
    return {
        "ref": doc.ref,
        "scope": doc.scope,
        "path": doc.path,
        "type": doc.type,
        "name": doc.name,
        "description": doc.description,
        "keywords": list(doc.keywords),
    }


def error_json(err: SkippedFile) -> dict[str, str]:
    """A skipped file as `list --json` shows it: ref, scope, path and reason."""
    return {"ref": error_ref(err), "scope": err.scope, "path": err.path, "reason": err.reason}
