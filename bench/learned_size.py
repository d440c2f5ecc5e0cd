"""Bytes per memory after 10,000 learned prompts (7 in 10 teach keys, 3 a suppressor) on a
generated store of 1,000 memories: what the learned file's bounds keep it to.

    .venv/bin/python bench/learned_size.py
"""

import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generated_store import vocabulary, write_store  # noqa: E402

from memory_store import LEARNED_PATH, LearningUpdate, MemoryStore  # noqa: E402
from recall_kit import learnable_words  # noqa: E402

with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp) / "m"; paths = write_store(root, 1000, 7)
    rels = [p.relative_to(root).as_posix() for p in paths]
    rng = random.Random(1); words = vocabulary(7)[:5000]
    learned = root / LEARNED_PATH
    with MemoryStore.open(root, watch=False) as store:
        label = next(iter(store.snapshot().docs.values())).scope
        largest = 0
        for i in range(10_000):  # one update a prompt, as the Learner records them
            w = learnable_words(" ".join(rng.sample(words, rng.randint(4, 10))))
            rel = rng.choice(rels)
            update = LearningUpdate(rel, keys=w.keys, release=w.words) if rng.random() < 0.7 else LearningUpdate(rel, suppress=w.words)
            store.record_learning(label, [update])
            largest = max(largest, learned.stat().st_size)
        size = learned.stat().st_size
        entries = len(store.learned_entries(label))
        store.record_learning(label, [LearningUpdate(rels[0], keys=("zzcompact",))])
        store.root(label).record_learning([], live_paths=set(rels) - {rels[0]})  # a removal compacts the file
        compacted = learned.stat().st_size
    print(f"10,000 learned prompts over 1,000 memories, {entries} entries: the log is {size} bytes "
          f"({size / 1000:.0f} a memory; at most {largest} on the way), {compacted} compacted "
          f"({compacted / 1000:.0f} a memory)")
