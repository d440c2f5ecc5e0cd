"""Helpers for the CLI tests: the installed `recall-kit` as a subprocess, a clean environment,
one-line error checks, and a small eval dataset."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import os
import select
import shutil
import signal
import struct
import tempfile
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from recall_kit_bench import write_eval_dataset

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "memories"
RECALL_KIT = Path(sys.executable).with_name("recall-kit")
REPORT_KEYS = {
    "queries", "answerable", "negatives", "strict_delivery", "loose_delivery", "negative_silence", "precision",
}

MEMORIES = {
    "db/postgres.md": ("Postgres setup", "atlas stores trips in PostgreSQL behind pgbouncer",
                       "Run alembic upgrade head for migrations."),
    "db/redis.md": ("Redis cache", "atlas caches sessions in Redis with a one hour TTL", "Flush with care."),
    "deploy.md": ("Deploying atlas", "atlas deploys to kubernetes with helm from the main branch",
                  "helm upgrade atlas ./chart"),
    "editor.md": ("Editor", "Neovim with lazy.nvim and tabs of width 4", "No format on save."),
    "tea.md": ("Afternoon routine", "green tea at four, never coffee after noon", "Sencha, 80 degrees."),
}
QUERIES = [
    ("q1", "atlas pgbouncer postgres settings", ["db/postgres.md"], "lexical"),
    ("q2", "helm deploy of atlas to kubernetes", ["deploy.md"], "lexical"),
    ("q3", "what should I drink later today", ["tea.md"], "semantic"),
    ("q4", "which neovim plugin manager do I use", ["editor.md"], "lexical"),
    ("q5", "sourdough starter feeding schedule", [], "negative"),
]


def make_dataset(root: Path) -> Path:
    return write_eval_dataset(root, MEMORIES, QUERIES)


def run_recall_kit(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `recall-kit ARGS` (the installed console script) with a clean environment by default."""
    return subprocess.run(
        [str(RECALL_KIT), *args], capture_output=True, text=True, timeout=120,
        env=env if env is not None else clean_environ(), cwd=cwd,
    )


CACHE_DIR = tempfile.mkdtemp(prefix="recall-kit-cli-tests-cache-")  # never the user's own cache
atexit.register(shutil.rmtree, CACHE_DIR, True)


def clean_environ(**extra: str) -> dict[str, str]:
    """The current environment without any recall-kit or endpoint configuration, with the index
    cache in a temporary folder, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RECALL_KIT_", "OPENAI_"))}
    env["RECALL_KIT_CACHE_DIR"] = CACHE_DIR
    env.update(extra)
    return env


RunCli = Callable[..., subprocess.CompletedProcess[str]]


def json_out(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0]


@contextlib.contextmanager
def sigint_as_a_terminal_gives_it() -> Iterator[None]:
    """Children started inside get Ctrl-C (SIGINT) at its default, as a terminal's foreground job does.

    A runner that ignores SIGINT (the suite run as a background job of a shell without job control)
    hands that to every child, and Python keeps an ignored SIGINT ignored: asyncio.run then installs
    no Ctrl-C handler, and a SIGINT a test sends is lost (enrich ran on, query waited out its model).
    A handler, unlike an ignore, is reset to the default when the child starts."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def interruptible(args: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(args, **popen)`` for a test that sends the child SIGINT."""
    with sigint_as_a_terminal_gives_it():
        return subprocess.Popen(args, **popen)


@dataclass
class PtyResult:
    returncode: int
    output: str  # stdout and stderr as the terminal showed them, "\r\n" turned back into "\n"


def run_in_pty(
    *args: str, cwd: Path, env: dict[str, str] | None = None, width: int = 80,
    interrupt_after: str | None = None, answer: bytes | None = None, timeout: float = 60,
) -> PtyResult:
    """`recall-kit ARGS` on a pseudo-terminal of ``width`` columns; SIGINT once ``interrupt_after``
    has been shown; ``answer`` typed once the first output arrives."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, width, 0, 0))
    env = dict(env if env is not None else clean_environ())
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    proc = interruptible([str(RECALL_KIT), *args], stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
            seen = b"".join(chunks)
            if answer is not None:
                os.write(master, answer)
                answer = None
            if interrupt_after is not None and interrupt_after.encode() in seen:
                proc.send_signal(signal.SIGINT)
                interrupt_after = None
        returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    text = b"".join(chunks).decode("utf-8", "backslashreplace").replace("\r\n", "\n")
    return PtyResult(returncode, text)
