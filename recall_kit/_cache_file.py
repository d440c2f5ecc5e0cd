"""The index cache's file: one file per root set holding parsed memories and their index.

The file is a header (magic, format version, Python and marshal versions, then the CRC-32s of the
table and of the sections, and the table's length), and a payload: a marshal table of plain types,
then raw sections it points into (each doc as the store's codec encodes it, the index's arrays). Anything that
does not check out (missing, truncated, corrupt, another version, a shape we did not write) is
ignored and rebuilt, never trusted. Writers take an flock on a lock file beside it and replace the
file atomically, so readers never need the lock: they see the old file or the new one, whole.

The file is mapped, not read: the index's arrays are views of the mapping, and each doc is
unmarshalled only when something looks at it. The table is checked before it is read; the sections
are checked on a thread (``SectionCheck``) while the store is scanned.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import mmap
import os
import sys
import tempfile
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from memory_store import Enrichment, MemoryDoc, Snapshot, decode_doc, encode_doc, file_lock
from recall_kit._index import FieldIndex

CACHE_DIR_ENV = "RECALL_KIT_CACHE_DIR"
FORMAT_VERSION = 5  # bump whenever the payload's shape or the analysis that produced it changes
_MAGIC = b"recall-kit index cache\n"
_VERSION_LINE = f"{FORMAT_VERSION} py{sys.version_info[0]}.{sys.version_info[1]} marshal{marshal.version}\n".encode()
# CRC-32s of the table and of the sections after it (they catch damage like sha256 would, in 15 ms
# instead of 24 on 43 MB), and the table's length
_SIZES_LINE = "{table_crc:08x} {crc:08x} {table:016x}\n"
_SIZES_LEN = 8 + 1 + 8 + 1 + 16 + 1
_ALIGN = 8  # raw sections start on 8 bytes, so int64 arrays are views, not copies

# A cached file in the table: (size, mtime_ns, ref, content_hash, enrichment key, (offset, length) of its blob).
Entry = tuple[int, int, str, str, Any, tuple[int, int]]
# A doc handed to the store from the cache: its abspath, table entry and blob.
Kept = tuple[str, Entry, memoryview]

_log = logging.getLogger(__name__)



def default_cache_dir() -> Path:
    """``RECALL_KIT_CACHE_DIR`` when set, else the per-user cache folder (XDG on Linux)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or platformdirs.user_cache_dir("recall-kit"))


def cache_path(roots: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str] | None) -> Path:
    """The cache file of one root set."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return folder / f"index-{roots_key(roots)}.bin"


def roots_key(roots: Sequence[str | os.PathLike[str]]) -> str:
    paths = [os.path.abspath(os.path.expanduser(os.fspath(root))) for root in roots]
    return hashlib.sha256(json.dumps(paths).encode()).hexdigest()[:32]


# --- the file ---------------------------------------------------------------------


class SectionCheck:
    """The sections' CRC-32, computed on a thread of its own: zlib lets go of the GIL for it, so on a
    second core it costs the scan nothing (bench/cold_start.py)."""

    def __init__(self, sections: memoryview, expected: int) -> None:
        self._passed = False
        self._thread = threading.Thread(
            target=self._run, args=(sections, expected), name="recall-kit cache check", daemon=True
        )
        self._thread.start()

    def _run(self, sections: memoryview, expected: int) -> None:
        self._passed = zlib.crc32(sections) == expected

    def passed(self) -> bool:
        """Whether the sections are as written (waits for the check)."""
        self._thread.join()
        return self._passed


@dataclass(frozen=True, slots=True)
class Cached:
    table: dict[str, Any]  # checked and read
    sections: memoryview  # the raw sections the table points into: used only once check.passed()
    check: SectionCheck


def load(path: Path) -> Cached | None:
    """The table and the raw sections it points into, or None when the file does not check out."""
    try:
        with open(path, "rb") as file:
            if os.fstat(file.fileno()).st_size == 0:
                return None
            # Mapped, not read: no 40 MB copy. Writers replace the file and never change it in place,
            # so the mapping stays whole for as long as the index and the deferred docs use it.
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        return None
    except OSError as exc:
        _log.warning("recall-kit: index cache unreadable (%s): %s", path, exc)
        return None
    view = memoryview(data)
    header = _MAGIC + _VERSION_LINE
    start = len(header) + _SIZES_LEN
    if len(view) < start or view[: len(header)] != header or view[start - 1] != ord("\n"):
        return None  # not ours, another version, or truncated
    try:
        table_crc, crc, table_length = (int(part, 16) for part in bytes(view[len(header) : start - 1]).split(b" "))
    except ValueError:
        return None
    payload = view[start:]
    if not 0 <= table_length <= len(payload) or zlib.crc32(payload[:table_length]) != table_crc:
        _log.warning("recall-kit: index cache failed its checksum, rebuilding: %s", path)
        return None
    try:
        table = marshal.loads(payload[:table_length])
    except (EOFError, ValueError, TypeError):
        return None
    if not (isinstance(table, dict) and all(isinstance(table.get(key), dict) for key in ("files", "index", "arrays"))):
        return None
    sections = payload[aligned(start + table_length) - start :]
    return Cached(table, sections, SectionCheck(payload[table_length:], crc))


def save(path: Path, snapshot: Snapshot, index: FieldIndex, kept: dict[str, Kept]) -> None:
    sections: list[bytes | memoryview] = []
    size = 0

    def put(blob: bytes | memoryview) -> tuple[int, int]:
        nonlocal size
        if pad := aligned(size) - size:
            sections.append(bytes(pad))
        sections.append(blob)
        size += pad + len(blob)
        return size - len(blob), len(blob)

    files = {}
    for ref in snapshot.docs:
        found = kept.get(ref) or doc_entry(snapshot.docs[ref])  # an unchanged doc keeps its blob, unbuilt
        if found is not None:
            abspath, entry, blob = found
            files[abspath] = (*entry[:5], put(blob))
    state = index.state()
    arrays = {key: put(value) for key, value in state.items() if isinstance(value, bytes)}
    table = marshal.dumps({"files": files, "index": {k: v for k, v in state.items() if k not in arrays}, "arrays": arrays})
    start = len(_MAGIC) + len(_VERSION_LINE) + _SIZES_LEN
    payload = [table, bytes(aligned(start + len(table)) - start - len(table)), *sections]
    crc = 0
    for part in payload[1:]:
        crc = zlib.crc32(part, crc)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with file_lock(path.with_suffix(".lock")):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + _VERSION_LINE + _SIZES_LINE.format(table_crc=zlib.crc32(table), crc=crc, table=len(table)).encode())
                out.writelines(payload)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


def aligned(offset: int) -> int:
    return offset + -offset % _ALIGN


def doc_entry(doc: MemoryDoc) -> Kept | None:
    # A doc whose frontmatter holds values marshal cannot keep (dates) is simply re-read next time.
    abspath = str(doc.abspath)
    try:
        stat = os.stat(abspath, follow_symlinks=False)
        blob = encode_doc(doc)
    except (OSError, ValueError):
        return None
    if stat.st_size != doc.size or stat.st_mtime != doc.mtime:
        return None  # changed since it was read: let the next run read it again
    entry = (stat.st_size, stat.st_mtime_ns, doc.ref, doc.content_hash, enrichment_key(doc.enrichment), (0, 0))
    return abspath, entry, memoryview(blob)


doc_from = decode_doc  # the store's codec builds each cached doc


def enrichment_key(enrichment: Enrichment | None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The sidecar terms a doc was indexed with, as plain values marshal can keep."""
    if enrichment is None:
        return None
    return (tuple(enrichment.keywords), tuple(enrichment.usage_scenarios))
