"""Hand-made memory folders for the doctor tests: each kind of finding beside its near miss, in a
Claude Code memory folder of a git project under a throwaway HOME, and a recall trail."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from cli_support import clean_environ
from memory_store import format_memory
from recall_kit.testing import CLAUDE_CODE, agent_memory_folder

TOKEN = "ghp_" + "Zq8rT2wXk9LmN4vB7cYd1sHf"  # GitHub's token shape; never a real one
# name, description, body (type project unless named in TYPES)
MEMORIES: dict[str, tuple[str, str, str]] = {
    "deploy-fly.md": ("Deploying to Fly.io", "The app deploys to Fly.io from main via GitHub Actions once CI passes",
                      "Merging to `main` runs the deploy workflow; nobody deploys by hand.\n"),
    # a near-duplicate of deploy-fly.md: the same fact, written again by another session
    "fly-deploys-from-main.md": ("Fly.io deploys from main", "GitHub Actions deploys the app to Fly.io from main after CI passes",
                                 "Every merge to `main` deploys; there are no manual deploys.\n"),
    # its near miss: the same topic, a different fact
    "staging-render.md": ("Staging environment", "Staging runs on Render and is rebuilt from the develop branch every night",
                          "The staging database is reset on Sundays.\n"),
    "loader.md": ("Config loading", "Configuration is read by load_config in src/app.py at start-up",
                  "`load_config` lives in `src/app.py`; the old `src/old_loader.py` parsed flags with "
                  "`parse_legacy_flags`.\nRun `make dev` for a local server and `make release` to tag; "
                  "`npm run build` builds the assets.\n"),
    "ci-token.md": ("CI token", "Where the CI token for GitHub is kept and how to rotate it",
                    "The token lives in 1Password under ci-github.\n"
                    f"Old value, rotated: {TOKEN}\n"),
    "misc.md": ("Misc", "misc", "Postgres pool size is 20; pgbouncer in transaction mode.\n"),
    "unlisted.md": ("Release checklist", "Tag the release, write the changelog, announce it in the releases channel",
                    "1. Changelog 2. Tag 3. Announce\n"),
}
BAD = "broken.md"  # no frontmatter: the store skips it
INDEX = (
    "# Memory index\n"
    "\n"
    "- [Deploying to Fly.io](deploy-fly.md) — main deploys via Actions\n"
    "- [Fly.io deploys from main](fly-deploys-from-main.md) — the same, again\n"
    "- [Staging environment](staging-render.md) — Render, develop branch\n"
    "- [Config loading](loader.md) — load_config\n"
    "- [CI token](ci-token.md) — where it is kept\n"
    "- [Misc](misc.md) — misc\n"
    "- [Gone](gone.md) — a memory that was deleted\n"
    "See [the old notes](old-notes.md) beside [the deploy](deploy-fly.md).\n"
)
DEAD_ENTRY_LINE = 9  # "- [Gone](gone.md)": removed by --fix
PROSE_LINE = 10  # two links, one dead: left for the user


@dataclass(frozen=True)
class Sick:
    home: Path
    project: Path
    folder: Path  # the Claude Code memory folder of ``project``


def git_project(path: Path) -> Path:
    """A git work tree with a source file, a Makefile and a package.json."""
    (path / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "src" / "app.py").write_text("def load_config():\n    return {}\n")
    (path / "Makefile").write_text("dev:\n\tpython -m src.app\n\ntest: dev\n\tpytest\n")
    (path / "package.json").write_text(json.dumps({"scripts": {"build": "vite build"}}))
    return path.resolve()


def write_memory(folder: Path, name: str, title: str, description: str, body: str, type: str = "project") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(format_memory(name=title, description=description, type=type, body="\n" + body))
    return path


def sick_folder(tmp: Path) -> Sick:
    """A Claude Code memory folder with one of each finding and its near miss; files a day old."""
    home = tmp / "home"
    home.mkdir()
    project = git_project(tmp / "project")
    folder = agent_memory_folder(CLAUDE_CODE, home, project)
    for name, (title, description, body) in MEMORIES.items():
        write_memory(folder, name, title, description, body)
    (folder / BAD).write_text("no frontmatter here\n")
    (folder / "MEMORY.md").write_text(INDEX)
    age(folder, 86_400)
    return Sick(home, project, folder)


def age(folder: Path, seconds: float) -> None:
    """Every file below ``folder`` last modified ``seconds`` ago."""
    when = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


def home_environ(home: Path, **extra: str) -> dict[str, str]:
    """clean_environ with HOME and the XDG state, cache and config folders inside ``home``, where the
    trail, doctor's record and the agents' folders of that user are."""
    return clean_environ(HOME=str(home), XDG_STATE_HOME=str(home / ".local" / "state"),
                         XDG_CACHE_HOME=str(home / ".cache"), XDG_CONFIG_HOME=str(home / ".config"), **extra)


def write_trail(home: Path, roots: list[Path], prompts: int, delivered: list[str]) -> Path:
    """A recall trail of ``prompts`` prompts from ``roots``, each delivering the refs ``delivered``."""
    path = home / ".local" / "state" / "recall-kit" / "trail.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    start = time.time() - prompts
    lines = []
    for n in range(prompts):
        session, t = f"s{n}", round(start + n, 3)
        lines.append({"t": t, "kind": "begin", "session": session, "roots": [str(r) for r in roots], "prompt_chars": 20})
        lines.append({"t": t, "kind": "delivery", "session": session, "handle": 1, "point": "initial", "phase": "fast",
                      "strategy": "heuristic", "refs": delivered, "reason": None, "latency_ms": 1.0})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    path.chmod(0o600)
    return path


def tree_state(*folders: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry below ``folders``: (kind or sha256, mode, mtime_ns), to show nothing changed."""
    state: dict[str, tuple[str, int, int]] = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            info = path.lstat()
            what = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else (
                "link" if path.is_symlink() else "dir")
            state[str(path)] = (what, info.st_mode, info.st_mtime_ns)
    return state
