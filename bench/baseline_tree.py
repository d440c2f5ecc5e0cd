"""An older revision's ``recall_kit`` and ``memory_store``, exported from git for a side-by-side run."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def export_baseline(revision: str, dest: Path) -> Path:
    """Write ``revision``'s two engine packages under ``dest`` (put it first on PYTHONPATH); returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", revision, "recall_kit", "memory_store"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest
