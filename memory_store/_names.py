"""How a memory's ref is shown where only text can go: a byte of its file name that is not UTF-8."""

from __future__ import annotations

import re

_SHOWN_BYTE = re.compile(r"\\x([89a-f][0-9a-f])")


def shown_ref(ref: str) -> str:
    """``ref`` with each byte of the file name that was not UTF-8 (kept as a surrogate escape, as the
    store names the file) written ``\\xNN``: text UTF-8, JSON and a terminal can carry. ``given_ref``
    reads it back."""
    return ref.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def given_ref(text: str) -> str:
    """The ref ``shown_ref`` wrote as ``text``: each ``\\xNN`` of a byte 0x80-0xFF as that byte again."""
    return _SHOWN_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), text)
