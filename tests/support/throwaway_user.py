"""A second user for tests of what another user can do: created with useradd, removed after."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


@contextmanager
def throwaway_user() -> Iterator[pwd.struct_passwd]:
    """A fresh user with no home and no login shell; skips with the reason when one cannot be made."""
    if os.getuid() != 0:
        pytest.skip("creating a second user needs root")
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        pytest.skip("useradd/userdel are not available to create a second user")
    name = f"rk-{uuid.uuid4().hex[:12]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True, capture_output=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def python_for_anyone() -> str:
    """An interpreter another user may run (the venv may sit under root's home)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        if os.path.exists(candidate) and os.stat(candidate).st_mode & stat.S_IXOTH:
            return candidate
    pytest.fail("no world-executable python3 for the other user's process")


@contextmanager
def folder_for_anyone(prefix: str) -> Iterator[Path]:
    """A fresh folder outside pytest's private tmp_path (mode 0755), where another user's files can live."""
    base = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(base, 0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)
