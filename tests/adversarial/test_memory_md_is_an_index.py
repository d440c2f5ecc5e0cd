"""`MEMORY.md` is the agents' index of a memory folder, not a memory: at every door (scan, watch,
list, validate, the hook) it is never recalled, never listed and never reported as a bad file, at
the folder's top (where Claude Code and Qwen Code keep it) or in a subfolder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from integration_support import EXAMPLES, Daemon, Env, daemon, env  # noqa: F401  (fixtures)
from store_helpers import wait_until

from memory_store import MemoryStore

# An index as the agents write it: no frontmatter, one line per memory, words of its own.
INDEX = "# Memory index\n\n- [Deploying](projects/ledgerline/deploy.md) - quokka marmalade zeppelin\n"
INDEX_PROMPT = "quokka marmalade zeppelin"  # in the index alone


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    shutil.copytree(EXAMPLES, root)
    (root / "MEMORY.md").write_text(INDEX)
    (root / "projects" / "MEMORY.md").write_text(INDEX)
    return root


def test_validate_and_list_neither_count_nor_report_the_index(env: Env, tmp_path: Path) -> None:
    root = _root(tmp_path)

    validate = env.run("validate", "--root", str(root), "--json")
    listing = env.run("list", "--root", str(root), "--json")

    assert validate.returncode == 0, validate.stdout
    assert json.loads(validate.stdout)["errors"] == []
    data = json.loads(listing.stdout)
    assert not [d for d in data["docs"] if d["path"].endswith("MEMORY.md")] and data["errors"] == []
    assert len(data["docs"]) == sum(1 for p in EXAMPLES.rglob("*.md") if p.name != "MEMORY.md")


def test_a_watched_store_never_picks_up_an_index_written_later(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    root.mkdir()
    with MemoryStore.open(root) as store:
        (root / "MEMORY.md").write_text(INDEX)
        (root / "sub").mkdir()
        (root / "sub" / "MEMORY.md").write_text(INDEX)
        (root / "real.md").write_text("---\nname: Real\ndescription: a real one\ntype: user\n---\nbody\n")
        snapshot = wait_until(store, lambda s: any(ref.endswith("real.md") for ref in s.docs))
    assert [ref for ref in snapshot.docs] == ["memory/real.md"] and not snapshot.errors


def test_the_hook_never_delivers_the_index_even_for_its_own_words(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    root = _root(tmp_path)
    event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": INDEX_PROMPT}

    result = env.run("hook", "claude-code", "--root", str(root), input=json.dumps(event))

    assert result.returncode == 0 and b"MEMORY.md" not in result.stdout and b"quokka" not in result.stdout
