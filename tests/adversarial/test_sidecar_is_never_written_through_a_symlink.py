"""A root's `.recall-kit` symlinked out of it: the store reports it, nothing reads or writes through
it, and no model is asked for terms that could not be kept (`enrich` twice: zero calls both times)."""

from __future__ import annotations

import json
import queue
import subprocess
from pathlib import Path

import pytest
from enrich_support import answer, memory_text, write_memories

from memory_store import MemoryStore, SIDECAR_PATH
from recall_kit import EnrichEvent, Enricher, Event, Recaller
from recall_kit.testing import ScriptedChatServer

from cli_support import run_recall_kit


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def enrich(server: ScriptedChatServer, cwd: Path, *roots: Path, json_out: bool = False) -> subprocess.CompletedProcess[str]:
    args = [arg for root in roots for arg in ("--root", str(root))]
    return run_recall_kit(
        "enrich", *args, "--base-url", server.base_url, "--model", "scripted", *(["--json"] if json_out else []), cwd=cwd
    )


@pytest.fixture
def linked(tmp_path: Path) -> tuple[Path, Path]:
    """A root of three memories whose .recall-kit is a symlink to a folder outside it."""
    root = write_memories(tmp_path / "mem")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "note.txt").write_text("the target's own file\n")
    (root / ".recall-kit").symlink_to(outside, target_is_directory=True)
    return root, outside


def test_the_snapshot_reports_a_symlinked_sidecar_folder(linked: tuple[Path, Path]) -> None:
    root, outside = linked
    (outside / "enrichment.jsonl").write_text("{}\n")  # what a read through the link would find
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    assert [(e.ref, e.reason) for e in snapshot.errors] == [
        ("mem/.recall-kit", "the sidecar folder is a symlink; enrichment is never read or written through one")
    ]
    assert all(doc.enrichment is None for doc in snapshot.docs.values())


def test_enrich_calls_no_model_for_a_root_whose_sidecar_it_cannot_write_and_says_so(
    linked: tuple[Path, Path], server: ScriptedChatServer
) -> None:
    root, outside = linked
    server.default = answer()
    before = tree(outside)
    for _ in range(2):  # the second run is where the 54 calls for 27 memories came back
        result = enrich(server, root.parent, root)
        assert len(server.requests) == 0
        assert result.returncode == 2 and result.stdout == ""
        (line,) = result.stderr.splitlines()
        assert line.startswith("recall-kit: mem/.recall-kit: the sidecar folder is a symlink")
        assert "no model called for the 3 memories of mem" in line
    assert tree(outside) == before and not (root / ".recall-kit" / "enrichment.jsonl").exists()


def test_enrich_still_enriches_the_roots_it_can_write(
    linked: tuple[Path, Path], tmp_path: Path, server: ScriptedChatServer
) -> None:
    root, outside = linked
    good = write_memories(tmp_path / "good", {"tea.md": ("Tea", "green tea at four", "Sencha.")})
    server.default = answer()
    result = enrich(server, tmp_path, root, good, json_out=True)
    assert result.returncode == 1, result.stderr  # some memories were not enriched
    report = json.loads(result.stdout)
    assert [e["ref"] for e in report["enriched"]] == ["good/tea.md"]
    assert [(r["root"], r["memories"]) for r in report["refused"]] == [("mem", 3)]
    assert len(server.requests) == 1 and (good / SIDECAR_PATH).is_file()
    assert not (outside / "enrichment.jsonl").exists()


def test_background_enrichment_asks_nothing_for_a_root_whose_sidecar_it_cannot_write(
    linked: tuple[Path, Path], tmp_path: Path, server: ScriptedChatServer
) -> None:
    root, outside = linked
    good = write_memories(tmp_path / "good", {"a.md": ("A", "first memory", "Body a.")})
    server.default = answer()
    events: queue.Queue[Event] = queue.Queue()
    with MemoryStore.open(("good", good), ("mem", root), debounce_ms=20) as store:
        with Recaller(store, telemetry=events.put, enrich=Enricher(server.base_url, "m", timeout=5),
                      enrich_calls_per_minute=6000):
            first = next_enriched(events)
            # written after the refused root's memories were listed: it comes after them in every snapshot
            (good / "b.md").write_text(memory_text("B", "second memory", "Body b."), encoding="utf-8")
            second = next_enriched(events)
    assert (first.ref, second.ref) == ("good/a.md", "good/b.md")
    assert [r.user_message.count("Body b.") for r in server.requests] == [0, 1]  # no call for mem's three
    assert not (outside / "enrichment.jsonl").exists()


def next_enriched(events: queue.Queue[Event]) -> EnrichEvent:
    while True:
        event = events.get(timeout=10)
        if isinstance(event, EnrichEvent):
            assert event.outcome == "enriched", event.reason
            return event
