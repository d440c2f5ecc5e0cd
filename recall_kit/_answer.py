"""Reading a model's answer defensively and checking every reference against the manifest."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from memory_store import MemoryDoc, RecallKitError, parse_json, parse_json_prefix
from recall_kit.limits import MAX_MODEL_DOCS

ANSWER_KEY = "selected_memories"
_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
_MAX_OPENING_BRACES = 8  # how many "{" in leading prose we try before giving up


class AnswerError(RecallKitError, ValueError):
    """The model's text holds no usable ``{"selected_memories": [...]}`` object."""


def decode_object(text: str) -> Any:
    """The JSON value in a model's text: bare, in a code fence, or after some prose; AnswerError if none."""
    text = text.strip()
    try:
        return parse_json(text)
    except ValueError:
        pass
    for fenced in _FENCE.findall(text):
        try:
            return parse_json(fenced.strip())
        except ValueError:
            continue
    start = text.find("{")
    for _ in range(_MAX_OPENING_BRACES):
        if start < 0:
            break
        try:
            return parse_json_prefix(text, start)[0]  # ignores prose after the object
        except ValueError:
            start = text.find("{", start + 1)
    raise AnswerError("answer is not JSON")


def parse_answer(text: str) -> list[Any]:
    """The raw ``selected_memories`` list from the model's text (fences and prose tolerated)."""
    value = decode_object(text)
    if isinstance(value, list):  # a bare list is an unambiguous answer too
        return value
    if not isinstance(value, dict) or ANSWER_KEY not in value:
        raise AnswerError(f"answer has no {ANSWER_KEY!r} key")
    selected = value[ANSWER_KEY]
    if not isinstance(selected, list):
        raise AnswerError(f"{ANSWER_KEY!r} is not a list")
    return selected


@dataclass(frozen=True, slots=True)
class Verdict:
    """What survived validation, in the model's order, and why the rest did not."""

    docs: tuple[MemoryDoc, ...]
    accepted: tuple[str, ...]
    rejected: tuple[tuple[str, str], ...]


def _escapes(ref: str) -> bool:
    parts = ref.replace("\\", "/").split("/")
    return ref.startswith(("/", "\\", "~")) or ".." in parts or (len(ref) > 1 and ref[1] == ":")


def _shown(item: Any) -> str:
    # not cut here: the selector redacts secrets from the whole text first, then cuts
    return item if isinstance(item, str) else json.dumps(item, default=repr)


def validate_selection(raw: list[Any], manifest_docs: Mapping[str, MemoryDoc]) -> Verdict:
    """Accept each answered reference that is a manifest ref, once, up to MAX_MODEL_DOCS; say why the rest are not."""
    docs: list[MemoryDoc] = []
    accepted: list[str] = []
    rejected: list[tuple[str, str]] = []
    for item in raw:
        if not isinstance(item, str):
            rejected.append((_shown(item), f"not a string ({type(item).__name__})"))
            continue
        ref = item.strip().strip("`'\"")
        if ref in accepted:
            rejected.append((_shown(item), "duplicate"))
        elif ref not in manifest_docs:
            reason = "path escapes the memory roots" if _escapes(ref) else "not in the manifest"
            rejected.append((_shown(item), reason))
        elif len(accepted) >= MAX_MODEL_DOCS:
            rejected.append((_shown(item), f"over the limit of {MAX_MODEL_DOCS}"))
        else:
            accepted.append(ref)
            docs.append(manifest_docs[ref])
    return Verdict(tuple(docs), tuple(accepted), tuple(rejected))
