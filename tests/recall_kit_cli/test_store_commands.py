"""`recall-kit list` and `recall-kit watch`, run as real subprocesses."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from store_helpers import WAIT_S, memory, write

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "mem"
    folder.mkdir()
    return folder


def recall_kit(*args: str) -> list[str]:
    script = Path(sys.executable).with_name("recall-kit")
    if script.exists():
        return [str(script), *args]
    return [sys.executable, "-c", "from recall_kit_cli.main import main; main()", *args]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(recall_kit(*args), capture_output=True, text=True, timeout=60)


@pytest.fixture
def two_roots(tmp_path: Path) -> tuple[Path, Path]:
    project, user = tmp_path / "project", tmp_path / "user"
    write(project / "db.md", memory(name="Database", description="Postgres 16 on RDS", type="project"))
    write(project / "broken.md", "no frontmatter\n")
    write(user / "editor.md", memory(name="Editor", description="Uses neovim", extra="keywords: [vim]\n"))
    return project, user


def test_list_json_has_docs_and_errors_and_exits_0(two_roots: tuple[Path, Path]) -> None:
    project, user = two_roots
    result = run("list", "--root", str(project), "--root", str(user), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [(d["scope"], d["path"], d["type"], d["name"]) for d in data["docs"]] == [
        ("project", "db.md", "project", "Database"),
        ("user", "editor.md", "user", "Editor"),
    ]
    assert data["docs"][1]["description"] == "Uses neovim" and data["docs"][1]["keywords"] == ["vim"]
    assert [(e["path"], e["reason"].split(" (")[0]) for e in data["errors"]] == [("broken.md", "missing frontmatter")]


def test_list_text_shows_each_doc_and_each_skipped_file(two_roots: tuple[Path, Path]) -> None:
    project, user = two_roots
    result = run("list", "--root", str(project), "--root", str(user))
    assert result.returncode == 0
    assert re.search(r"^  project +project/db\.md +Database - Postgres 16 on RDS$", result.stdout, re.M)
    assert re.search(r"^  user +user/editor\.md +Editor - Uses neovim$", result.stdout, re.M)
    assert "project/broken.md: missing frontmatter" in result.stdout


def test_list_missing_root_is_one_line_on_stderr_and_exit_2(tmp_path: Path) -> None:
    result = run("list", "--root", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.strip() == f"recall-kit: memory root does not exist: {tmp_path / 'nope'}"
    assert result.stdout == ""


class WatchProcess:
    """A running `recall-kit watch --json`, its stdout read line by line on a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            recall_kit("watch", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next(self) -> dict:
        return json.loads(self.lines.get(timeout=WAIT_S))

    def until(self, predicate) -> dict:
        while True:
            event = self.next()
            if predicate(event):
                return event

    def stop(self, sig: int) -> tuple[int, str]:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=WAIT_S)
        self._reader.join(timeout=WAIT_S)
        assert self.proc.stderr is not None
        return code, self.proc.stderr.read()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_watch_prints_one_json_line_per_snapshot_and_exits_0_on_signal(root: Path, sig: int) -> None:
    write(root / "a.md", memory(name="A"))
    watch = WatchProcess("--root", str(root), "--json", "--debounce-ms", "20")
    try:
        first = watch.next()
        assert first == {"version": 1, "docs": 1, "errors": [], "changed": ["mem/a.md"], "removed": []}
        write(root / "b.md", memory(name="B"))
        added = watch.until(lambda e: "mem/b.md" in e["changed"])
        assert added["docs"] == 2 and added["version"] >= 2
        (root / "a.md").unlink()
        removed = watch.until(lambda e: e["removed"])
        assert removed["removed"] == ["mem/a.md"] and removed["docs"] == 1
        write(root / "bad.md", "nope\n")
        errored = watch.until(lambda e: e["errors"])
        assert errored["errors"][0]["path"] == "bad.md"
    finally:
        code, stderr = watch.stop(sig)
    assert code == 0
    assert "Traceback" not in stderr


def test_watch_missing_root_exits_2(tmp_path: Path) -> None:
    result = run("watch", "--root", str(tmp_path / "nope"))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "does not exist" in result.stderr
