"""open_recaller: one entry point opens the store, the index, the model clients and the Recaller,
and closing the Recaller closes exactly what it opened."""

from __future__ import annotations

import asyncio
import re
import threading
from pathlib import Path

import pytest

from memory_store import MemoryStore, MemoryStoreError, Snapshot
from recall_kit import (
    ConfigError,
    FastHeuristic,
    ModelSelector,
    SelectorConfig,
    UsageError,
    open_recaller,
)
from recall_kit.testing import Reply
from session_support import DEPLOY, FAST_DB_QUERY, run


def watcher_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memory-store-debounce"]


def test_a_watched_recaller_closes_its_store_and_index(memory_root: Path, tmp_path: Path) -> None:
    before = len(watcher_threads())
    recaller = open_recaller([memory_root], cache_dir=tmp_path / "cache")
    store = recaller.store
    assert isinstance(store, MemoryStore) and store.watching and isinstance(recaller.heuristic, FastHeuristic)
    assert len(watcher_threads()) == before + 1
    recaller.close()
    assert not store.watching and len(watcher_threads()) == before
    assert recaller.closed


def test_a_one_shot_recaller_recalls_from_one_snapshot(memory_root: Path, tmp_path: Path) -> None:
    before = len(watcher_threads())
    with open_recaller([memory_root], watch=False, cache_dir=tmp_path / "cache") as recaller:
        assert isinstance(recaller.store, Snapshot) and recaller.cache_file is not None
        assert len(watcher_threads()) == before  # nothing watches a one-shot snapshot

    with open_recaller([memory_root], watch=False, cache_dir=tmp_path / "cache") as again:
        assert again.reused_from_cache == len(again.snapshot().docs) > 0


def test_the_selector_made_from_a_config_is_closed_on_the_loop_that_used_it(memory_root: Path, chat_server) -> None:
    server = chat_server(default=Reply.select(DEPLOY))
    config = SelectorConfig(base_url=server.base_url, model="scripted")

    async def turn() -> None:
        async with open_recaller([memory_root], watch=False, use_cache=False, selector=config) as recaller:
            session = recaller.session()
            session.begin(FAST_DB_QUERY)
            await session.consume("initial")
            await asyncio.to_thread(server.wait_for_requests, 1)
            await session.close()

    run(turn())
    (request,) = server.requests
    assert request.connection_closed.wait(5), "the Recaller left its selector's connection open"


def test_a_selector_the_caller_made_stays_the_callers(memory_root: Path, chat_server) -> None:
    server = chat_server(default=Reply.select(DEPLOY))
    selector = ModelSelector(server.base_url, "scripted")

    async def turn() -> None:
        async with open_recaller([memory_root], watch=False, use_cache=False, selector=selector) as recaller:
            await recaller.selector.select("warm up", recaller.snapshot_docs())
        (request,) = server.requests
        assert not request.connection_closed.is_set()  # still the caller's to close
        await selector.aclose()
        assert await asyncio.to_thread(request.connection_closed.wait, 5)

    run(turn())


def test_an_unusable_selector_setting_leaves_nothing_open(memory_root: Path, tmp_path: Path) -> None:
    before = len(watcher_threads())
    with pytest.raises(ConfigError):
        open_recaller([memory_root], cache_dir=tmp_path, selector=SelectorConfig(base_url="http://x/v1", model="m", timeout=-1))
    assert len(watcher_threads()) == before


def test_background_enrichment_needs_a_watched_store(memory_root: Path) -> None:
    config = SelectorConfig(base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(UsageError, match="open the roots with watch=True"):
        open_recaller([memory_root], watch=False, use_cache=False, enrich=config)


@pytest.mark.parametrize(("setting", "value", "words"), [
    ("initial_wait_ms", float("nan"), "initial_wait_ms must be from 0 to 10,000 milliseconds, got nan"),
    ("initial_wait_ms", -1, "got -1"), ("initial_wait_ms", 1e9, "got 1000000000.0"), ("initial_wait_ms", "100", "got '100'"),
    ("body_budget", -5, "body_budget must be a whole number of characters, 0 or more, got -5"),
    ("body_budget", 2.5, "got 2.5"), ("body_budget", True, "got True"),
])
def test_a_delivery_setting_out_of_bounds_is_refused_before_anything_opens(
    memory_root: Path, tmp_path: Path, setting: str, value: object, words: str
) -> None:
    before = len(watcher_threads())
    with pytest.raises(UsageError, match=re.escape(words)):
        open_recaller([memory_root], cache_dir=tmp_path, **{setting: value})  # type: ignore[arg-type]
    assert len(watcher_threads()) == before
    with MemoryStore.open(memory_root, watch=False) as store, pytest.raises(UsageError, match=re.escape(words)):
        from recall_kit import Recaller

        Recaller(store, **{setting: value})  # type: ignore[arg-type]


def test_an_abort_that_is_no_event_and_a_root_that_is_no_path_are_named(memory_root: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"roots must be a list of folder paths; roots\[1\] is a tuple"):
        open_recaller([memory_root, ("notes", memory_root)], cache_dir=tmp_path)  # type: ignore[list-item]
    with open_recaller([memory_root], watch=False, use_cache=False) as recaller:
        session = recaller.sync_session()
        with pytest.raises(UsageError, match="abort as an asyncio.Event or a threading.Event, got str"):
            session.begin("how do we deploy?", abort="stop")  # type: ignore[arg-type]
        session.close()

def test_a_missing_root_is_a_store_error_and_leaves_nothing_open(tmp_path: Path) -> None:
    before = len(watcher_threads())
    with pytest.raises(MemoryStoreError, match="does not exist"):
        open_recaller([tmp_path / "nowhere"], cache_dir=tmp_path)
    assert len(watcher_threads()) == before


@pytest.mark.parametrize(("setting", "value", "words"), [
    ("selector", "gpt-4o", "selector must be a SelectorConfig, a client with select() or None, got str"),
    ("enrich", "gpt-4o", "enrich must be a SelectorConfig, a client with enrich() or None, got str"),
    ("telemetry", 123, "telemetry must be a Telemetry, a callable or None, got int"),
    ("cache_dir", 123, "cache_dir must be a folder path or None, got int"),
])
def test_a_client_or_sink_of_the_wrong_kind_is_refused_before_anything_opens(
    memory_root: Path, setting: str, value: object, words: str
) -> None:
    # a model's name given for its config was taken, then logged a traceback at every prompt
    before = len(watcher_threads())
    with pytest.raises(UsageError, match=re.escape(words)):
        open_recaller([memory_root], **{setting: value})  # type: ignore[arg-type]
    assert len(watcher_threads()) == before


@pytest.mark.parametrize(("options", "words"), [
    ({"max_bytes": -1}, "max_bytes must be a whole number of bytes, 1 or more; got -1"),
    ({"max_bytes": "x"}, "got 'x'"),
    ({"max_entries": "5"}, "max_entries must be None or a whole number, 1 or more; got '5'"),
    ({"reuse": 5}, "reuse must be None or a callable, got int"),
    ({"enrichment": {"mem": 5}}, "enrichment must be True, False or a mapping"),
])
def test_store_options_of_the_wrong_kind_are_one_line(memory_root: Path, options: dict, words: str) -> None:
    # max_bytes=-1 loaded no memory at all, without a word; the others were tracebacks from deep inside
    with pytest.raises(MemoryStoreError, match=re.escape(words)):
        MemoryStore.open(memory_root, watch=False, **options)
    for root in (123, (5, memory_root), ("a", memory_root, "x")):
        with pytest.raises(MemoryStoreError, match="root 1 must be a path or a"):
            MemoryStore.open(root, watch=False)  # type: ignore[arg-type]


def test_record_enrichment_refuses_what_is_no_valid_entry_in_one_line(memory_root: Path) -> None:
    from memory_store import EnrichmentEntry

    with MemoryStore.open(memory_root, watch=False) as store:
        label = store.roots[0][0]
        with pytest.raises(MemoryStoreError, match="expected an EnrichmentEntry, got str"):
            store.record_enrichment(label, ["x"])  # type: ignore[list-item]
        with pytest.raises(MemoryStoreError, match="invalid enrichment entry for '/etc/x.md'"):
            store.record_enrichment(label, [EnrichmentEntry("/etc/x.md", "0" * 64)])  # was dropped by the prune, unsaid
        with pytest.raises(MemoryStoreError, match="subscribe takes a callable, got int"):
            store.subscribe(5)  # type: ignore[arg-type]


def test_begin_outside_an_event_loop_is_one_usage_error_and_starts_nothing(memory_root: Path) -> None:
    # it raised "no running event loop" after the prompt's handle was set, with a coroutine never awaited
    with open_recaller([memory_root], watch=False, use_cache=False) as recaller:
        session = recaller.session()
        with pytest.raises(UsageError, match=r"begin\(\) runs on an event loop: .*sync_session\(\)"):
            session.begin("how do we deploy?")
        assert not session.pending
