"""JSON from anything we did not write ourselves: the one reader, failing the way callers expect.

``json`` recurses once per level of nesting, so a line of 100,000 ``[`` raises RecursionError, which
no caller catches as "not JSON"; here it is a ValueError like any other malformed text. Bytes are
read as UTF-8 only (``json.loads(bytes)`` would guess UTF-16 from the first bytes); a bad byte is a
UnicodeDecodeError, a ValueError too.
"""

from __future__ import annotations

import json
from typing import Any

from memory_store._errors import RecallKitError

_DECODER = json.JSONDecoder()


class JsonNestingError(RecallKitError, ValueError):
    """JSON nested deeper than the reader follows: a ValueError, as every other malformed JSON is."""

    def __init__(self) -> None:
        super().__init__("nested too deeply")


def parse_json(data: str | bytes) -> Any:
    """The JSON value of ``data``; ValueError when it holds none (JSONDecodeError, UnicodeDecodeError
    or JsonNestingError)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonNestingError() from None


def line_problem(exc: ValueError) -> str:
    """What was wrong with one JSON line, as a sidecar's problem says it: ``exc`` is what
    ``parse_json`` raised or, for a line that is JSON, what the reader of its value did."""
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid UTF-8 at byte {exc.start} of the line"
    if isinstance(exc, json.JSONDecodeError):
        return "not valid JSON"
    if isinstance(exc, JsonNestingError):
        return f"not valid JSON ({exc})"
    return str(exc)


def parse_json_prefix(text: str, start: int = 0) -> tuple[Any, int]:
    """The JSON value that starts at ``text[start]`` and the index where it ends, whatever follows;
    ValueError as for ``parse_json``."""
    try:
        return _DECODER.raw_decode(text, start)
    except RecursionError:
        raise JsonNestingError() from None


LAST_TIME = 253_402_300_799.0  # 9999-12-31 UTC: a later "time" is no time a clock can show


def recorded_time(value: object) -> float | None:
    """``value`` as a time one of our files recorded (seconds since the epoch, 0 to LAST_TIME), or None:
    a planted 1e20, NaN, "soon" or a JSON bool is no time of ours, and would break every reader's clock."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= LAST_TIME:
        return None  # NaN fails the range test too
    return float(value)
