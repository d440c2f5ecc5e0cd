"""The suite keeps out of the real user's home: HOME and every XDG folder point at this run's
throwaway folders (subprocesses inherit them), and the guards that fail a test that wrote into
HOME, and the run if an index cache of its roots reached the real cache, catch what they should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import platformdirs
from home_guard import XDG_FOLDERS, caches_of_ours, real_recall_kit_folders, sentinel_problem


def test_home_and_every_xdg_folder_of_this_run_are_throwaway_folders_also_for_subprocesses() -> None:
    home = Path(os.environ["HOME"])
    assert home.name == "home" and home.parent.name.startswith("recall-kit-tests-") and os.listdir(home) == []
    for variable, name in XDG_FOLDERS.items():
        assert Path(os.environ[variable]) == home.parent / name
    assert Path(platformdirs.user_cache_dir("recall-kit")) == home.parent / "cache" / "recall-kit"
    seen = subprocess.run([sys.executable, "-c", "import os; print(os.path.expanduser('~'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert seen == str(home)


def test_what_a_test_wrote_into_home_is_named_and_removed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".npm" / "_logs").mkdir(parents=True)
    (home / ".npm" / "_logs" / "debug.log").write_text("x")
    (home / ".claude.json").write_text("{}")
    problem = sentinel_problem(home)
    assert problem is not None and ".claude.json" in problem and ".npm/_logs/debug.log" in problem
    assert os.listdir(home) == [] and sentinel_problem(home) is None


def test_only_an_index_cache_of_our_roots_counts_as_ours(tmp_path: Path) -> None:
    cache = tmp_path / "cache" / "recall-kit"
    cache.mkdir(parents=True)
    ours, theirs = tmp_path / "checkout", tmp_path / "other-checkout"
    (cache / "index-a.used").write_text(json.dumps({"roots": [str(ours / "examples" / "memories")]}))
    (cache / "index-b.used").write_text(json.dumps({"roots": [str(theirs / "examples" / "memories")]}))
    (cache / "index-c.used").write_text("not json")
    (cache / "index-a.bin").write_bytes(b"")
    found = caches_of_ours(cache, frozenset(os.listdir(cache)), (ours,))
    assert len(found) == 1 and "index-a.used" in found[0]


def test_the_real_folders_include_where_the_environment_and_the_defaults_put_them(tmp_path: Path) -> None:
    folders = real_recall_kit_folders(tmp_path, {"XDG_CACHE_HOME": "/elsewhere/cache", "XDG_STATE_HOME": "relative"})
    assert tmp_path / ".cache" / "recall-kit" in folders and Path("/elsewhere/cache/recall-kit") in folders
    assert tmp_path / ".local" / "state" / "recall-kit" in folders and Path("relative/recall-kit") not in folders
