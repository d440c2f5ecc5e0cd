"""Cleaning untrusted terms and paths: what the enrichment sidecar and the learned log share.

Both files are written by models and read back as untrusted: a term loses markup, control and
format characters, and the work of cleaning is bounded whatever the input's size.
"""

from __future__ import annotations

import re
import unicodedata

_TAG = re.compile(r"<[^<>]*>")
# Control, format (zero-width, bidi), surrogate, private-use, unassigned and separator characters.
DROP_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs"})
INSPECT_FACTOR = 8  # look at no more than this many times the items or characters that can be kept


def clean_terms(values: object, max_items: int, max_len: int) -> tuple[str, ...]:
    """Untrusted terms made safe: strings only, markup and control characters removed, whitespace
    folded, each cut to ``max_len`` characters, case-insensitive duplicates dropped, at most ``max_items``.

    One string counts as one item; anything that is not a string is dropped. The work is
    bounded by ``max_items`` and ``max_len``, whatever the input's size.
    """
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, (list, tuple)):
        return ()
    terms: list[str] = []
    seen: set[str] = set()
    for value in values[: max_items * INSPECT_FACTOR]:
        if len(terms) >= max_items:
            break
        if not isinstance(value, str):
            continue
        term = _clean_text(value, max_len)
        key = term.casefold()
        if term and key not in seen:
            seen.add(key)
            terms.append(term)
    return tuple(terms)


def _clean_text(value: str, max_len: int) -> str:
    text = value[: max_len * INSPECT_FACTOR]
    if text.isascii() and text.isprintable() and "<" not in text and ">" not in text:
        return " ".join(text.split())[:max_len].rstrip()  # what _clean_any gives, without a look at each character
    return _clean_any(text, max_len)


def _clean_any(text: str, max_len: int) -> str:
    text = unicodedata.normalize("NFKC", text)  # NFKC: full-width <> become <>
    text = _TAG.sub(" ", text)
    text = "".join(" " if ch in "<>" or unicodedata.category(ch) in DROP_CATEGORIES else ch for ch in text)
    return " ".join(text.split())[:max_len].rstrip()


def valid_path(path: object) -> str:
    """``path`` when it is a POSIX path relative to a root (a sidecar line's key); else ValueError."""
    if not isinstance(path, str) or not path or len(path) > 4096:
        raise ValueError("'path' must be a non-empty relative path")
    parts = path.split("/")
    if path.startswith("/") or "\x00" in path or any(part in ("", ".", "..") for part in parts):
        raise ValueError("'path' must be a POSIX path relative to the root, without '.' or '..'")
    return path
