"""Private folders and files: only this user's, never through a symlink, never a FIFO."""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path

import pytest

from memory_store import UnsafePathError, open_private, private_folder, private_lock


def test_a_missing_folder_is_created_private(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "state" / "recall-kit")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700


def test_an_existing_folder_of_ours_is_tightened(tmp_path: Path) -> None:
    (tmp_path / "loose").mkdir(mode=0o755)
    os.chmod(tmp_path / "loose", 0o755)
    private_folder(tmp_path / "loose")
    assert stat.S_IMODE(os.stat(tmp_path / "loose").st_mode) == 0o700


def test_a_folder_on_the_way_that_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # not sticky: another user could rename our folder away and put theirs
    with pytest.raises(UnsafePathError, match="writable by others"):
        private_folder(shared / "cache" / "recall-kit")
    assert not (shared / "cache").exists()


def test_a_sticky_root_folder_like_tmp_is_accepted(tmp_path: Path) -> None:
    if os.stat("/tmp").st_uid != 0 or not os.stat("/tmp").st_mode & stat.S_ISVTX:
        pytest.skip("/tmp is not a sticky folder owned by root here")
    folder = private_folder(Path("/tmp") / f"recall-kit-test-{os.getpid()}")
    try:
        assert folder.is_dir()
    finally:
        folder.rmdir()


def test_a_symlinked_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(UnsafePathError, match="symlink"):
        private_folder(tmp_path / "link")


def test_a_symlink_or_a_fifo_is_never_opened(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not ours to touch")
    (tmp_path / "link").symlink_to(target)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafePathError, match="symlink"):
        open_private(tmp_path / "link", os.O_WRONLY | os.O_TRUNC)
    with pytest.raises(UnsafePathError, match="not a regular file"):
        open_private(tmp_path / "fifo")  # refused before any open: nothing blocks
    assert target.read_text() == "not ours to touch"


def test_a_new_private_file_is_made_0600(tmp_path: Path) -> None:
    fd = open_private(tmp_path / "daemon.lock", os.O_RDWR, create=True)
    os.close(fd)
    assert stat.S_IMODE(os.stat(tmp_path / "daemon.lock").st_mode) == 0o600


def test_something_else_where_a_private_folder_should_be_is_named_for_what_it_is(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("x")
    for name in ("fifo", "file"):
        with pytest.raises(UnsafePathError, match=f"{name} is not a folder"):
            private_folder(tmp_path / name)


def test_a_private_lock_is_made_0600_and_excludes_another_holder(tmp_path: Path) -> None:
    lock = tmp_path / "index.lock"
    with private_lock(lock):
        assert stat.S_IMODE(os.stat(lock).st_mode) == 0o600
        other = os.open(lock, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released with the block
    finally:
        os.close(other)


def test_a_private_lock_never_opens_a_fifo_or_goes_through_a_symlink(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo.lock")
    target = tmp_path / "elsewhere"
    target.write_text("not ours to touch")
    (tmp_path / "link.lock").symlink_to(target)
    with pytest.raises(UnsafePathError, match="not a regular file"):
        with private_lock(tmp_path / "fifo.lock"):
            pass
    with pytest.raises(UnsafePathError, match="symlink"):
        with private_lock(tmp_path / "link.lock"):
            pass
    assert target.read_text() == "not ours to touch"
