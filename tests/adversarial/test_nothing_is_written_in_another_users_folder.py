"""A folder of another user, writable by all (as root, every folder is writable): no memory, enrichment
or learned word of ours is written in it, since its owner could read it and swap what is below it.
Each writer refuses in one line naming the folder and its owner, and the tree is as it was."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from enrich_support import answer, write_memories
from throwaway_user import throwaway_user

from cli_support import run_recall_kit
from memory_store import EnrichmentEntry, LearningUpdate, MemoryPathError, MemoryRoot
from recall_kit.testing import ScriptedChatServer


def tree(folder: Path) -> dict[str, tuple[bytes | None, int]]:
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None, p.stat().st_uid)
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def theirs(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """A root of three memories with a sidecar folder, then handed to another user, mode 0777."""
    root = write_memories(tmp_path / "mem")
    (root / "user").mkdir()
    (root / ".recall-kit").mkdir()
    with throwaway_user() as other:
        yield root, other.pw_uid
        for path in [root, *root.rglob("*")]:
            os.chown(path, os.getuid(), os.getgid(), follow_symlinks=False)


def give(path: Path, uid: int) -> None:
    os.chown(path, uid, uid)
    os.chmod(path, 0o777)


def add(root: Path) -> subprocess.CompletedProcess[str]:
    return run_recall_kit(
        "add", "--root", str(root), "--type", "user", "--name", "Note", "--description", "d", "--body", "b",
        cwd=root.parent,
    )


@pytest.mark.parametrize(("folder", "named"), [(".", "the root"), ("user", "user")])
def test_add_saves_nothing_in_a_folder_another_user_owns(theirs: tuple[Path, int], folder: str, named: str) -> None:
    root, uid = theirs
    give(root / folder, uid)
    before = tree(root)
    result = add(root)
    assert result.returncode != 0 and result.stdout == ""
    assert result.stderr.splitlines() == [
        f"recall-kit: not saved: refused mem/user/note.md: {named} belongs to uid {uid}, not to this user, "
        "and nothing is written in another user's folder"
    ]
    assert tree(root) == before
    os.chown(root / folder, os.getuid(), os.getgid())
    assert add(root).returncode == 0 and (root / "user" / "note.md").is_file()  # the refusal was the owner alone


@pytest.mark.parametrize(("folder", "named"), [(".", "the root"), (".recall-kit", "the sidecar folder")])
def test_no_enrichment_is_written_and_no_model_asked_for_a_root_another_user_owns(
    theirs: tuple[Path, int], folder: str, named: str, server: ScriptedChatServer
) -> None:
    root, uid = theirs
    give(root / folder, uid)
    before = tree(root)
    files = MemoryRoot(root)
    assert files.sidecar_refusal() == (
        f"mem/.recall-kit: {named} belongs to uid {uid}, not to this user, and nothing is written in another user's folder"
    )
    with pytest.raises(MemoryPathError, match=f"belongs to uid {uid}, not to this user"):
        files.record_enrichment([EnrichmentEntry("deploy.md", "0" * 64, ("ship",))])
    server.default = answer()
    result = run_recall_kit("enrich", "--root", str(root), "--base-url", server.base_url, "--model", "scripted", cwd=root.parent)
    assert result.returncode == 2 and len(server.requests) == 0
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"recall-kit: mem/.recall-kit: {named} belongs to uid {uid}"), line
    assert tree(root) == before


@pytest.mark.parametrize(("folder", "named"), [(".", "the root"), (".recall-kit", ".recall-kit")])
def test_no_word_is_learned_in_a_root_another_user_owns(theirs: tuple[Path, int], folder: str, named: str) -> None:
    root, uid = theirs
    give(root / folder, uid)
    before = tree(root)
    files = MemoryRoot(root)
    assert f"belongs to uid {uid}, not to this user" in (files.learning_refusal() or "")
    with pytest.raises(MemoryPathError) as refused:
        files.record_learning([LearningUpdate("deploy.md", keys=("staging",))])
    assert str(refused.value) == (
        f"refused mem/.recall-kit/learned.jsonl: {named} belongs to uid {uid}, not to this user, "
        "and nothing is written in another user's folder"
    )
    assert tree(root) == before
