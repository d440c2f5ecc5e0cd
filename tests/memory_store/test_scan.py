"""One-shot scans: every bad file is skipped with a reason, the good ones load."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest
from store_helpers import memory, write

from memory_store import MemoryStore
from memory_store._scan import Candidate, Root, read_candidate
from recall_kit import MemoryStoreError


def scan(*roots: object, **options: object):
    with MemoryStore.open(*roots, watch=False, **options) as store:  # type: ignore[arg-type]
        return store.snapshot()


def reasons(snapshot) -> dict[str, str]:
    return {err.path: err.reason for err in snapshot.errors}


def test_good_files_load_with_scope_and_relative_path(root: Path) -> None:
    write(root / "a.md", memory(name="A"))
    write(root / "projects" / "atlas" / "db.md", memory(name="DB", type="project"))
    snapshot = scan(root)
    assert snapshot.version == 1
    assert set(snapshot.docs) == {"mem/a.md", "mem/projects/atlas/db.md"}
    doc = snapshot.docs["mem/projects/atlas/db.md"]
    assert (doc.scope, doc.path, doc.abspath) == ("mem", "projects/atlas/db.md", root / "projects/atlas/db.md")
    assert doc.mtime == os.stat(doc.abspath).st_mtime and doc.size == os.stat(doc.abspath).st_size
    assert snapshot.changed == frozenset(snapshot.docs) and not snapshot.errors
    assert list(snapshot.docs) == sorted(snapshot.docs)  # a stable order for a given tree


def test_one_bad_file_of_each_kind_never_hides_the_good_ones(root: Path) -> None:
    write(root / "good.md", memory())
    write(root / "nofront.md", "no frontmatter here\n")
    write(root / "malformed.md", "---\nname: [oops\n---\n")
    write(root / "unclosed.md", "---\nname: n\n")
    write(root / "kind.md", memory(type="diary"))
    write(root / "noname.md", "---\ndescription: d\ntype: user\n---\n")
    write(root / "nodesc.md", "---\nname: n\ntype: user\n---\n")
    (root / "latin1.md").write_bytes(memory(name="Caf\u00e9").encode("latin-1"))
    (root / "binary.md").write_bytes(b"---\nname: n\n\x00\x00\x00")
    snapshot = scan(root)
    assert set(snapshot.docs) == {"mem/good.md"}
    got = reasons(snapshot)
    assert got["nofront.md"].startswith("missing frontmatter")
    assert got["malformed.md"].startswith("malformed frontmatter")
    assert got["unclosed.md"].startswith("malformed frontmatter: no closing")
    assert got["kind.md"].startswith("unknown type 'diary'")
    assert got["noname.md"] == "missing 'name' in frontmatter"
    assert got["nodesc.md"] == "missing 'description' in frontmatter"
    assert got["latin1.md"].startswith("invalid UTF-8")
    assert got["binary.md"].startswith("binary content")
    assert all("\n" not in reason for reason in got.values())


def test_file_over_the_size_limit_is_skipped_before_parsing(root: Path) -> None:
    write(root / "big.md", memory(body="x" * 300_000))
    write(root / "small.md", memory())
    snapshot = scan(root)
    assert set(snapshot.docs) == {"mem/small.md"}
    assert reasons(snapshot)["big.md"].endswith("over the 262144-byte limit")
    assert set(scan(root, max_bytes=400_000).docs) == {"mem/big.md", "mem/small.md"}


def test_memory_index_hidden_folders_and_other_files_are_not_memories(root: Path) -> None:
    write(root / "MEMORY.md", "# index\n- [a](a.md)\n")
    write(root / "sub" / "MEMORY.md", "# sub index\n")
    write(root / ".git" / "HEAD.md", memory())
    write(root / "sub" / ".cache" / "x.md", memory())
    write(root / ".hidden.md", memory())
    write(root / "notes.txt", memory())
    write(root / "a.md", memory())
    snapshot = scan(root)
    assert set(snapshot.docs) == {"mem/a.md"} and not snapshot.errors


def test_symlink_inside_the_root_loads_under_its_own_path(root: Path) -> None:
    write(root / "notes" / "a.txt", memory(name="Real"))  # no memory itself (not .md)
    (root / "alias.md").symlink_to(root / "notes" / "a.txt")
    assert scan(root).docs["mem/alias.md"].name == "Real"


def test_a_symlink_to_a_memory_of_the_same_root_is_that_memory_once(root: Path) -> None:
    write(root / "real" / "a.md", memory(name="Real"))
    (root / "alias.md").symlink_to(root / "real" / "a.md")  # sorts first, and is still left out
    assert sorted(scan(root).docs) == ["mem/real/a.md"]


def test_symlink_pointing_outside_the_root_is_refused(root: Path, tmp_path: Path) -> None:
    secret = write(tmp_path / "outside" / "secret.md", memory())
    (root / "leak.md").symlink_to(secret)
    (root / "relative.md").symlink_to(Path("..") / "outside" / "secret.md")
    (root / "folder").symlink_to(secret.parent, target_is_directory=True)
    snapshot = scan(root)
    assert not snapshot.docs
    assert reasons(snapshot) == {
        "leak.md": "symlink points outside the root",
        "relative.md": "symlink points outside the root",
        "folder": "symlinked folder points outside the root",
    }


def test_symlink_loop_and_broken_symlink_are_reported(root: Path) -> None:
    (root / "loop-a.md").symlink_to(root / "loop-b.md")
    (root / "loop-b.md").symlink_to(root / "loop-a.md")
    (root / "self.md").symlink_to(root / "self.md")
    (root / "dangling.md").symlink_to(root / "gone.md")
    write(root / "ok.md", memory())
    snapshot = scan(root)
    assert set(snapshot.docs) == {"mem/ok.md"}
    assert reasons(snapshot) == {
        "loop-a.md": "symlink loop",
        "loop-b.md": "symlink loop",
        "self.md": "symlink loop",
        "dangling.md": "broken symlink: its target does not exist",
    }


def test_fifo_named_like_a_memory_is_not_read(root: Path) -> None:
    os.mkfifo(root / "pipe.md")  # opening it blocking would hang the scan forever
    write(root / "ok.md", memory())
    snapshot = scan(root)
    assert set(snapshot.docs) == {"mem/ok.md"}
    assert reasons(snapshot) == {"pipe.md": "not a regular file"}


def test_file_deleted_between_listing_and_reading_is_reported(root: Path) -> None:
    write(root / "stays.md", memory())
    write(root / "sub" / "goes.md", memory())
    store_root = Root("mem", str(root))
    listed = [Candidate(rel, str(root / rel), "file") for rel in ("stays.md", "sub/goes.md", "gone/x.md")]
    (root / "sub" / "goes.md").unlink()  # the race, ordered: listed, then deleted, then read
    loaded = {c.rel: read_candidate(store_root, c, 256 * 1024) for c in listed}
    assert loaded["stays.md"].name == "A memory"  # type: ignore[union-attr]
    assert loaded["sub/goes.md"].reason == "file vanished before it could be read"  # type: ignore[union-attr]
    assert loaded["gone/x.md"].reason == "file vanished before it could be read"  # type: ignore[union-attr]


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder an unprivileged user can traverse (pytest's tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="recall-kit-perm-"))
    folder.chmod(0o755)
    yield folder
    for path in folder.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder)


def _scan_in_child(root: Path, uid: int | None) -> dict:
    """Scan in a forked child, as ``uid`` when given: root reads anything (CAP_DAC_OVERRIDE), so a
    real EACCES needs another user. Forked rather than exec'd: the interpreter lives under /root."""
    scan(root)  # warm up: every module the child needs is imported before the fork
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop privileges, scan, report, exit without running pytest's cleanup
        status = 1
        try:
            os.close(read_fd)
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)
            snapshot = scan(root)
            result = {"docs": sorted(snapshot.docs), "errors": reasons(snapshot)}
            os.write(write_fd, json.dumps(result).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


def test_unreadable_file_and_folder_are_reported_as_permission_denied(shared_tmp: Path) -> None:
    root = shared_tmp / "mem"
    write(root / "ok.md", memory())
    write(root / "locked.md", memory()).chmod(0o000)
    write(root / "private" / "inner.md", memory())
    (root / "private").chmod(0o000)
    for path in (root, root / "ok.md"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    # Root bypasses permission bits (CAP_DAC_OVERRIDE), so as root the scan runs as "nobody".
    uid = 65534 if os.geteuid() == 0 else None  # "nobody"
    result = _scan_in_child(root, uid)
    assert result["docs"] == ["mem/ok.md"]
    assert result["errors"] == {
        "locked.md": "unreadable: permission denied",
        "private": "unreadable folder: permission denied",
    }


def test_missing_root_raises_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="memory root does not exist: .*nope$"):
        MemoryStore.open(tmp_path / "nope", watch=False)
    write(tmp_path / "file.md", memory())
    with pytest.raises(MemoryStoreError, match="memory root is not a folder"):
        MemoryStore.open(tmp_path / "file.md", watch=False)


def test_missing_root_allowed_is_reported_in_errors(tmp_path: Path) -> None:
    snapshot = scan(tmp_path / "later", allow_missing=True)
    assert not snapshot.docs
    assert [e.reason for e in snapshot.errors] == ["root folder does not exist"]


def test_roots_get_unique_scope_labels_and_explicit_labels(tmp_path: Path) -> None:
    one, two = tmp_path / "a" / "memory", tmp_path / "b" / "memory"
    write(one / "x.md", memory(name="one"))
    write(two / "x.md", memory(name="two"))
    write(tmp_path / "user" / "x.md", memory(name="user"))
    with MemoryStore.open(one, two, ("me", tmp_path / "user"), watch=False) as store:
        assert [label for label, _ in store.roots] == ["memory", "memory-2", "me"]
        docs = store.snapshot().docs
    assert {ref: d.name for ref, d in docs.items()} == {
        "memory/x.md": "one", "memory-2/x.md": "two", "me/x.md": "user"
    }


def test_duplicate_or_invalid_labels_are_refused(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="share the label"):
        MemoryStore.open(("x", tmp_path), ("x", tmp_path), watch=False)
    with pytest.raises(MemoryStoreError, match="invalid root label"):
        MemoryStore.open(("a/b", tmp_path), watch=False)
    with pytest.raises(MemoryStoreError, match="no memory root"):
        MemoryStore.open(watch=False)


def test_one_shot_store_runs_no_thread(root: Path) -> None:
    import threading

    before = set(threading.enumerate())
    with MemoryStore.open(root, watch=False) as store:
        assert not store.watching
        assert set(threading.enumerate()) == before
