"""`recall-kit stats`: what the store holds, by type and scope, sizes, ages and index size."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import click

from memory_store import MemoryDoc, MemoryRoot
from recall_kit import MemoryStoreError, open_indexed
from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, echo_json, echo_rows
from recall_kit_cli._config_file import resolve_roots, root_option
from recall_kit_cli.integrations.doctor_record import doctor_line, doctor_stats



@click.command("stats", cls=HelpCommand)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def stats(roots: tuple[str, ...], as_json: bool) -> None:
    """Counts by type and scope, sizes, the oldest and newest memories, enrichment, what was learned and index size.

    \b
    Example:
      recall-kit stats --root ~/memories
    """
    paths = resolve_roots(roots).paths
    try:
        indexed = open_indexed(paths)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
    docs = sorted(indexed.snapshot.docs.values(), key=lambda d: (d.mtime, d.ref))
    payload = _stats(docs, len(indexed.snapshot.errors), indexed.cache_file, paths)
    payload["doctor"] = doctor_stats(paths)
    if as_json:
        echo_json(payload)
        return
    rows = [f"{payload['memories']} memories, {payload['skipped']} skipped, {payload['bytes']} bytes"]
    rows.append("by type:  " + ", ".join(f"{clean(k)} {v}" for k, v in payload["by_type"].items()))
    rows.append("by scope: " + ", ".join(f"{clean(k)} {v}" for k, v in payload["by_scope"].items()))
    if docs:
        rows.append(f"size: mean {payload['mean_bytes']} bytes, largest {clean(payload['largest']['ref'])} "
                    f"({payload['largest']['bytes']} bytes)")
        for which in ("oldest", "newest"):
            entry = payload[which]
            rows.append(f"{which}: {clean(entry['ref'])} ({entry['modified']})")
    enrichment = payload["enrichment"]
    rows.append("enrichment: n/a (no enrichment sidecar)" if enrichment is None
                else f"enrichment: {enrichment['enriched']}/{payload['memories']} memories")
    learned = payload["learned"]
    rows.append(f"learned: {learned['memories']}/{payload['memories']} memories, {learned['keys']} keys, "
                f"{learned['suppressors']} suppressors")
    index = payload["index"]
    rows.append(f"index cache: {index['bytes']} bytes at {clean(index['path'])}" if index["path"]
                else "index cache: none")
    rows.append(clean(doctor_line(payload["doctor"])))
    echo_rows(rows)


def _stats(docs: list[MemoryDoc], skipped: int, cache_file: Path | None, roots: tuple[str, ...]) -> dict[str, Any]:
    sizes = [d.size for d in docs]
    largest = max(docs, key=lambda d: (d.size, d.ref), default=None)
    return {
        "memories": len(docs),
        "skipped": skipped,
        "bytes": sum(sizes),
        "mean_bytes": round(sum(sizes) / len(sizes)) if sizes else 0,
        "by_type": dict(sorted(Counter(d.type for d in docs).items())),
        "by_scope": dict(sorted(Counter(d.scope for d in docs).items())),
        "largest": None if largest is None else {"ref": largest.ref, "bytes": largest.size},
        "oldest": _dated(docs[0]) if docs else None,
        "newest": _dated(docs[-1]) if docs else None,
        "enrichment": _enrichment(docs, roots),
        "learned": _learned(docs),
        "index": {
            "path": str(cache_file) if cache_file and cache_file.is_file() else None,
            "bytes": cache_file.stat().st_size if cache_file and cache_file.is_file() else 0,
        },
    }


def _dated(doc: MemoryDoc) -> dict[str, Any]:
    return {"ref": doc.ref, "modified": time.strftime("%Y-%m-%d %H:%M", time.localtime(doc.mtime))}


def _enrichment(docs: list[MemoryDoc], roots: tuple[str, ...]) -> dict[str, int] | None:
    """How many memories carry fresh enrichment (the store checked each entry's hash); None when no
    root has a sidecar."""
    if not any(MemoryRoot(root).has_sidecar() for root in roots):
        return None
    return {"enriched": sum(d.enrichment is not None for d in docs)}


def _learned(docs: list[MemoryDoc]) -> dict[str, int]:
    """How many memories learned keys or suppressors from the model's picks, and how many of each."""
    learned = [d.learned for d in docs if d.learned is not None]
    return {
        "memories": len(learned),
        "keys": sum(len(item.keys) for item in learned),
        "suppressors": sum(len(item.suppressors) for item in learned),
    }
