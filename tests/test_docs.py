"""The README and docs/: short enough to read to the end, and every link leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_reads_to_the_end() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) < 250


def test_the_readme_opens_with_the_two_commands_ci_and_newcomers_run() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    assert "recall-kit query" in blocks[0] and "--root examples/memories" in blocks[0]
    assert blocks[1].endswith(".venv/bin/python -m pytest")
    assert ".venv/bin/python -m pytest" in (REPO / ".ci" / "run").read_text()  # CI runs the README's command


def test_every_relative_link_resolves_and_none_leaves_the_repo() -> None:
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = (doc.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() or REPO not in path.parents:
                broken.append(f"{doc.relative_to(REPO)}: {target}")
    assert broken == []
