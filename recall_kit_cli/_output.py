"""Every byte the CLI writes goes through here: one sanitiser for people, exact UTF-8 JSON for machines.

Human output: each field passes ``clean``, so control and escape sequences (ESC[2J, OSC titles and
hyperlinks, CR, newlines, bidi overrides) show as visible escapes such as ``\\x1b`` and a field can
never start a new line. Bytes that were not valid UTF-8 (file names, arguments; Python keeps them as
surrogate escapes) show as ``\\xe9``. Lines are cut to the terminal's width when stdout is one.

JSON output (``--json``): the text of ``json.dumps(..., ensure_ascii=False)`` written as UTF-8, with
every lone surrogate written as its JSON escape, so an undecodable byte 0xE9 in a file name arrives as
``"\\udce9"``: the output is always valid UTF-8, and ``os.fsencode`` of the decoded string gives the
original bytes back.
"""

from __future__ import annotations

import json
import math
import logging
import os
import re
import select
import shutil
import sys
import unicodedata
from typing import IO, Any, Iterable

from memory_store import shown_ref

_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
ELLIPSIS = "…"


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte kept by surrogateescape: as the store shows a ref's
        return shown_ref(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def _unsafe(ch: str) -> bool:
    # Cc: C0/C1 controls (ESC, CSI, BEL, CR, LF); Cf: bidi overrides, zero-width; Cs: surrogates;
    # Zl/Zp: line and paragraph separators, which some terminals break on.
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp")


_SAFE_ASCII = frozenset(chr(c) for c in range(0x20, 0x7F))


def clean(text: object) -> str:
    """``text`` as one safe line: every control, format or undecodable character escaped visibly."""
    value = str(text)
    if all(ch in _SAFE_ASCII for ch in value):
        return value
    return "".join(_escape(ch) if _unsafe(ch) else ch for ch in value)


def clean_ref(ref: str) -> str:
    """A memory's ref as one safe line, as `list` shows it and `show` and `rm` take it back
    (``shown_ref``: a backslash that would read as a byte's ``\\xNN`` is doubled, so two refs
    never print alike). Only a ref the store gave: a ref shown already would be doubled again."""
    return clean(shown_ref(ref))


def clean_block(text: str) -> str:
    """Multi-line text (a body, a rendered block): each line cleaned, tabs kept, newlines kept."""
    return "\n".join("\t".join(clean(part) for part in line.split("\t")) for line in text.split("\n"))


def terminal_width(stream: IO[Any] | None = None) -> int | None:
    """The width to fit lines to: the terminal's when ``stream`` is one, else None (no cutting)."""
    stream = stream or sys.stdout
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(20, shutil.get_terminal_size().columns)


def _cell_width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def fit(line: str, width: int | None) -> str:
    """``line`` cut to ``width`` terminal cells with an ellipsis; unchanged when width is None."""
    if width is None or (len(line) <= width and line.isascii()):
        return line
    cells = [_cell_width(ch) for ch in line]
    if sum(cells) <= width:
        return line
    used = 0
    for i, cell in enumerate(cells):
        if used + cell > width - 1:
            return line[:i] + ELLIPSIS
        used += cell
    return line


def _write(stream: IO[Any], text: str) -> None:
    encoding = getattr(stream, "encoding", None) or "utf-8"
    data = text.encode(encoding, "backslashreplace")
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        stream.write(data.decode(encoding))
    else:
        stream.flush()
        buffer.write(data)
    stream.flush()


def echo(*lines: str, err: bool = False, cut: bool = False) -> None:
    """Write already-cleaned lines; with ``cut``, each is fitted to the terminal width."""
    stream = sys.stderr if err else sys.stdout
    width = terminal_width(stream) if cut else None
    _write(stream, "".join(fit(line, width) + "\n" for line in lines))


def echo_rows(rows: Iterable[str]) -> None:
    """Table rows: fitted to the terminal."""
    echo(*rows, cut=True)


def warn(message: str) -> None:
    """One warning line on stderr."""
    echo(f"recall-kit: warning: {clean(message)}", err=True)


def json_text(payload: Any) -> str:
    """Exact JSON, with every lone surrogate (an undecodable byte) as its ``\\udcXX`` escape and a number
    that is not finite as null (``json`` would write NaN, which no strict reader takes)."""
    try:
        text = json.dumps(payload, ensure_ascii=False, allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(payload), ensure_ascii=False, allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def echo_json(payload: Any) -> None:
    """One JSON document and a newline on stdout, as UTF-8 whatever the locale."""
    data = (json_text(payload) + "\n").encode("utf-8")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.flush()


def quiet_broken_pipe() -> None:
    """The reader went away (``| head``): send the rest of stdout nowhere, without a traceback."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        pass


def reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (poll reports an error or hang-up)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _fd, events in poller.poll(0))


class SanitisingLogHandler(logging.Handler):
    """Library warnings on stderr as one cleaned line each (the default handler prints them raw)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = clean(record.getMessage())
            echo(message if message.startswith("recall-kit") else f"recall-kit: {message}", err=True)
        except Exception:  # logging must never become the failure
            self.handleError(record)


def counted(count: int, word: str, plural: str | None = None) -> str:
    """``1 key``, ``2 keys``."""
    return f"{count} {word if count == 1 else plural or word + 's'}"
