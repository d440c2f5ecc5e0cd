"""What the writing note (the request for keywords and usage_scenarios, with the store's keyword
vocabulary) adds to an agent's context, in characters, UTF-8 bytes and tokens.

    .venv/bin/python bench/bench_writing_note.py [--json]

Tokens are counted with SmolLM2-135M's own tokenizer (a byte-level BPE of 49,152 tokens, from the
GGUF file the `real-model` extra ships; llama.cpp loads its vocabulary only). Claude's and Qwen's
tokenizers are not public offline, so the figures are another BPE's; the bound holds for any
byte-level BPE: no token holds less than one byte, so the note never takes more tokens than its
UTF-8 bytes. Cases: the note without a vocabulary; with each dataset's own vocabulary (its
memories' keywords, frontmatter and sidecar, as the daemon builds it); the widest ASCII vocabulary
the bounds let through; and the worst case, terms of 4-byte characters filling the bound.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from memory_store import MemoryStore
from recall_kit import keyword_vocabulary, writing_note
from recall_kit.limits import WRITING_NOTE_MAX_CHARS
from recall_kit.testing import smollm2_gguf_path

DATASETS = Path(__file__).resolve().parent / "datasets"
LOCOMO = Path("/work/shared/datasets/locomo-dev")


def _tokenizer():  # type: ignore[no-untyped-def]
    from llama_cpp import Llama

    model = Llama(model_path=str(smollm2_gguf_path()), vocab_only=True, verbose=False)
    return lambda text: len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def _dataset_vocabulary(memories: Path, enrichment: Path | None = None) -> tuple[str, ...]:
    label = memories.name
    options = {"enrichment": {label: enrichment}} if enrichment is not None else {}
    with MemoryStore.open((label, memories), watch=False, **options) as store:
        return keyword_vocabulary(store.snapshot())


def cases() -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {"no vocabulary": ()}
    for name in ("agent-memories", "multilingual", "hard-cases"):
        found[f"{name} vocabulary"] = _dataset_vocabulary(DATASETS / name / "memories")
    if (LOCOMO / "memories").is_dir():
        found["locomo-dev vocabulary (sidecar only)"] = _dataset_vocabulary(
            LOCOMO / "memories", DATASETS / "locomo-dev-enrichment" / "enrichment.jsonl")
    found["widest ASCII (bound-filling)"] = tuple(f"t{i}" for i in range(1000))
    found["worst case: 4-byte characters"] = tuple("\U0001f600\U0001f680\U0001f9ea" * 3 + f"{i}" for i in range(1000))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    count = _tokenizer()
    rows = []
    for name, vocabulary in cases().items():
        note = writing_note(vocabulary)
        terms = len(note.splitlines()[1].split('", "')) if "\n" in note else 0
        rows.append({"case": name, "terms": terms, "chars": len(note), "bytes": len(note.encode("utf-8")),
                     "tokens": count(note)})
    if args.json:
        print(json.dumps({"max_chars": WRITING_NOTE_MAX_CHARS, "rows": rows}))
        return
    print(f"{'case':<40} {'terms':>5} {'chars':>6} {'bytes':>6} {'tokens':>6}")
    for row in rows:
        print(f"{row['case']:<40} {row['terms']:>5} {row['chars']:>6} {row['bytes']:>6} {row['tokens']:>6}")
    print(f"bound: {WRITING_NOTE_MAX_CHARS} characters (WRITING_NOTE_MAX_CHARS); tokens never exceed UTF-8 bytes")


if __name__ == "__main__":
    main()
