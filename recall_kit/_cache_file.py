"""The index cache's file: one file per root set holding parsed memories and their index.

The file is a header (magic, format version, Python and marshal versions, then the CRC-32s of the
table and of the sections, and the table's length), and a payload: a marshal table of plain types,
then raw sections it points into (each doc as the store's codec encodes it, the index's arrays). Anything that
does not check out (missing, truncated, corrupt, another version, a shape we did not write) is
ignored and rebuilt, never trusted. Writers take an flock on a lock file beside it and replace the
file atomically, so readers never need the lock: they see the old file or the new one, whole.

The folder and every file in it are this user's alone (``memory_store.private_folder`` and
``open_private``: a folder on the way that another user could swap, a symlink, a FIFO, a file of
someone else's is refused, and the cache is then not used). Beside each cache file a small stamp
(``index-<key>.used``) holds its roots, and its mtime says when the cache was last used: a write
removes the caches unused for ``CACHE_MAX_UNUSED_DAYS`` and the least recently used beyond
``CACHE_MAX_FILES``.

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
import stat
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_store import (
    Enrichment,
    Learned,
    MemoryDoc,
    Snapshot,
    UnsafePathError,
    decode_doc,
    encode_doc,
    open_private,
    parse_json,
    private_folder,
    private_lock,
)
from recall_kit._settings import CACHE_DIR_ENV as CACHE_DIR_ENV  # its public name is recall_kit.CACHE_DIR_ENV
from recall_kit._settings import environment_setting
from recall_kit.limits import CACHE_MAX_FILES, CACHE_MAX_UNUSED_DAYS

if TYPE_CHECKING:
    from recall_kit._index import FieldIndex

FORMAT_VERSION = 10  # bump whenever the payload's shape or the analysis that produced it changes
_MAGIC = b"recall-kit index cache\n"
_VERSION_LINE = f"{FORMAT_VERSION} py{sys.version_info[0]}.{sys.version_info[1]} marshal{marshal.version}\n".encode()
# CRC-32s of the table and of the sections after it (they catch damage like sha256 would, in 15 ms
# instead of 24 on 43 MB), and the table's length
_SIZES_LINE = "{table_crc:08x} {crc:08x} {table:016x}\n"
_SIZES_LEN = 8 + 1 + 8 + 1 + 16 + 1
_ALIGN = 8  # raw sections start on 8 bytes, so int64 arrays are views, not copies

# A cached file in the table: (size, mtime_ns, inode, device, ref, content_hash, sidecars key,
# (offset, length) of its blob). The first four are the file's identity: a doc is reused only when all hold.
Entry = tuple[int, int, int, int, str, str, Any, tuple[int, int]]
IDENTITY, REF, CONTENT_HASH, SIDECARS, BLOB = slice(0, 4), 4, 5, 6, 7  # where each part of an Entry is
# A doc handed to the store from the cache: its abspath, table entry and blob.
Kept = tuple[str, Entry, memoryview]

_PREFIX, _SUFFIX, _STAMP_SUFFIX, _LOCK_SUFFIX = "index-", ".bin", ".used", ".lock"
# doctor's cache of what it read in each memory file (recall_kit/_health_cache.py) lives beside the
# index caches: ``doctor-text-<code version>.json``. It holds lines of memories (scrubbed), so clearing
# the caches, or forgetting a memory, removes it too; doctor rebuilds it.
DOCTOR_TEXT_PREFIX, DOCTOR_TEXT_SUFFIX = "doctor-text-", ".json"
_STALE_TEMP_S = 3600.0  # a writer's temp file this old was left by one that died
TEMP_SUFFIX = ".tmp"  # of a writer's temp file: <the file's name>.<random>.tmp
_log = logging.getLogger(__name__)



def default_cache_dir() -> Path:
    """``RECALL_KIT_CACHE_DIR`` when set (an absolute path, else ConfigError), else the per-user
    cache folder (XDG on Linux): the settings loader's ``cache_dir`` from the environment alone."""
    folder: Path = environment_setting("cache_dir").value
    return folder


def cache_path(roots: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str] | None) -> Path:
    """The cache file of one root set."""
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return folder / f"{_PREFIX}{roots_key(roots)}{_SUFFIX}"


def root_paths(roots: Sequence[str | os.PathLike[str]]) -> list[str]:
    """The roots as the cache names them: absolute, ``~`` expanded, symlinks kept."""
    return [os.path.abspath(os.path.expanduser(os.fspath(root))) for root in roots]


def roots_key(roots: Sequence[str | os.PathLike[str]]) -> str:
    return hashlib.sha256(json.dumps(root_paths(roots)).encode()).hexdigest()[:32]


def usable_cache(roots: Sequence[str | os.PathLike[str]], cache_dir: str | os.PathLike[str] | None) -> Path | None:
    """The cache file of ``roots`` in a folder only this user controls (made 0700 when missing), or
    None, with one warning, when the folder is not such a folder."""
    path = cache_path(roots, cache_dir)
    try:
        private_folder(path.parent)
    except UnsafePathError as exc:
        _log.warning("recall-kit: index cache off: %s", exc)
        return None
    return path


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
    """The table and the raw sections it points into, or None when the file does not check out.

    Raises UnsafePathError, before anything reads it, when ``path`` is a symlink, a FIFO or
    anything but a regular file of this user's.
    """
    try:
        fd = open_private(path)
    except FileNotFoundError:
        return None
    except UnsafePathError as exc:
        raise UnsafePathError(f"{exc} (`recall-kit cache clear` removes it)") from None
    except OSError as exc:
        _log.warning("recall-kit: index cache unreadable (%s): %s", path, exc)
        return None
    try:
        if os.fstat(fd).st_size == 0:
            return None
        # Mapped, not read: no 40 MB copy. Writers replace the file and never change it in place,
        # so the mapping stays whole for as long as the index and the deferred docs use it.
        data = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    except OSError as exc:
        _log.warning("recall-kit: index cache unreadable (%s): %s", path, exc)
        return None
    finally:
        os.close(fd)
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


def save(path: Path, roots: Sequence[str | os.PathLike[str]], snapshot: Snapshot, index: FieldIndex, kept: dict[str, Kept]) -> None:
    """Write the cache of ``roots`` (its file, then its stamp), then remove the caches long unused."""
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
            files[abspath] = (*entry[:BLOB], put(blob))
    state = index.state()
    arrays = {key: put(value) for key, value in state.items() if isinstance(value, bytes)}
    table = marshal.dumps({"files": files, "index": {k: v for k, v in state.items() if k not in arrays}, "arrays": arrays})
    start = len(_MAGIC) + len(_VERSION_LINE) + _SIZES_LEN
    payload = [table, bytes(aligned(start + len(table)) - start - len(table)), *sections]
    crc = 0
    for part in payload[1:]:
        crc = zlib.crc32(part, crc)
    with private_lock(path.with_suffix(_LOCK_SUFFIX)):
        head = _MAGIC + _VERSION_LINE + _SIZES_LINE.format(table_crc=zlib.crc32(table), crc=crc, table=len(table)).encode()
        _replace(path, [head, *payload])
        _write_stamp(path, roots)
    evict(path.parent, keep=path)


# --- stamps: which roots a cache holds, and when it was last used -----------------------------------


def stamp_path(path: Path) -> Path:
    """The stamp beside the cache file ``path``."""
    return path.with_suffix(_STAMP_SUFFIX)


def _write_stamp(path: Path, roots: Sequence[str | os.PathLike[str]]) -> None:
    stamp = stamp_path(path)
    _replace(stamp, [json.dumps({"roots": root_paths(roots)}).encode()])


def _replace(path: Path, chunks: Sequence[bytes | memoryview]) -> None:
    # a temporary file beside ``path`` (0600, mkstemp's mode), written whole, then renamed over it
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as out:
            out.writelines(chunks)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def mark_used(path: Path, roots: Sequence[str | os.PathLike[str]]) -> None:
    """Record that the cache ``path`` was used now (its stamp's mtime); never raises."""
    try:
        os.utime(stamp_path(path), follow_symlinks=False)
    except FileNotFoundError:
        with contextlib.suppress(OSError, UnsafePathError):
            _write_stamp(path, roots)
    except OSError:
        pass  # a cache whose use is not recorded is only removed sooner


@dataclass(frozen=True, slots=True)
class CacheFile:
    """One index cache file: the roots it holds (None when unknown), its size and when it was last used."""

    path: Path
    roots: tuple[str, ...] | None
    size: int  # bytes, its stamp and lock included
    last_used: float  # seconds since the epoch
    regular: bool  # False: a FIFO, a symlink or a folder at a cache's name (listed and cleared, never used)


def list_cache_files(
    cache_dir: str | os.PathLike[str] | None = None, roots: Sequence[str | os.PathLike[str]] | None = None
) -> list[CacheFile]:
    """The index caches in ``cache_dir`` (default: ``default_cache_dir()``), most recently used first:
    every one, or with ``roots`` those that may hold any of their files: a cache of the same folder by
    another path (a symlink), of a folder inside one or around one (a cache whose roots are unknown holds none).

    Raises UnsafePathError when the folder is not one only this user controls.
    """
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if not os.path.lexists(folder):
        return []
    private_folder(folder, create=False)
    wanted = None if roots is None else [os.path.realpath(root) for root in root_paths(roots)]
    names = sorted(os.listdir(folder))
    found = []
    for name in names:
        if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
            continue
        cache = _cache_file(folder / name)
        if wanted is None or (cache.roots and any(_overlap(os.path.realpath(root), wanted) for root in cache.roots)):
            found.append(cache)
    return sorted(found, key=lambda cache: cache.last_used, reverse=True)


def _overlap(root: str, wanted: Sequence[str]) -> bool:
    """Whether the folder ``root`` is one of ``wanted``, inside one or around one (real paths all)."""
    return any(os.path.commonpath([root, other]) in (root, other) for other in wanted)


def _cache_file(path: Path) -> CacheFile:
    size, last_used, roots, regular = 0, 0.0, None, False
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        size, last_used = info.st_size, info.st_mtime  # a cache without a stamp was last used when written
        regular = stat.S_ISREG(info.st_mode)
    with contextlib.suppress(OSError):
        size += os.lstat(path.with_suffix(_LOCK_SUFFIX)).st_size
    try:
        fd = open_private(stamp_path(path))
    except (OSError, UnsafePathError):
        return CacheFile(path, roots, size, last_used, regular)
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        roots = _stamp_roots(file.read(1 << 16), path)
    return CacheFile(path, roots, size + info.st_size, info.st_mtime, regular)


def _stamp_roots(data: bytes, path: Path) -> tuple[str, ...] | None:
    """The roots a stamp names, when they are the ones the cache's name was made from."""
    try:
        roots = parse_json(data).get("roots")
    except (ValueError, AttributeError):
        return None
    if not isinstance(roots, list) or not all(isinstance(root, str) for root in roots):
        return None
    if path.name != f"{_PREFIX}{roots_key(roots)}{_SUFFIX}":
        return None
    return tuple(roots)


def clear_cache_files(
    cache_dir: str | os.PathLike[str] | None = None, roots: Sequence[str | os.PathLike[str]] | None = None
) -> list[CacheFile]:
    """Remove the index caches in ``cache_dir`` (default: ``default_cache_dir()``) and return them:
    every one, or with ``roots`` those that may hold their files (as ``list_cache_files`` picks them; a
    cache whose roots are unknown is kept); doctor's text cache and writers' temp files go either way.

    Raises UnsafePathError when the folder is not one only this user controls.
    """
    removed = []
    for cache in list_cache_files(cache_dir, roots):
        _remove(cache.path)
        removed.append(cache)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    remove_doctor_text(folder)  # kept by content, not by roots: whichever roots go, it goes (doctor rebuilds it)
    # a temp file names no roots, and a killed writer's holds memories' words: every one goes (a live
    # writer's rename then fails, and the next run writes its cache again)
    _remove_stale_temps(folder, max_age_s=0.0)
    return removed


def remove_doctor_text(folder: Path, *, keep: Path | None = None) -> None:
    """Remove doctor's text caches in ``folder`` (every version), but ``keep``; never raises. (Its writers'
    temp files are every writer's: ``_remove_stale_temps``.)"""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        if name.startswith(DOCTOR_TEXT_PREFIX) and name.endswith(DOCTOR_TEXT_SUFFIX) and folder / name != keep:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(folder / name)


def evict(folder: Path, *, keep: Path) -> None:
    """Remove the caches in ``folder`` unused for CACHE_MAX_UNUSED_DAYS, then the least recently used
    beyond CACHE_MAX_FILES (never ``keep``), and temp files a dead writer left; never raises."""
    try:
        caches = list_cache_files(folder)
    except (OSError, UnsafePathError):
        return
    now = time.time()
    others = 0  # kept beside ``keep``
    for cache in caches:  # most recently used first
        if cache.path == keep:
            continue
        if now - cache.last_used > CACHE_MAX_UNUSED_DAYS * 86400 or others >= CACHE_MAX_FILES - 1:
            _remove(cache.path)
        else:
            others += 1
    _remove_stale_temps(folder, max_age_s=_STALE_TEMP_S)


def _remove(path: Path) -> None:
    """Unlink a cache file, its stamp and its lock (whatever they are: unlinking follows nothing)."""
    for part in (path, stamp_path(path), path.with_suffix(_LOCK_SUFFIX)):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
            os.unlink(part)


def _remove_stale_temps(folder: Path, *, max_age_s: float) -> None:
    now = time.time()
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if name.startswith((_PREFIX, DOCTOR_TEXT_PREFIX)) and name.endswith(TEMP_SUFFIX):
                with contextlib.suppress(OSError):
                    if now - os.lstat(folder / name).st_mtime >= max_age_s:
                        os.unlink(folder / name)


def aligned(offset: int) -> int:
    """``offset`` rounded up to where a raw section may start."""
    return offset + -offset % _ALIGN


def doc_entry(doc: MemoryDoc) -> Kept | None:
    # A doc whose frontmatter holds values marshal cannot keep (dates) is simply re-read next time.
    abspath = str(doc.abspath)
    try:
        info = os.stat(abspath, follow_symlinks=False)
        blob = encode_doc(doc)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size != doc.size or info.st_mtime != doc.mtime:
        return None  # a symlinked memory, or changed since it was read: let the next run read it again
    entry = (
        info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev, doc.ref, doc.content_hash,
        sidecars_key(doc.enrichment, doc.learned), (0, 0),
    )
    return abspath, entry, memoryview(blob)


def identity(info: os.stat_result) -> tuple[int, int, int, int]:
    """What a cached doc's file must still be: (size, mtime_ns, inode, device)."""
    return (info.st_size, info.st_mtime_ns, info.st_ino, info.st_dev)


class DocBuilder:
    """Builds each cached doc with the store's codec; a blob that is not a valid doc drops the whole
    cache file (the store then reads that file again, and the next run rebuilds the cache)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._dropped = False

    def __call__(self, blob: memoryview) -> MemoryDoc:
        try:
            return decode_doc(blob)
        except ValueError as exc:
            if not self._dropped:
                self._dropped = True
                _log.warning("recall-kit: index cache holds an invalid doc (%s), dropping it: %s", exc, self._path)
                _remove(self._path)
            raise


def sidecars_key(enrichment: Enrichment | None, learned: Learned | None) -> Any:
    """What the sidecars gave a doc's index fields (enrichment terms, learned words), as plain values marshal keeps."""
    return (
        None if enrichment is None else (tuple(enrichment.keywords), tuple(enrichment.usage_scenarios)),
        None if learned is None else tuple(learned.keys),
    )
