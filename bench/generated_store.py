"""A deterministic generated memory store on disk: markdown files of about 2 KB each.

    .venv/bin/python bench/generated_store.py DEST --count 2000 [--seed 7] [--enriched]

The words follow a Zipf distribution over English words, pseudo-words and code identifiers
(snake_case, camelCase, dotted.names, kebab-case), so the tokenizer sees the mix a developer's
memories hold: a vocabulary far smaller than the token stream, with a long tail. ``--enriched``
also writes the root's enrichment sidecar as write-time enrichment would: 12-20 search keys and
3 example requests per memory, keyed by each file's path and SHA-256.
"""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path

from memory_store import format_memory

_ENGLISH = """
    the of and to in is it that for on with as was be at by this from or have not are but
    deploy deployment server servers database migration migrations schema index indexes query
    queries cache caching latency timeout retry retries worker workers queue queues build builds
    release releases branch branches review reviews commit commits test tests testing fixture
    fixtures config configuration secret secrets token tokens user users session sessions
    request requests response responses error errors warning warnings logging logs metric
    metrics alert alerts dashboard dashboards backup backups restore storage bucket buckets
    container containers image images cluster clusters node nodes service services endpoint
    endpoints payment payments invoice invoices customer customers account accounts report
    reports prefer prefers preferred always never usually before after running ran runs
    installed installing install package packages dependency dependencies version versions
    upgrade upgraded upgrading pinned pinning lock locked locking format formatting lint
    linting type typing typed strict module modules function functions class classes method
    methods argument arguments option options flag flags script scripts job jobs pipeline
    pipelines stage stages environment environments production staging local remote team
    owner owners decision decisions because instead should must avoid avoided keep kept
    document documented documentation meeting meetings weekly daily monthly quarter plan
    planned planning estimate estimates priority priorities ticket tickets incident incidents
""".split()
_SYLLABLES = "ka ri to na mo se lu pe vi da ro gan tel mar sin dor bel quo fir zen pra lo ki tu ne sa po mi ve ho".split()
_TYPES = ("user", "feedback", "project", "reference")
ZIPF_EXPONENT = 1.07  # word frequencies in English text follow roughly 1 / rank^1.07
PSEUDO_WORDS = 12_000
IDENTIFIERS = 4_000
TARGET_BYTES = 2_150  # 4.3 MB per 2,000 memories, the store the slow cold start was measured on


def vocabulary(seed: int) -> list[str]:
    """English words first, then pseudo-words and identifiers, in a seeded order (most frequent first)."""
    rng = random.Random(seed)
    pseudo: dict[str, None] = {}
    while len(pseudo) < PSEUDO_WORDS:
        pseudo["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))] = None
    parts = list(pseudo)[:2000] + _ENGLISH[40:]
    identifiers: dict[str, None] = {}
    while len(identifiers) < IDENTIFIERS:
        a, b = rng.choice(parts), rng.choice(parts)
        style = rng.randrange(5)
        if style == 0:
            word = f"{a}_{b}"
        elif style == 1:
            word = a + b[:1].upper() + b[1:]
        elif style == 2:
            word = f"{a}.{b}.{rng.choice(parts)}"
        elif style == 3:
            word = f"{a}-{b}"
        else:
            word = f"{a.upper()}_{b.upper()}"
        identifiers[word] = None
    tail = list(pseudo) + list(identifiers)
    rng.shuffle(tail)
    return list(dict.fromkeys(_ENGLISH + tail))


def memory_text(i: int, rng: random.Random, words: list[str], cumulative: list[float]) -> str:
    """One memory file of about TARGET_BYTES: frontmatter, prose and bullet lines with code spans."""

    def some(count: int) -> list[str]:
        return rng.choices(words, cum_weights=cumulative, k=count)

    name = " ".join(some(rng.randint(3, 6))).capitalize()
    description = " ".join(some(rng.randint(8, 16)))
    keywords = list(dict.fromkeys(some(rng.randint(2, 6))))
    lines: list[str] = []
    size = 0
    while size < TARGET_BYTES - 250:
        sentence = some(rng.randint(6, 18))
        if rng.random() < 0.4:
            k = rng.randrange(len(sentence))
            sentence[k] = f"`{sentence[k]}`"
        line = ("- " if rng.random() < 0.5 else "") + " ".join(sentence).capitalize() + "."
        lines.append(line)
        size += len(line) + 1
    body = "\n" + "\n".join(lines)  # a blank line after the frontmatter, as people write it
    return format_memory(name=name, description=description, type=_TYPES[i % 4], body=body, keywords=keywords)


def write_store(dest: Path, count: int, seed: int = 7) -> list[Path]:
    """Write ``count`` memories under ``dest`` in folders of at most 100; the same seed, the same bytes."""
    words = vocabulary(seed)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) ** ZIPF_EXPONENT for rank in range(len(words))))
    rng = random.Random(seed + 1)
    paths = []
    for i in range(count):
        path = dest / f"area-{i // 100:03d}" / f"memory-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(memory_text(i, rng, words, cumulative), encoding="utf-8")
        paths.append(path)
    return paths


def write_sidecar(dest: Path, paths: list[Path], seed: int = 7) -> Path:
    """The enrichment sidecar for the memories at ``paths`` (under ``dest``), from a vocabulary twice the store's."""
    import hashlib

    from memory_store import EnrichmentEntry, sidecar_path, write_enrichment
    from recall_kit_bench import enrichment_vocabulary, generated_enrichment

    enrichments = generated_enrichment(len(paths), enrichment_vocabulary(vocabulary(seed)), seed + 2)
    entries = [
        EnrichmentEntry(
            path.relative_to(dest).as_posix(), hashlib.sha256(path.read_bytes()).hexdigest(),
            enrichment.keywords, enrichment.usage_scenarios, "generated",
        )
        for path, enrichment in zip(paths, enrichments)
    ]
    return write_enrichment(sidecar_path(dest), entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dest", type=Path)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--enriched", action="store_true", help="also write the root's enrichment sidecar")
    args = parser.parse_args()
    paths = write_store(args.dest, args.count, args.seed)
    total = sum(p.stat().st_size for p in paths)
    print(f"{len(paths)} memories, {total / 1e6:.1f} MB under {args.dest}")
    if args.enriched:
        sidecar = write_sidecar(args.dest, paths, args.seed)
        print(f"enrichment sidecar: {sidecar.stat().st_size / 1e6:.1f} MB at {sidecar}")


if __name__ == "__main__":
    main()
