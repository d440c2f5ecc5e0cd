"""What a writer cannot read is not missing: a memory in a folder that cannot be searched for a moment
keeps its sidecar entry and its learned words, and a sidecar or learned file that cannot be opened is
not replaced by one holding only the new entry. Run as a second user: root reads everything."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from throwaway_user import folder_for_anyone, python_for_anyone, throwaway_user

import memory_store

AS_OWNER = r"""
import hashlib, json, os, sys
from memory_store import EnrichmentEntry, LearningUpdate, MemoryStore, MemoryStoreError
root, case = sys.argv[1], sys.argv[2]
sha = lambda rel: hashlib.sha256(open(os.path.join(root, rel), "rb").read()).hexdigest()
with MemoryStore.open(root, watch=False) as store:
    for rel in ("project/a.md", "user/b.md"):
        store.record_enrichment("mem", [EnrichmentEntry(rel, sha(rel), ("kw " + rel[0],))])
        store.record_learning("mem", [LearningUpdate(rel, keys=("learnt" + rel[0],))])
side, learned = os.path.join(root, ".recall-kit", "enrichment.jsonl"), os.path.join(root, ".recall-kit", "learned.jsonl")
locked = [os.path.join(root, "user")] if case == "folder" else [side, learned]
for path in locked:
    os.chmod(path, 0)
errors = []
with MemoryStore.open(root, watch=False) as store:
    for write in (lambda: store.record_enrichment("mem", [EnrichmentEntry("project/a.md", sha("project/a.md"), ("again",))]),
                  lambda: store.record_learning("mem", [LearningUpdate("project/a.md", keys=("again",))])):
        try:
            write()
        except MemoryStoreError as exc:
            errors.append(str(exc))
for path in locked:
    os.chmod(path, 0o700)
print(json.dumps({"errors": errors, "sidecar": open(side).read(), "learned": open(learned).read()}))
"""


def _memory(root: Path, rel: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {rel}\ndescription: about {rel}\ntype: {rel.split('/')[0]}\n---\nbody\n")


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder outside pytest's private tmp_path, where another user's files can live."""
    with folder_for_anyone("recall-kit-unreadable-") as made:
        yield made


@pytest.mark.parametrize("case", ["folder", "files"])
def test_what_cannot_be_read_for_a_moment_loses_nothing(base: Path, case: str) -> None:
    root = base / "mem"
    _memory(root, "project/a.md")
    _memory(root, "user/b.md")
    package = Path(memory_store.__file__).parent.parent
    site = next(p for p in sys.path if p.endswith("site-packages"))
    with throwaway_user() as other:
        for path in [base, root, *root.rglob("*")]:
            os.chown(path, other.pw_uid, other.pw_gid)
        run = subprocess.run([python_for_anyone(), "-c", AS_OWNER, str(root), case], capture_output=True, text=True,
                             user=other.pw_uid, group=other.pw_gid, extra_groups=[], cwd="/", timeout=120,
                             env={"PATH": "/usr/bin:/bin", "HOME": str(base), "PYTHONPATH": f"{package}:{site}"})
        for path in [base, root, *root.rglob("*")]:
            os.chown(path, os.getuid(), os.getgid())
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    if case == "folder":  # user/ could not be searched: b.md was there all along
        assert seen["errors"] == []
        assert '"user/b.md"' in seen["sidecar"] and '"user/b.md"' in seen["learned"]
        assert '"again"' in seen["sidecar"] and "again" in seen["learned"]
    else:  # neither file could be opened: each write is refused in one line, and both are as they were
        assert [error.split(" is not updated: ")[1] for error in seen["errors"]] == [
            "unreadable (Permission denied); its entries would be lost (nothing written)"] * 2
        assert '"user/b.md"' in seen["sidecar"] and '"again"' not in seen["sidecar"]
        assert '"user/b.md"' in seen["learned"] and "again" not in seen["learned"]
