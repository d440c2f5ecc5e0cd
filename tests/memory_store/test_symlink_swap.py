"""Symlink swaps, faults while watching: no file outside a root is ever read, and the store settles to a fresh scan."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_helpers import fingerprint, memory, wait_until, write
from store_helpers import alias_bomb

from memory_store import MemoryStore, Snapshot

Open = Callable[..., MemoryStore]
SECRET = "Outside secret"


def fresh(*roots: Path) -> Snapshot:
    with MemoryStore.open(*roots, watch=False, allow_missing=True) as store:
        return store.snapshot()


def leaked(snapshot: Snapshot) -> list[str]:
    return [ref for ref, doc in snapshot.docs.items() if doc.name == SECRET]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    write(tmp_path / "outside" / "secret.md", memory(name=SECRET))
    write(tmp_path / "outside" / "deeper" / "secret-2.md", memory(name=SECRET))
    return tmp_path / "outside"


@pytest.mark.parametrize("how", ["mkdir-rmdir-symlink", "rename-away-then-symlink"])
def test_folder_swapped_for_a_symlink_inside_the_debounce_is_never_read(
    how: str, root: Path, tmp_path: Path, outside: Path, open_store: Open, recwarn: pytest.WarningsRecorder
) -> None:
    store = open_store(root, debounce_ms=50)
    seen: list[str] = []
    store.subscribe(lambda snapshot: seen.extend(leaked(snapshot)))
    for i in range(6):
        sub = root / f"sub{i}"
        sub.mkdir()
        if how == "mkdir-rmdir-symlink":
            sub.rmdir()
        else:
            write(sub / "inner.md", memory())
            sub.rename(tmp_path / f"away{i}")
        sub.symlink_to(outside, target_is_directory=True)
        write(root / f"done{i}.md", memory())
        wait_until(store, lambda s, i=i: f"mem/done{i}.md" in s.docs and any(e.path == f"sub{i}" for e in s.errors))
    assert seen == []
    assert fingerprint(store.snapshot()) == fingerprint(fresh(root))
    assert [str(w.message)[:80] for w in recwarn] == []  # one folder reached twice is watched once


_NAMES = ["d1", "d2", "d1/d3"]
_ops = st.lists(
    st.tuples(
        st.sampled_from(["mkdir", "remove", "link-out", "link-in", "rename-away", "file-link"]), st.sampled_from(_NAMES)
    ),
    min_size=1,
    max_size=10,
)


def _apply(op: str, name: str, root: Path, outside: Path, spare: Path, n: int) -> None:
    path = root / name
    if not path.parent.is_dir() or path.parent.is_symlink():
        return
    if op != "mkdir" and (path.is_symlink() or path.exists()):
        if op == "rename-away":
            os.rename(path, spare / f"away{n}")
            return
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    if op == "mkdir" and not os.path.lexists(path):
        path.mkdir()
        write(path / "m.md", memory(name=f"in {name}"))
    elif op == "link-out":
        path.symlink_to(outside, target_is_directory=True)
    elif op == "link-in":
        write(root / "real" / "r.md", memory(name="real"))
        path.symlink_to(root / "real", target_is_directory=True)
    elif op == "file-link":
        (path.parent / f"{path.name}.md").unlink(missing_ok=True)
        (path.parent / f"{path.name}.md").symlink_to(outside / "secret.md")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops)
def test_no_scan_or_watch_over_symlink_swaps_reads_outside_the_root(outside: Path, ops: list[tuple[str, str]]) -> None:
    base = Path(tempfile.mkdtemp(prefix="recall-kit-swap-"))
    root, spare = base / "mem", base / "spare"
    root.mkdir()
    spare.mkdir()
    try:
        with MemoryStore.open(root, debounce_ms=20) as store:
            seen: list[str] = []
            store.subscribe(lambda snapshot: seen.extend(leaked(snapshot)))
            for n, (op, name) in enumerate(ops):
                _apply(op, name, root, outside, spare, n)
            write(root / "sentinel.md", memory())
            wait_until(store, lambda s: "mem/sentinel.md" in s.docs and fingerprint(s) == fingerprint(fresh(root)))
            assert seen == [], f"a watched snapshot held a file from outside the root: {seen}"
            assert leaked(store.snapshot()) == []
        assert leaked(fresh(root)) == [], "a fresh scan read a file from outside the root"
        for doc in fresh(root).docs.values():
            assert os.path.realpath(doc.abspath).startswith(os.path.realpath(root) + os.sep), doc.ref
    finally:
        shutil.rmtree(base)


def test_bad_files_written_while_watching_are_reported_and_good_ones_stay(root: Path, open_store: Open) -> None:
    write(root / "good.md", memory(name="Good"))
    store = open_store(root)
    write(root / "bomb.md", alias_bomb("extra"))
    write(root / "bigint.md", memory(type="9" * 5000))
    write(root / "date.md", memory(extra="created: 2024-02-30\n"))
    snapshot = wait_until(
        store, lambda s: {e.path for e in s.errors} == {"bomb.md", "bigint.md"} and "mem/date.md" in s.docs
    )
    assert "mem/good.md" in snapshot.docs
    assert fingerprint(snapshot) == fingerprint(fresh(root))


def test_root_replaced_while_holding_bad_files_serves_no_deleted_document(tmp_path: Path, open_store: Open) -> None:
    root = tmp_path / "mem"
    write(root / "old.md", memory(name="Old"))
    write(root / "bad.md", memory(extra="created: 2024-02-30\nn: " + "1" * 5000 + "\n"))
    write(root / "bomb.md", alias_bomb("type"))
    store = open_store(root)
    replacement = tmp_path / "next"
    write(replacement / "new.md", memory(name="New"))
    write(replacement / "bomb.md", alias_bomb("extra"))
    root.rename(tmp_path / "gone")
    replacement.rename(root)
    snapshot = wait_until(store, lambda s: "mem/new.md" in s.docs)
    snapshot = wait_until(store, lambda s: fingerprint(s) == fingerprint(fresh(root)))
    assert set(snapshot.docs) == {"mem/new.md"}
    assert [e.path for e in snapshot.errors] == ["bomb.md"]
