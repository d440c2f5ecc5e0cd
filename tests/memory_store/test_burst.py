"""After any burst of changes the watched store settles on exactly what a fresh scan sees."""

from __future__ import annotations

import os
import random
import shutil
import time
from pathlib import Path
from typing import Callable

import pytest
from store_helpers import fingerprint, memory, wait_until, write

from memory_store import MemoryStore, atomic_write

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

Open = Callable[..., MemoryStore]


def fresh_scan(root: Path):
    with MemoryStore.open(root, watch=False) as store:
        return fingerprint(store.snapshot())


@pytest.mark.parametrize("seed", [2024, 99])
def test_burst_of_writes_renames_and_deletes_settles_to_a_fresh_scan(
    root: Path, open_store: Open, seed: int
) -> None:
    rng = random.Random(seed)
    folders = [root / name for name in ("", "a", "b", "a/deep")]
    files = [write(rng.choice(folders) / f"m{i:03d}.md", memory(name=f"m{i}")) for i in range(200)]
    store = open_store(root, debounce_ms=50)
    assert len(store.snapshot().docs) == 200
    started = time.monotonic()
    for n in range(1000):
        path = rng.choice(files)
        op = rng.random()
        path.parent.mkdir(parents=True, exist_ok=True)  # its folder may have been moved away
        if op < 0.55:
            write(path, memory(name=f"w{n}", description=f"revision {n}"))
        elif op < 0.70:
            atomic_write(path, memory(name=f"atomic {n}"))
        elif op < 0.80:
            target = rng.choice(folders) / f"r{n:04d}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            if path.exists():
                os.replace(path, target)
                files[files.index(path)] = target
        elif op < 0.90:
            path.unlink(missing_ok=True)
        elif op < 0.94:
            write(path, "---\nname: broken\n")  # bad files must match too
        elif op < 0.95:
            if (root / "b").exists():
                (root / "b").rename(root / f"b-moved-{n}")  # mid-burst; later writes to b/ recreate it
        else:
            temp = write(path.with_name(path.name + ".tmp"), memory(name=f"editor {n}"))
            os.replace(temp, path)  # an editor's save
    burst_s = time.monotonic() - started
    shutil.move(str(root / "a"), str(root / "a-moved"))  # a whole folder moves at the end of the burst
    expected = fresh_scan(root)
    settled = wait_until(store, lambda s: fingerprint(s) == expected, timeout=20)
    assert fingerprint(settled) == fresh_scan(root)
    assert burst_s < 5  # the burst really was a burst (about a second on the 2-core box)


def test_burst_with_folders_created_and_deleted_settles(root: Path, open_store: Open) -> None:
    rng = random.Random(7)
    store = open_store(root, debounce_ms=30)
    for n in range(60):
        folder = root / f"f{rng.randint(0, 5)}"
        if rng.random() < 0.2 and folder.exists():
            shutil.rmtree(folder)
            continue
        for i in range(rng.randint(1, 8)):
            write(folder / f"sub{i % 2}" / f"x{i}.md", memory(name=f"{n}-{i}"))
    expected = fresh_scan(root)
    wait_until(store, lambda s: fingerprint(s) == expected, timeout=20)
