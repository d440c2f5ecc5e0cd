"""CLI tests: the installed `recall-kit` run as a subprocess in an empty folder with a clean
environment, on examples/memories and on a small dataset written to tmp_path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


from cli_support import RunCli, make_dataset, run_recall_kit


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return make_dataset(tmp_path / "mini")


@pytest.fixture
def run_cli(tmp_path: Path) -> RunCli:
    """`recall-kit ARGS` in an empty folder (no recall-kit.toml) with a clean environment."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[Any]:
        return run_recall_kit(*args, cwd=cwd or workdir, env=env)

    return run
