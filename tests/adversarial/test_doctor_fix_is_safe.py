"""`doctor --fix` attacked: a MEMORY.md that is a symlink or a FIFO, an index the agent rewrites between
the diff and the answer, kill -9 in the middle of the write, another user's folder, a sidecar folder
that is a symlink. The index is written whole or not at all, never through a symlink, never for
another user, and never over bytes the user did not see in the diff."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_support import RECALL_KIT, clean_environ, run_recall_kit
from doctor_support import home_environ, Sick, sick_folder, tree_state
from memory_store import MemoryPathError, MemoryRoot, MemoryStore, MemoryStoreError
from recall_kit.health import HealthPlan, HealthRoot, RecallSet, apply_repair, check_health, plan_repairs
from throwaway_user import throwaway_user

PROMPT = b"Write this change?"


def doctor(sick: Sick, *args: str) -> subprocess.CompletedProcess[str]:
    return run_recall_kit("doctor", *args, cwd=sick.project, env=home_environ(sick.home))


def plan_of(folder: Path) -> HealthPlan:
    return HealthPlan((HealthRoot(str(folder)),), (RecallSet("t", (str(folder),)),))


def test_a_memory_md_that_is_a_symlink_is_never_read_or_written_through(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    target = tmp_path / "elsewhere.md"
    target.write_bytes((sick.folder / "MEMORY.md").read_bytes())
    (sick.folder / "MEMORY.md").unlink()
    (sick.folder / "MEMORY.md").symlink_to(target)
    before = target.read_bytes()
    result = doctor(sick, "--fix", "--yes")
    assert "memory/MEMORY.md is a symlink: not read" in result.stdout
    assert "--fix: nothing to mend" in result.stdout and target.read_bytes() == before
    assert (sick.folder / "MEMORY.md").is_symlink()


def test_an_index_swapped_for_a_symlink_after_the_check_is_refused(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    repair = plan_repairs(check_health(plan_of(sick.folder), use_cache=False))[0]
    target = tmp_path / "target.md"
    target.write_bytes(repair.old)  # the very bytes the repair expects, one link away
    (sick.folder / "MEMORY.md").unlink()
    (sick.folder / "MEMORY.md").symlink_to(target)
    with pytest.raises(MemoryPathError, match="symlink"):
        apply_repair(repair)
    assert target.read_bytes() == repair.old and (sick.folder / "MEMORY.md").is_symlink()


def test_an_index_changed_after_the_diff_is_not_written_over(tmp_path: Path) -> None:
    """The agent writes MEMORY.md while the user reads the diff: the answer "y" writes nothing."""
    sick = sick_folder(tmp_path)
    index = sick.folder / "MEMORY.md"
    master, slave = os.openpty()
    env = home_environ(sick.home)
    proc = subprocess.Popen([str(RECALL_KIT), "doctor", "--fix"], stdin=slave, stdout=slave, stderr=slave,
                            cwd=sick.project, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while PROMPT not in seen and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                seen += os.read(master, 65536)
        assert PROMPT in seen, seen[-2000:]
        agents_write = index.read_text() + "- [Written meanwhile](meanwhile.md) — by the agent\n"
        index.write_text(agents_write)
        os.write(master, b"y\n")
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    assert index.read_text() == agents_write
    assert b"changed since it was read; nothing written" in seen
    assert not (sick.folder / ".recall-kit" / "index-backups").exists() or not list(
        (sick.folder / ".recall-kit" / "index-backups").iterdir())


_WRITER = """
import sys
from memory_store import MemoryRoot
root, a, b = MemoryRoot(sys.argv[1]), open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
print("ready", flush=True)
while True:
    current = root.index_files()[0].data
    root.replace_index("MEMORY.md", b if current == a else a, expected=current)
"""


def test_kill_9_in_the_middle_of_writing_leaves_the_old_index_or_the_new_one(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    versions = [tmp_path / "a", tmp_path / "b"]
    versions[0].write_bytes(b"- [a](a.md)\n" * 20_000)  # 240 KB: a write takes many system calls
    versions[1].write_bytes(b"- [b](b.md) and more\n" * 11_000)
    (folder / "MEMORY.md").write_bytes(versions[0].read_bytes())
    wanted = {v.read_bytes() for v in versions}
    rng = random.Random(7)
    for _ in range(12):
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(folder), *map(str, versions)],
                                  stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.0, 0.3))  # a random moment of the loop, not a synchronisation
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        assert (folder / "MEMORY.md").read_bytes() in wanted
    with MemoryStore.open(folder, watch=False) as store:
        assert store.snapshot().errors == ()  # a temp file left by the kill is hidden: no reader lists it
    assert [p.name for p in folder.iterdir() if not p.name.startswith(".")] == ["MEMORY.md"]


def test_another_users_folder_or_index_is_never_mended(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    repair = plan_repairs(check_health(plan_of(sick.folder), use_cache=False))[0]
    with throwaway_user() as other:
        os.chown(sick.folder / "MEMORY.md", other.pw_uid, other.pw_gid)
        with pytest.raises(MemoryPathError, match=f"belongs to uid {other.pw_uid}"):
            apply_repair(repair)
        os.chown(sick.folder / "MEMORY.md", os.getuid(), os.getgid())
        os.chown(sick.folder, other.pw_uid, other.pw_gid)
        before = tree_state(sick.folder)
        with pytest.raises(MemoryPathError, match=f"belongs to uid {other.pw_uid}"):
            apply_repair(repair)
        result = doctor(sick, "--fix", "--yes")
        assert "not mended" in result.stderr and "belongs to uid" in result.stderr
        assert tree_state(sick.folder) == before
        os.chown(sick.folder, os.getuid(), os.getgid())


def test_a_sidecar_folder_that_is_a_symlink_takes_no_backup_and_nothing_is_written(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (sick.folder / ".recall-kit").symlink_to(outside, target_is_directory=True)
    before = (sick.folder / "MEMORY.md").read_bytes()
    repair = plan_repairs(check_health(plan_of(sick.folder), use_cache=False))[0]
    with pytest.raises(MemoryStoreError, match="symlink"):
        apply_repair(repair)
    assert (sick.folder / "MEMORY.md").read_bytes() == before and list(outside.iterdir()) == []


def test_fifos_in_the_memory_folder_and_the_project_never_hang_doctor(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    os.mkfifo(sick.folder / "pipe.md")
    os.mkfifo(sick.project / "src" / "pipe.py")
    (sick.folder / "sub").mkdir()
    os.mkfifo(sick.folder / "sub" / "MEMORY.md")
    result = subprocess.run([str(RECALL_KIT), "doctor", "--json"], cwd=sick.project, env=home_environ(sick.home),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert "pipe.md" in result.stdout and "not a regular file" in result.stdout
    assert MemoryRoot(sick.folder).index_files()[1].problem == "not a regular file: not read"
