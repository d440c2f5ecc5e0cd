"""How a memory's ref is shown where only text can go: a byte of its file name that is not UTF-8."""

from __future__ import annotations

import re

# A run of backslashes that reads as a byte's \xNN once shown: before "x" and two hex digits of a byte
# 0x80-0xFF, or before such a byte itself.
_RUN_BEFORE_BYTE = re.compile(r"\\+(?=x[89a-f][0-9a-f]|[\udc80-\udcff])")
_SHOWN_BYTE = re.compile(r"(\\+)x([89a-f][0-9a-f])")
_BYTE = re.compile("[\udc80-\udcff]")  # a byte 0x80-0xFF of a name that is not UTF-8, as os.fsdecode keeps it


def shown_ref(ref: str) -> str:
    """``ref`` with each byte of the file name that was not UTF-8 (kept as a surrogate escape, as the
    store names the file) written ``\\xNN``: text UTF-8, JSON and a terminal can carry. A backslash of
    the name that would read as the start of one (``a\\xe9.md`` itself) is doubled, so two files never
    show alike; any other backslash is shown as it is. ``given_ref`` reads it back. Any text may be
    given: what is not such a byte or backslash is left as it is."""
    doubled = _RUN_BEFORE_BYTE.sub(lambda m: m.group() * 2, ref)
    return _BYTE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}", doubled)


def given_ref(text: str) -> str:
    """The ref ``shown_ref`` wrote as ``text``: each ``\\xNN`` of a byte 0x80-0xFF as that byte again,
    and the backslashes doubled before one halved."""
    return _SHOWN_BYTE.sub(_given, text)


def _given(match: re.Match[str]) -> str:
    run, digits = len(match.group(1)), match.group(2)
    kept = "\\" * (run // 2)
    return kept + (chr(0xDC00 + int(digits, 16)) if run % 2 else "x" + digits)
