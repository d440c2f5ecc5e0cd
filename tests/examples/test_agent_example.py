"""examples/agent_loop.py runs without any model (--scripted), and a missing root is one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_support import EXAMPLES, REPO, clean_environ

EXAMPLE = REPO / "examples" / "agent_loop.py"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True,
                          env=clean_environ(), cwd=cwd, timeout=60)


def test_the_agent_example_runs_against_the_scripted_server_and_shows_the_delivery(tmp_path: Path) -> None:
    result = _run("--root", str(EXAMPLES), "--scripted", "-v", "How do I deploy ledgerline to production?",
                  cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "(scripted agent reply: no model was asked)\n"
    assert "[memory fast/heuristic at initial" in result.stderr
    assert "memories/projects/ledgerline/deploy.md" in result.stderr


def test_the_agent_example_reports_a_missing_root_in_one_line(tmp_path: Path) -> None:
    result = _run("--root", str(tmp_path / "absent"), "--scripted", "hello", cwd=tmp_path)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == f"agent_loop: memory root does not exist: {tmp_path / 'absent'}"
