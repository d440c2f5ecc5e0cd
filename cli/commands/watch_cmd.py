"""`recall-kit watch`: one line per new snapshot until Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
from types import FrameType

import click

from memory_store import MemoryStore, Snapshot
from memory_store import MemoryStoreError
from recall_kit_cli._format import InputError
from recall_kit_cli.commands.list_cmd import error_json
import click

_POLL_S = 0.5  # how often the main thread re-checks for a stop signal while idle


class _Stop(Exception):
    """Raised by the signal handler to leave the print loop."""


@click.command("watch")
@click.option("--root", "roots", multiple=True, required=True, help="A memory folder (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--debounce-ms", type=float, default=None, help="Debounce window for file events.")
def watch(roots: tuple[str, ...], as_json: bool, debounce_ms: float | None) -> None:
    """Watch the memory roots and print one line per new snapshot."""
    options = {} if debounce_ms is None else {"debounce_ms": debounce_ms}
    try:
        store = MemoryStore.open(*roots, watch=True, **options)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
    snapshots: queue.SimpleQueue[Snapshot] = queue.SimpleQueue()
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    unsubscribe = store.subscribe(snapshots.put)
    try:
        shown = store.snapshot()  # after subscribing, so no version falls between the two
        _emit(shown, as_json)
        while True:
            try:
                snapshot = snapshots.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if snapshot.version > shown.version:
                shown = snapshot
                _emit(snapshot, as_json)
    except _Stop:
        pass
    except BrokenPipeError:  # the reader went away (e.g. `| head`); that is a normal end
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        unsubscribe()
        store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


def _emit(snapshot: Snapshot, as_json: bool) -> None:
    changed, removed = sorted(snapshot.changed), sorted(snapshot.removed)
    if as_json:
        line = json.dumps(
            {
                "version": snapshot.version,
                "docs": len(snapshot.docs),
                "errors": [error_json(err) for err in snapshot.errors],
                "changed": changed,
                "removed": removed,
            },
            ensure_ascii=False,
        )
    else:
        parts = [f"v{snapshot.version}: {len(snapshot.docs)} memories, {len(snapshot.errors)} skipped"]
        if changed:
            parts.append(f"changed {', '.join(changed)}")
        if removed:
            parts.append(f"removed {', '.join(removed)}")
        line = "; ".join(parts)
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
