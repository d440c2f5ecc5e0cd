"""Small text helpers shared by the manifest and the rendered block."""

from __future__ import annotations

_AGE_UNITS = (("y", 365 * 86_400), ("mo", 30 * 86_400), ("d", 86_400), ("h", 3_600))


def one_line(text: str) -> str:
    """Untrusted text as a single printable line: no line breaks, control or format characters."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    return " ".join(text.split())


def format_age(seconds: float, *, compact: bool = True) -> str:
    """An age: compact (``5min``, ``3h``, ``12d``, ``4mo``, ``2y``) for the model's manifest,
    or in whole days (``today``, ``1 day ago``, ``3 days ago``) for the rendered block."""
    seconds = max(0.0, seconds)
    if not compact:
        days = int(seconds // 86_400)
        return "today" if days == 0 else "1 day ago" if days == 1 else f"{days} days ago"
    for unit, size in _AGE_UNITS:
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds // 60)}min"
