"""`recall-kit watch` in text mode: a summary first line, skipped files named (capped), a sane ref
for a root that went away."""

from __future__ import annotations

import json
import queue
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from cli_support import RECALL_KIT, clean_environ

WAIT_S = 30.0


class Watch:
    """A running `recall-kit watch`, its stdout read line by line on a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([str(RECALL_KIT), "watch", "--debounce-ms", "20", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_environ())
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def take(self, n: int) -> list[str]:
        return [self.lines.get(timeout=WAIT_S) for _ in range(n)]

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        assert self.proc.wait(timeout=WAIT_S) == 0
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def _store(root: Path, good: int, bad: int) -> None:
    (root / "notes").mkdir(parents=True)
    for i in range(good):
        (root / "notes" / f"m{i:03}.md").write_text(f"---\nname: M{i}\ndescription: memory {i}\ntype: user\n---\n")
    for i in range(bad):
        (root / "notes" / f"bad{i:02}.md").write_text("no frontmatter\n")


def test_the_first_line_summarises_and_skipped_files_are_named_up_to_ten(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    _store(root, good=300, bad=13)
    watch = Watch("--root", str(root))
    try:
        lines = watch.take(12)
        (root / "notes").rename(root / ".gone")  # one move: every memory leaves in one snapshot
        removal = watch.take(1)[0]
    finally:
        assert "Traceback" not in watch.stop()
    assert lines[0] == f"v1: 300 memories, 13 skipped in mem ({root})"
    assert [line.split(":")[0] for line in lines[1:11]] == [f"  skipped mem/notes/bad{i:02}.md" for i in range(10)]
    assert all(line.endswith(": missing frontmatter (the file must start with a '---' line)") for line in lines[1:11])
    assert lines[11] == "  ... and 3 more skipped (recall-kit validate names all)"
    assert removal.startswith("v2: 0 memories, 0 skipped; removed mem/notes/m000.md, ")
    assert removal.endswith(", mem/notes/m004.md (+295 more)")


def test_a_root_that_goes_away_is_named_by_its_label_with_its_path(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    _store(root, good=2, bad=0)
    watch = Watch("--root", str(root))
    json_watch = Watch("--root", str(root), "--json")
    try:
        assert watch.take(1)[0].startswith("v1: 2 memories, 0 skipped in mem")
        json_watch.take(1)
        shutil.rmtree(root)
        line = watch.take(1)[0]
        while "0 memories" not in line:
            line = watch.take(1)[0]
        missing = watch.take(1)[0]
        event = json.loads(json_watch.take(1)[0])
        while event["docs"]:
            event = json.loads(json_watch.take(1)[0])
    finally:
        watch.stop()
        json_watch.stop()
    assert line.startswith("v") and "0 memories, 1 skipped; removed mem/notes/m000.md, mem/notes/m001.md" in line
    assert missing == f"  skipped mem ({root}): root folder does not exist"
    assert event["errors"] == [{"ref": "mem", "scope": "mem", "path": str(root), "reason": "root folder does not exist"}]
