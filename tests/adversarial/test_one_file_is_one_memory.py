"""Roots that overlap (a folder and one inside it, a root and a symlink to it) reach some files twice:
each file is still one memory, listed under the first root given that reaches it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_store import MemoryStore, Snapshot

from cli_support import clean_environ, run_recall_kit
from store_helpers import wait_until

DEPLOY = "how do we deploy atlas with helm to kubernetes"


def memory(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\ntype: project\n---\n{body}\n"


@pytest.fixture
def top(tmp_path: Path) -> Path:
    top = tmp_path / "mem"
    (top / "user").mkdir(parents=True)
    (top / "user" / "deploy.md").write_text(
        memory("Deploying atlas", "atlas deploys to kubernetes with helm", "helm upgrade atlas ./chart"))
    (top / "tea.md").write_text(memory("Afternoon routine", "green tea at four", "Sencha, 80 degrees."))
    return top


def scan(*roots: object) -> Snapshot:
    with MemoryStore.open(*roots, watch=False) as store:  # type: ignore[arg-type]
        return store.snapshot()


def test_a_root_inside_another_adds_no_second_copy(top: Path) -> None:
    assert sorted(scan(top, top / "user").docs) == ["mem/tea.md", "mem/user/deploy.md"]
    assert sorted(scan(top / "user", top).docs) == ["mem/tea.md", "user/deploy.md"]  # the first root given owns it


def test_a_root_and_a_symlink_to_it_are_one_set_of_memories(top: Path, tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(top, target_is_directory=True)
    snapshot = scan(top, tmp_path / "link")
    assert sorted(snapshot.docs) == ["mem/tea.md", "mem/user/deploy.md"] and snapshot.errors == ()


def test_a_symlink_to_a_memory_in_the_same_root_is_no_second_memory(top: Path) -> None:
    (top / "project").mkdir()
    (top / "project" / "a-dup.md").symlink_to("../user/deploy.md")  # sorts before the file it names
    (top / "z-tea.md").symlink_to("tea.md")
    assert sorted(scan(top).docs) == ["mem/tea.md", "mem/user/deploy.md"]  # the file itself, not the link
    (top / "user" / "deploy.md").unlink()  # the link dangles now: nothing left to recall
    assert sorted(scan(top).docs) == ["mem/tea.md"]
    with MemoryStore.open(top, debounce_ms=20) as store:  # watched: held back until the file itself goes
        (top / "user" / "deploy.md").write_text(memory("Deploying atlas", "atlas deploys with helm", "helm"))
        wait_until(store, lambda s: sorted(s.docs) == ["mem/tea.md", "mem/user/deploy.md"])
        (top / "tea.md").unlink()
        wait_until(store, lambda s: sorted(s.docs) == ["mem/user/deploy.md"])


def test_two_copies_of_the_same_text_are_still_two_memories(top: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "tea.md").write_bytes((top / "tea.md").read_bytes())  # same bytes, another file
    assert sorted(scan(top, other).docs) == ["mem/tea.md", "mem/user/deploy.md", "other/tea.md"]


def test_a_watched_store_keeps_one_memory_per_file_as_files_change(top: Path) -> None:
    with MemoryStore.open(top / "user", top, debounce_ms=20) as store:
        assert sorted(store.snapshot().docs) == ["mem/tea.md", "user/deploy.md"]
        (top / "user" / "deploy.md").write_text(memory("Deploying atlas", "now with argo", "argo sync atlas"))
        snapshot = wait_until(store, lambda s: s.docs["user/deploy.md"].description == "now with argo")
        assert sorted(snapshot.docs) == ["mem/tea.md", "user/deploy.md"]
        (top / "user" / "new.md").write_text(memory("New", "a new note", "body"))
        snapshot = wait_until(store, lambda s: "user/new.md" in s.docs)
        assert sorted(snapshot.docs) == ["mem/tea.md", "user/deploy.md", "user/new.md"]
        (top / "user" / "new.md").rename(top / "new.md")  # now only the second root reaches it
        snapshot = wait_until(store, lambda s: "mem/new.md" in s.docs)
        assert sorted(snapshot.docs) == ["mem/new.md", "mem/tea.md", "user/deploy.md"]


@pytest.mark.parametrize("second", ["inner", "symlink"])
def test_query_delivers_a_file_once_whatever_roots_reach_it(top: Path, tmp_path: Path, second: str) -> None:
    if second == "symlink":
        (tmp_path / "link").symlink_to(top, target_is_directory=True)
    other = top / "user" if second == "inner" else tmp_path / "link"
    env = clean_environ(RECALL_KIT_CACHE_DIR=str(tmp_path / "cache"))
    for _ in range(2):  # cold, then through the index cache
        result = run_recall_kit("query", DEPLOY, "--root", str(top), "--root", str(other), "--fast-only", "--json",
                                cwd=tmp_path, env=env)
        assert result.returncode == 0, result.stderr
        delivered = json.loads(result.stdout)
        assert [doc["ref"] for doc in delivered["docs"]] == ["mem/user/deploy.md"]
        assert delivered["rendered"].count("helm upgrade atlas ./chart") == 1
        assert delivered["store_size"] == 2
