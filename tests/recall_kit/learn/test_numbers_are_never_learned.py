"""A bare number is never a learned key, and counts as a specific word only where a memory's own text
holds it: the same digits name a room, a floor, a ticket and a step."""

from __future__ import annotations

import json
from pathlib import Path

from memory_store import LEARNED_PATH
from recall_kit import learnable_words, open_recaller
from recall_kit_bench import write_memory
from session_support import MEMORIES

TICKET = "ticket PAY-2101 step 07"
ROOM = "room 2101 floor 07"


def _fast(root: Path, prompt: str) -> list[str]:
    with open_recaller([root], watch=False, use_cache=False, learn=False) as recaller:
        return [scored.doc.ref for scored in recaller.heuristic.recall(prompt).docs]


def _memories(folder: Path, extra: dict[str, tuple[str, str, str]] | None = None) -> Path:
    for path, (name, description, body) in {**MEMORIES, **(extra or {})}.items():
        write_memory(folder, path, name, description, body)
    return folder


def test_a_bare_number_is_never_a_learned_key() -> None:
    words = learnable_words(TICKET)
    assert {"2101", "07"} <= words.words  # a suppressor holds the prompt's words, numbers too
    assert "2101" not in words.keys and "07" not in words.keys
    assert {"ticket", "pay_2101"} <= set(words.keys)  # an identifier holding digits is kept
    assert not {"3_11", "11", "500"} & set(learnable_words("bump python to 3.11, port ５００").keys)


def test_numbers_in_a_learned_file_never_make_a_memory_specific(tmp_path: Path) -> None:
    root = _memories(tmp_path / "mem")
    # what learning kept before numbers were left out, or a learned file a repository ships
    (root / LEARNED_PATH).parent.mkdir()
    (root / LEARNED_PATH).write_text(json.dumps(
        {"path": "deploy.md", "keys": [["ticket", 2, 1.0], ["pay_2101", 2, 1.0], ["2101", 2, 1.0], ["07", 2, 1.0]]}
    ) + "\n")
    assert _fast(root, TICKET) == ["mem/deploy.md"]  # what was learned still works for its own words
    assert _fast(root, ROOM) == []


def test_a_number_the_memory_itself_holds_is_still_specific(tmp_path: Path) -> None:
    root = _memories(tmp_path / "mem", {"vpn.md": ("WireGuard", "The office VPN", "It listens on port 51820.")})
    assert _fast(root, "wireguard port 51820") == ["mem/vpn.md"]
    assert _fast(root, "wireguard 51820") == ["mem/vpn.md"]
