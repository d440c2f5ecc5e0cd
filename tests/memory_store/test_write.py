"""atomic_write: readers see the old content or the new, never a mix."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memory_store import atomic_write
from recall_kit import MemoryStoreError


def test_concurrent_reader_never_sees_a_half_written_file(tmp_path: Path) -> None:
    target = tmp_path / "big.md"
    versions = [f"---\nversion: {i}\n---\n" + (chr(ord("a") + i) * 100_000) for i in range(4)]
    atomic_write(target, versions[0])
    allowed = set(versions)
    seen: set[str] = set()
    bad: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            text = target.read_text(encoding="utf-8")
            if text not in allowed:
                bad.append(len(text))
            seen.add(text[:16])

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for n in range(80):
            atomic_write(target, versions[n % 4])
    finally:
        stop.set()
        thread.join()
    assert not bad
    assert len(seen) > 1  # the reader really raced the writer


def test_atomic_write_keeps_mode_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "note.md"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    written = atomic_write(target, "new \u2713")
    assert written == target
    assert target.read_text(encoding="utf-8") == "new \u2713"
    assert (target.stat().st_mode & 0o777) == 0o640
    assert os.listdir(tmp_path) == ["note.md"]


def test_atomic_write_into_missing_folder_raises_store_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="cannot write .*note.md: No such file or directory"):
        atomic_write(tmp_path / "missing" / "note.md", "x")
