"""`recall-kit watch`: one summary line per new snapshot until Ctrl-C or SIGTERM."""

from __future__ import annotations

import queue
import signal
from types import FrameType
from typing import Sequence

import click

from memory_store import DEFAULT_DEBOUNCE_MS, MemoryStore, MemoryStoreError, Snapshot, debounce_refusal
from recall_kit_cli._format import InputError, error_line
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, echo, echo_json, quiet_broken_pipe
from recall_kit_cli._config_file import resolve_roots, root_option
from recall_kit_cli.commands.list_cmd import error_json

_POLL_S = 0.5  # how often the main thread re-checks for a stop signal while idle
REFS_SHOWN = 5  # changed/removed refs named per line; the rest are counted
SKIPPED_SHOWN = 10  # skipped files named per snapshot; the rest are counted


class _Stop(Exception):
    """Raised by the signal handler to leave the print loop."""


@click.command("watch", cls=HelpCommand)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--debounce-ms", type=float, default=None, help="Debounce window for file events.")
def watch(roots: tuple[str, ...], as_json: bool, debounce_ms: float | None) -> None:
    """Watch the memory roots and print one line per new snapshot (Ctrl-C or SIGTERM ends it).

    Newly skipped files are named below with their reasons.

    \b
    Example:
      recall-kit watch --root ~/memories
    """
    debounce = DEFAULT_DEBOUNCE_MS if debounce_ms is None else debounce_ms
    if (refusal := debounce_refusal(debounce)) is not None:
        raise InputError(f"--debounce-ms: {refusal}")
    try:
        store = MemoryStore.open(*resolve_roots(roots).paths, watch=True, debounce_ms=debounce)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
    snapshots: queue.SimpleQueue[Snapshot] = queue.SimpleQueue()
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    unsubscribe = store.subscribe(snapshots.put)
    try:
        shown = store.snapshot()  # after subscribing, so no version falls between the two
        _emit(shown, None, store.roots, as_json)
        while True:
            try:
                snapshot = snapshots.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if snapshot.version > shown.version:
                _emit(snapshot, shown, store.roots, as_json)
                shown = snapshot
    except _Stop:
        pass
    except BrokenPipeError:  # the reader went away (e.g. `| head`); that is a normal end
        quiet_broken_pipe()
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        unsubscribe()
        store.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


def _named(refs: Sequence[str]) -> str:
    shown = ", ".join(clean(ref) for ref in refs[:REFS_SHOWN])
    return shown + (f" (+{len(refs) - REFS_SHOWN} more)" if len(refs) > REFS_SHOWN else "")


def _emit(
    snapshot: Snapshot, before: Snapshot | None, roots: tuple[tuple[str, str], ...], as_json: bool
) -> None:
    changed, removed = sorted(snapshot.changed), sorted(snapshot.removed)
    if as_json:
        echo_json({
            "version": snapshot.version,
            "docs": len(snapshot.docs),
            "errors": [error_json(err) for err in snapshot.errors],
            "changed": changed,
            "removed": removed,
        })
        return
    parts = [f"v{snapshot.version}: {len(snapshot.docs)} memories, {len(snapshot.errors)} skipped"]
    if before is None:  # the first line summarises: the roots, not every file
        parts[0] += " in " + ", ".join(f"{clean(label)} ({clean(path)})" for label, path in roots)
    else:
        if changed:
            parts.append(f"changed {_named(changed)}")
        if removed:
            parts.append(f"removed {_named(removed)}")
    known = set() if before is None else set(before.errors)
    new_errors = [err for err in snapshot.errors if err not in known]
    lines = ["; ".join(parts)]
    lines += [f"  skipped {error_line(err)}" for err in new_errors[:SKIPPED_SHOWN]]
    if len(new_errors) > SKIPPED_SHOWN:
        lines.append(f"  ... and {len(new_errors) - SKIPPED_SHOWN} more skipped (recall-kit validate names all)")
    echo(*lines)
