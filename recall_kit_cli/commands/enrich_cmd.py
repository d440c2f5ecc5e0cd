"""`recall-kit enrich`: model-written search terms for each memory, recorded in the root's sidecar."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any, Callable, Sequence

import click

from memory_store import MemoryDoc, MemoryStore, MemoryStoreError, Snapshot
from recall_kit import Enricher, EnrichmentResult, SelectorConfig, docs_to_enrich, keyword_vocabulary
from recall_kit_cli._config_file import model_off_reason, resolve_roots, root_option, selector_config
from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, clean_ref, echo, echo_json

EXIT_SOME_FAILED = 1
EXIT_INTERRUPTED = 130  # the shell's convention for Ctrl-C
FLUSH_INTERVAL_S = 1.0  # a model call takes about this long or more: in practice every memory is written at once


@click.command("enrich", cls=HelpCommand)
@root_option
@click.option("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1.")
@click.option("--model", help="Model name at that endpoint.")
@click.option("--model-timeout", type=float, help="Seconds one memory's model call may take (default 30).")
@click.option("--all", "everything", is_flag=True,
              help="Enrich every memory, not only those without a fresh entry or terms of their own.")
@click.option("--concurrency", default=1, show_default=True, help="Model calls in flight at once.")
@click.option("--dry-run", is_flag=True, help="List what would be enriched; call no model.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def enrich(
    roots: tuple[str, ...],
    base_url: str | None,
    model: str | None,
    model_timeout: float | None,
    everything: bool,
    concurrency: int,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Write model-made search terms to each root's .recall-kit/enrichment.jsonl (files never change).

    Example: recall-kit enrich --base-url http://127.0.0.1:8080/v1 --model qwen
    """
    if concurrency < 1:
        raise InputError(f"--concurrency must be at least 1, got {concurrency}")
    config = None if dry_run else _config(base_url, model, model_timeout)
    try:
        store = MemoryStore.open(*resolve_roots(roots).paths, watch=False)
    except MemoryStoreError as exc:
        raise InputError(str(exc)) from None
    with store:
        _run(store, config, everything, concurrency, as_json)


def _run(store: MemoryStore, config: SelectorConfig | None, everything: bool, concurrency: int, as_json: bool) -> None:
    """Enrich what needs it (or list it, without a config) and record the results through ``store``."""
    snapshot = store.snapshot()
    todo = docs_to_enrich(list(snapshot.docs.values()), everything=everything)
    fresh = sorted(d.ref for d in snapshot.docs.values() if d.enrichment is not None and not everything)
    chosen = {doc.ref for doc in todo}
    own = sorted(d.ref for d in snapshot.docs.values() if d.enrichment is None and d.ref not in chosen)  # their writer's terms
    refused = _refused(store, todo)
    todo = [doc for doc in todo if doc.scope not in refused]  # no model call for terms that could not be kept
    if config is None:
        _show_refused(refused, as_json)
        _show_dry_run(todo, fresh, own, snapshot, refused, as_json)
        return
    if refused and not todo:
        raise InputError("; ".join(line for line, _ in refused.values()))
    _show_refused(refused, as_json)
    sidecars = _Sidecars(store)
    results: list[EnrichmentResult] = []
    interrupted = False
    with _progress(len(todo)) as advance:

        def finished(result: EnrichmentResult) -> None:
            results.append(result)
            sidecars.add(result)
            advance()

        try:
            vocabulary = keyword_vocabulary(snapshot)  # each request shows it: related memories share terms
            asyncio.run(_enrich_all(Enricher.from_config(config), todo, vocabulary, concurrency, finished))
        except KeyboardInterrupt:
            interrupted = True
        finally:
            results = sidecars.flush(results)
    _show_summary(results, fresh, own, snapshot, config, refused, interrupted, as_json)
    if interrupted:
        sys.exit(EXIT_INTERRUPTED)
    if refused or any(r.outcome == "failed" for r in results):
        sys.exit(EXIT_SOME_FAILED)


def _refused(store: MemoryStore, todo: Sequence[MemoryDoc]) -> dict[str, tuple[str, int]]:
    """Root label -> (one line on why its sidecar cannot be written, how many memories it leaves
    unenriched), for each root with memories to enrich; checked before any model call."""
    waiting: dict[str, int] = {}
    for doc in todo:
        waiting[doc.scope] = waiting.get(doc.scope, 0) + 1
    refused = {}
    for label, count in waiting.items():
        reason = store.root(label).sidecar_refusal()
        if reason is not None:
            refused[label] = (f"{reason} (no model called for the {count} memories of {label})", count)
    return refused


def _show_refused(refused: dict[str, tuple[str, int]], as_json: bool) -> None:
    if not as_json:
        for line, _ in refused.values():
            echo(f"recall-kit: {clean(line)}", err=True)


def _refused_json(refused: dict[str, tuple[str, int]]) -> list[dict[str, object]]:
    return [{"root": label, "reason": line, "memories": count} for label, (line, count) in refused.items()]


def _config(base_url: str | None, model: str | None, timeout: float | None) -> SelectorConfig:
    config = selector_config(base_url=base_url, model=model, timeout=timeout)
    off = model_off_reason(config)
    if off:
        raise InputError(off)
    return config


async def _enrich_all(
    enricher: Enricher, docs: Sequence[MemoryDoc], vocabulary: Sequence[str], concurrency: int,
    finished: Callable[[EnrichmentResult], None],
) -> None:
    """Enrich ``docs`` with at most ``concurrency`` calls in flight; ``finished`` runs on the loop
    between awaits, so a cancellation (Ctrl-C) never interrupts a sidecar write."""
    queue = list(reversed(docs))

    async def worker() -> None:
        while queue:
            finished(await enricher.enrich(queue.pop(), vocabulary))

    async with enricher:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(docs))):
                group.create_task(worker())


class _Sidecars:
    """Finished entries on their way to each root's sidecar, recorded through the store: written at
    once, then at most once a second (a large store would otherwise rewrite its sidecar for every
    memory), and at the end."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store
        self._scope = {doc.ref: doc.scope for doc in store.snapshot().docs.values()}
        self._pending: dict[str, list[EnrichmentResult]] = {}
        self._unwritten: dict[str, EnrichmentResult] = {}
        self._flushed_at = float("-inf")

    def add(self, result: EnrichmentResult) -> None:
        if result.entry is None:
            return
        self._pending.setdefault(self._scope[result.ref], []).append(result)
        if time.monotonic() - self._flushed_at >= FLUSH_INTERVAL_S:
            self._write()

    def flush(self, results: list[EnrichmentResult]) -> list[EnrichmentResult]:
        """Write what is pending; ``results`` with those whose entry could not be written as failures."""
        self._write()
        return [self._unwritten.get(r.ref, r) for r in results]

    def _write(self) -> None:
        pending, self._pending = self._pending, {}
        for label, batch in pending.items():
            entries = [r.entry for r in batch if r.entry is not None]
            try:
                self._store.record_enrichment(label, entries)
            except MemoryStoreError as exc:
                self._unwritten.update((r.ref, _failed(r, f"cannot write the sidecar: {exc}")) for r in batch)
        self._flushed_at = time.monotonic()


def _failed(result: EnrichmentResult, reason: str) -> EnrichmentResult:
    return EnrichmentResult(
        ref=result.ref, path=result.path, sha256=result.sha256, outcome="failed", reason=reason,
        latency_ms=result.latency_ms, response_mode=result.response_mode, model=result.model,
    )


class _progress:
    """A progress bar on stderr when stderr is a terminal; otherwise nothing."""

    def __init__(self, length: int) -> None:
        self._bar: Any = None
        if length and sys.stderr.isatty():
            self._bar = click.progressbar(length=length, label="enriching", file=sys.stderr)

    def __enter__(self) -> Callable[[], None]:
        if self._bar is None:
            return lambda: None
        bar = self._bar.__enter__()
        return lambda: bar.update(1)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)


def _load_errors(snapshot: Snapshot) -> list[str]:
    return [f"{e.ref}: {e.reason}" for e in snapshot.errors]


def _show_dry_run(
    todo: Sequence[MemoryDoc], fresh: Sequence[str], own: Sequence[str], snapshot: Snapshot,
    refused: dict[str, tuple[str, int]], as_json: bool,
) -> None:
    if as_json:
        payload = {"dry_run": True, "would_enrich": [d.ref for d in todo], "fresh": list(fresh), "own_terms": list(own),
                   "refused": _refused_json(refused), "load_errors": _load_errors(snapshot)}
        echo_json(payload)
        return
    echo(*(f"would enrich  {clean_ref(doc.ref)}" for doc in todo))
    echo(f"dry run: {len(todo)} to enrich, {len(fresh)} fresh{_own(own)}; no model called")


def _show_summary(
    results: Sequence[EnrichmentResult],
    fresh: Sequence[str],
    own: Sequence[str],
    snapshot: Snapshot,
    config: SelectorConfig,
    refused: dict[str, tuple[str, int]],
    interrupted: bool,
    as_json: bool,
) -> None:
    enriched = sorted((r for r in results if r.outcome == "enriched"), key=lambda r: r.ref)
    failed = sorted((r for r in results if r.outcome == "failed"), key=lambda r: r.ref)
    if as_json:
        payload = {
            "model": config.model,
            "base_url": config.base_url,
            "enriched": [
                {"ref": r.ref, "keywords": list(r.keywords), "usage_scenarios": list(r.usage_scenarios),
                 "dropped": r.dropped, "response_mode": r.response_mode, "latency_ms": round(r.latency_ms, 1)}
                for r in enriched
            ],
            "fresh": list(fresh),
            "own_terms": list(own),
            "failed": [{"ref": r.ref, "reason": r.reason, "latency_ms": round(r.latency_ms, 1)} for r in failed],
            "refused": _refused_json(refused),
            "interrupted": interrupted,
            "load_errors": _load_errors(snapshot),
        }
        echo_json(payload)
        return
    echo(*(f"enriched  {clean_ref(r.ref)}: {len(r.keywords)} keywords, {len(r.usage_scenarios)} usage scenarios" for r in enriched))
    echo(*(f"failed    {clean_ref(r.ref)}: {clean(r.reason)}" for r in failed))
    note = " (interrupted: finished entries were kept)" if interrupted else ""
    echo(f"enriched {len(enriched)}, fresh {len(fresh)}, failed {len(failed)}{_own(own)}{note}")


def _own(own: Sequence[str]) -> str:
    return f", {len(own)} with terms of their own (keywords and usage_scenarios)" if own else ""
