"""Learning never writes a file that git tracks or would commit: a learned file a repository ships, or a
repository's own `.recall-kit/.gitignore` that lets it in, is refused in one line (said once by the
learner), and nothing of the user's prompts reaches `git diff` or `git status`. Real git, in tmp_path."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from store_helpers import memory, write

from memory_store import LEARNED_PATH, LearningUpdate, MemoryPathError, MemoryRoot, MemoryStore
from recall_kit import LearnEvent, learnable_words
from recall_kit._learn import Learner
from recall_kit._selector import Selection
from recall_kit._telemetry import Telemetry

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")  # the check asks git itself
WORDS = ("gravelmoon", "staging")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo.parent), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    folder = tmp_path / "repo"
    write(folder / "mem" / "a.md", memory(name="A"))
    git(folder, "init", "-q")
    return folder


def teach(root: Path) -> None:
    MemoryRoot(root).record_learning([LearningUpdate("a.md", keys=WORDS)])


def test_a_learned_file_the_repository_tracks_is_never_rewritten(repo: Path) -> None:
    shipped = repo / "mem" / LEARNED_PATH
    write(shipped, json.dumps({"path": "a.md", "keys": [["shipped", 1, 1.0]]}) + "\n")
    git(repo, "add", "-A")
    git(repo, "add", "-f", "mem/.recall-kit/learned.jsonl")
    git(repo, "commit", "-qm", "ship what was learned")
    before = shipped.read_bytes()
    with pytest.raises(MemoryPathError, match=r"^refused mem/.recall-kit/learned.jsonl: git tracks it; nothing is learned"):
        teach(repo / "mem")
    assert shipped.read_bytes() == before and git(repo, "diff") == ""
    with MemoryStore.open(repo / "mem", watch=False) as store:  # what it holds is still read
        assert store.snapshot().docs["mem/a.md"].learned.keys == ("shipped",)  # type: ignore[union-attr]


def test_a_repositorys_gitignore_that_lets_the_file_in_is_kept_and_nothing_is_learned(repo: Path) -> None:
    theirs = repo / "mem" / ".recall-kit" / ".gitignore"
    write(theirs, "*\n!learned.jsonl\n")
    with pytest.raises(MemoryPathError, match="git would commit it: a .gitignore of the repository lets it in"):
        teach(repo / "mem")
    assert theirs.read_text() == "*\n!learned.jsonl\n"  # the user's file, byte for byte
    assert not (repo / "mem" / LEARNED_PATH).exists()
    assert "learned" not in git(repo, "status", "--porcelain", "--untracked-files=all")


def test_in_a_repository_our_own_rule_keeps_what_was_learned_out_of_git_status(repo: Path) -> None:
    teach(repo / "mem")
    assert "gravelmoon" in (repo / "mem" / LEARNED_PATH).read_text()
    assert ".recall-kit" not in git(repo, "status", "--porcelain", "--untracked-files=all")


def test_a_file_forced_into_the_index_after_learning_began_is_not_written_again(repo: Path) -> None:
    root = MemoryRoot(repo / "mem")
    root.record_learning([LearningUpdate("a.md", keys=("staging",))])
    git(repo, "add", "-f", "mem/.recall-kit/learned.jsonl")  # the index changes: git is asked again
    before = (repo / "mem" / LEARNED_PATH).read_bytes()
    with pytest.raises(MemoryPathError, match="git tracks it"):
        root.record_learning([LearningUpdate("a.md", keys=("gravelmoon",))])
    assert (repo / "mem" / LEARNED_PATH).read_bytes() == before


def test_a_repositorys_config_runs_no_command_when_git_is_asked(repo: Path) -> None:
    ran = repo.parent / "ran"
    git(repo, "config", "core.fsmonitor", f"touch {ran}; false")  # what an unpacked archive's .git could hold
    teach(repo / "mem")
    assert not ran.exists()


def test_without_git_learning_writes_under_our_own_rule(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(repo / "mem" / ".recall-kit" / ".gitignore", "!learned.jsonl\n")
    monkeypatch.setenv("PATH", str(repo.parent / "no-git-here"))
    teach(repo / "mem")  # nothing can tell it would be committed, and nothing on this machine commits it
    assert (repo / "mem" / LEARNED_PATH).exists()


def test_the_learner_says_once_that_it_learns_nothing_there(repo: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(repo / "mem" / ".recall-kit" / ".gitignore", "!learned.jsonl\n")
    events: list[LearnEvent] = []
    prompt = "ship it to staging with gravelmoon"
    with MemoryStore.open(repo / "mem", watch=False) as store, caplog.at_level(logging.WARNING, logger="recall_kit"):
        doc = store.snapshot().docs["mem/a.md"]
        learner = Learner(store, Telemetry(events.append))
        for _ in range(3):
            learner.observe(prompt, (), Selection(docs=(doc,), strategy="model"))
            assert learner.wait_idle(10)
        learner.close()
    assert [e.outcome for e in events] == ["skipped", "failed", "failed"]  # words seen once wait, then refused
    assert "git would commit it" in (events[-1].reason or "")
    assert len([r for r in caplog.records if "not written" in r.getMessage()]) == 1
    assert learnable_words(prompt).keys and not (repo / "mem" / LEARNED_PATH).exists()


def test_a_repository_made_after_learning_began_is_asked_before_the_next_write(tmp_path: Path) -> None:
    folder = tmp_path / "later"
    write(folder / "mem" / "a.md", memory(name="A"))
    root = MemoryRoot(folder / "mem")
    root.record_learning([LearningUpdate("a.md", keys=("staging",))])  # no repository yet: git says nothing
    git(folder, "init", "-q")
    git(folder, "add", "-f", "mem/.recall-kit/learned.jsonl")
    before = (folder / "mem" / LEARNED_PATH).read_bytes()
    with pytest.raises(MemoryPathError, match="git tracks it"):
        root.record_learning([LearningUpdate("a.md", keys=("gravelmoon",))])
    assert (folder / "mem" / LEARNED_PATH).read_bytes() == before and git(folder, "diff") == ""
