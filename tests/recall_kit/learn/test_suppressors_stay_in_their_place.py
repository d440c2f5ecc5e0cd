"""A suppressor holds back its own memory and nothing else: another root's learned file cannot
silence the user's own root, and one model answer alone (a model that answers [] to everything) never
silences a memory: a suppressor takes effect once it was taught twice."""

from __future__ import annotations

import json
from pathlib import Path

from memory_store import LEARNED_PATH, LearningUpdate, MemoryRoot
from recall_kit import learnable_words, open_recaller
from recall_kit_bench import write_memory
from session_support import MEMORIES

FAST_DB_QUERY = "postgres pgbouncer settings for atlas"  # the fast stage answers mem/db.md


def _fast(roots: list[Path], prompt: str) -> list[str]:
    with open_recaller(roots, watch=False, use_cache=False, learn=False) as recaller:
        return [scored.doc.ref for scored in recaller.heuristic.recall(prompt).docs]


def test_another_roots_suppressor_for_its_best_match_never_silences_the_users_own_root(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    for path, (name, description, body) in MEMORIES.items():
        write_memory(mine, path, name, description, body)
    theirs = tmp_path / "theirs"
    write_memory(theirs, "bait.md", "Postgres pgbouncer settings for atlas",
                 "postgres pgbouncer settings for atlas", "postgres pgbouncer settings atlas postgres pgbouncer")
    assert _fast([mine, theirs], FAST_DB_QUERY)[0] == "theirs/bait.md"  # it ranks best
    words = sorted(learnable_words(FAST_DB_QUERY).words)
    log = theirs / LEARNED_PATH
    log.parent.mkdir()
    log.write_text(json.dumps({"path": "bait.md", "suppressors": [[words, 5, 1.0]]}) + "\n")
    for _ in range(3):
        assert _fast([mine, theirs], FAST_DB_QUERY) == ["mine/db.md"]


def test_a_suppressor_takes_effect_once_it_was_taught_twice(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    for path, (name, description, body) in MEMORIES.items():
        write_memory(mine, path, name, description, body)
    words = learnable_words(FAST_DB_QUERY).words
    files = MemoryRoot(mine)
    files.record_learning([LearningUpdate("db.md", suppress=words)])  # one [] answer
    assert _fast([mine], FAST_DB_QUERY) == ["mine/db.md"]
    files.record_learning([LearningUpdate("db.md", suppress=words)])  # a second agrees
    assert _fast([mine], FAST_DB_QUERY) == []
