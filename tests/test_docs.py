"""The README and docs/: short enough to read to the end, and every link leads somewhere."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from cli_support import assert_one_line_error, clean_environ

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_the_readme_reads_to_the_end() -> None:
    assert len((REPO / "README.md").read_text().splitlines()) < 250


def test_the_readme_opens_with_the_two_commands_ci_and_newcomers_run() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    assert "recall-kit query" in blocks[0] and "--root examples/memories" in blocks[0]
    assert blocks[1].endswith(".venv/bin/python -m pytest")
    ci = (REPO / ".ci" / "run").read_text()
    for step in blocks[1].split(" && ")[1:]:  # CI runs each step of the README's command after the venv
        assert step.replace(" -q ", " --quiet --disable-pip-version-check ") in ci, step


def test_the_readme_mcp_line_installs_an_extra_of_this_clone_and_the_cli_names_it() -> None:
    readme = (REPO / "README.md").read_text()
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    mcp_line = next(line for line in readme.splitlines() if line.startswith("**MCP server**"))
    install = re.search(r"`(\.venv/bin/pip install -q -e '\.\[(\w+)\]')`", mcp_line)
    assert install is not None and install.group(2) == "mcp" and "mcp" in extras, mcp_line  # not on PyPI: the clone's
    # without the SDK, `recall-kit mcp` names that same install ("mcp" made unimportable in that process alone)
    code = "import sys; sys.modules['mcp'] = None; from recall_kit_cli.main import main; main()"
    result = subprocess.run([sys.executable, "-c", code, "mcp", "--root", str(REPO / "examples" / "memories")],
                            capture_output=True, text=True, timeout=120, env=clean_environ())
    assert_one_line_error(result, "needs the mcp extra", "pip install -e '.[mcp]' in recall-kit's folder")


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
