"""A persistent cache of parsed memories and their index, so a cold process does not rebuild both.

One file per root set in the per-user cache folder (``RECALL_KIT_CACHE_DIR``, else platformdirs'
user cache dir). It holds each file's (abspath, size, mtime_ns) with the doc parsed from it, and
the FieldIndex built from those docs. A cold start re-reads and re-analyses only the files whose
size or mtime changed, and drops the ones that are gone.

The file is a header (magic, format version, Python and marshal versions, sha256 of the payload)
and a marshal payload of plain types only. Anything that does not check out (missing, truncated,
corrupt, another version, a shape we did not write) is ignored and rebuilt, never trusted.
Writers take an flock on a lock file beside it and replace the file atomically, so readers never
need the lock: they see the old file or the new one, whole.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import json
import logging
import marshal
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import platformdirs

from memory_store import MemoryDoc, MemoryStore, Snapshot
from recall_kit._heuristic import FIELD_WEIGHTS, FastHeuristic, _doc_fields, build_index
from recall_kit._index import FieldIndex

CACHE_DIR_ENV = "RECALL_KIT_CACHE_DIR"
FORMAT_VERSION = 3  # bump whenever the payload's shape or the analysis that produced it changes
_MAGIC = b"recall-kit index cache\n"
_VERSION_LINE = f"{FORMAT_VERSION} py{sys.version_info[0]}.{sys.version_info[1]} marshal{marshal.version}\n".encode()
_DIGEST_LEN = 64

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IndexedStore:
    """A one-shot snapshot of memory roots with a FastHeuristic over it, and how it was obtained."""

    snapshot: Snapshot
    heuristic: FastHeuristic
    reused: int  # documents taken from the cache without reading their file
    cache_file: Path | None  # None when the cache was bypassed


def default_cache_dir() -> Path:
    """``RECALL_KIT_CACHE_DIR`` when set, else the per-user cache folder (XDG on Linux)."""
    return Path(os.environ.get(CACHE_DIR_ENV) or platformdirs.user_cache_dir("recall-kit"))


def open_indexed(
    roots: Sequence[str | os.PathLike[str]], *, use_cache: bool = True, cache_dir: str | os.PathLike[str] | None = None
) -> IndexedStore:
    """Scan ``roots`` once and index them, through the persistent cache unless ``use_cache`` is False.

    Raises MemoryStoreError for a missing root, as ``MemoryStore.open`` does. A cache that cannot
    be read or written never fails the call: it is logged and the index is built from the files.
    """
    if not use_cache:
        with MemoryStore.open(*roots, watch=False) as store:
            snapshot = store.snapshot()
        return IndexedStore(snapshot, FastHeuristic(snapshot), 0, None)
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    path = folder / f"index-{_roots_key(roots)}.bin"
    with _collector_paused():
        return _open_cached(roots, path)


def _open_cached(roots: Sequence[str | os.PathLike[str]], path: Path) -> IndexedStore:
    cached = _load(path)
    files: dict[str, Any] = cached["files"] if cached else {}
    reused: set[str] = set()
    indexed_with: dict[str, Any] = {}  # ref -> the enrichment its cached index entry was built with
    folders: dict[str, Path] = {}

    def reuse(abspath: str, size: int, mtime_ns: int) -> MemoryDoc | None:
        entry = files.get(abspath)
        try:
            if entry is None or entry[0] != size or entry[1] != mtime_ns:
                return None
            doc = _doc_from(entry[2], folders)
            indexed_with[doc.ref] = entry[2][13]
        except (TypeError, ValueError, IndexError):
            return None  # an entry of a shape we never write: read the file
        reused.add(doc.ref)
        return doc

    with MemoryStore.open(*roots, watch=False, reuse=reuse) as store:
        snapshot = store.snapshot()
    # a sidecar can change while the memory file does not: such a doc is re-analysed
    reused = {ref for ref in reused if ref in snapshot.docs and _enrichment_key(snapshot.docs[ref]) == indexed_with[ref]}
    index, changed = _index_for(snapshot, cached, reused)
    if changed:
        try:
            _save(path, snapshot, index)
        except OSError as exc:
            _log.warning("recall-kit: index cache not written (%s): %s", path, exc)
    return IndexedStore(snapshot, FastHeuristic._from_index(snapshot, index), len(reused), path)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    # A load allocates ~10 long-lived objects per memory; collections meanwhile free nothing
    # and cost 4-6% of a cold 10,000-memory query (bench/cold_start.py).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _index_for(snapshot: Snapshot, cached: dict[str, Any] | None, reused: set[str]) -> tuple[FieldIndex, bool]:
    # The cached index brought to the snapshot: unchanged docs kept, changed and new ones re-analysed.
    index = None
    if cached is not None:
        try:
            index = FieldIndex.from_state(cached["index"])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            _log.warning("recall-kit: index cache ignored: %s", exc)
    if index is None or index.field_weights != FIELD_WEIGHTS:
        return build_index(snapshot.docs), True
    stale = [ref for ref in index.ids if ref not in reused or ref not in snapshot.docs]
    fresh = sorted(ref for ref in snapshot.docs if ref not in index.ids or ref not in reused)
    if len(fresh) > max(64, len(snapshot.docs) // 4):  # mostly changed: a packed build is faster
        return build_index(snapshot.docs), True
    for ref in stale:
        index.remove(ref)
    for ref in fresh:
        terms, surfaces = _doc_fields(snapshot.docs[ref])
        index.add(ref, terms, surfaces)
    return index, bool(stale or fresh)


def _roots_key(roots: Sequence[str | os.PathLike[str]]) -> str:
    paths = [os.path.abspath(os.path.expanduser(os.fspath(root))) for root in roots]
    return hashlib.sha256(json.dumps(paths).encode()).hexdigest()[:32]


# --- the file ---------------------------------------------------------------------


def _load(path: Path) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        _log.warning("recall-kit: index cache unreadable (%s): %s", path, exc)
        return None
    header = _MAGIC + _VERSION_LINE
    start = len(header) + _DIGEST_LEN + 1
    if not data.startswith(header) or len(data) < start or data[start - 1 : start] != b"\n":
        return None  # not ours, another version, or truncated
    payload = memoryview(data)[start:]
    if hashlib.sha256(payload).hexdigest().encode() != data[len(header) : start - 1]:
        _log.warning("recall-kit: index cache failed its checksum, rebuilding: %s", path)
        return None
    try:
        cached = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    if not (isinstance(cached, dict) and isinstance(cached.get("files"), dict) and isinstance(cached.get("index"), dict)):
        return None
    return cached


def _save(path: Path, snapshot: Snapshot, index: FieldIndex) -> None:
    files = {}
    for doc in snapshot.docs.values():
        entry = _doc_entry(doc)
        if entry is not None:
            files[str(doc.abspath)] = entry
    payload = marshal.dumps({"files": files, "index": index.state()})
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with _locked(path.with_suffix(".lock")):
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + _VERSION_LINE + hashlib.sha256(payload).hexdigest().encode() + b"\n")
                out.write(payload)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _doc_entry(doc: MemoryDoc) -> tuple[int, int, tuple[Any, ...]] | None:
    # A doc whose frontmatter holds values marshal cannot keep (dates) is simply re-read next time.
    try:
        stat = os.stat(doc.abspath, follow_symlinks=False)
        fields = (
            doc.scope, doc.path, str(doc.abspath), doc.name, doc.description, doc.type, tuple(doc.keywords),
            dict(doc.extra), doc.body, doc.mtime, doc.size, doc.content_hash, tuple(doc.usage_scenarios),
            _enrichment_key(doc),
        )
        marshal.dumps(fields[7])
    except (OSError, ValueError):
        return None
    if stat.st_size != doc.size or stat.st_mtime != doc.mtime:
        return None  # changed since it was read: let the next run read it again
    return stat.st_size, stat.st_mtime_ns, fields


_NO_EXTRA: MappingProxyType[str, Any] = MappingProxyType({})  # read-only, so every doc without extras shares it


def _doc_from(fields: tuple[Any, ...], folders: dict[str, Path]) -> MemoryDoc:
    scope, path, abspath, name, description, type_, keywords, extra, body, mtime, size, content_hash, scenarios, _ = fields
    # A child of a folder's Path is parsed from the file name alone: a third of Path(abspath)'s cost.
    folder, file_name = os.path.split(abspath)
    parent = folders.get(folder)
    if parent is None:
        parent = folders[folder] = Path(folder)
    return MemoryDoc(
        scope=scope, path=path, abspath=parent / file_name, name=name, description=description, type=type_,
        keywords=tuple(keywords), extra=MappingProxyType(extra) if extra else _NO_EXTRA, body=body, mtime=mtime, size=size,
        content_hash=content_hash, usage_scenarios=tuple(scenarios),
    )


def _enrichment_key(doc: MemoryDoc) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The sidecar terms a doc was indexed with, as plain values marshal can keep."""
    if doc.enrichment is None:
        return None
    return (tuple(doc.enrichment.keywords), tuple(doc.enrichment.usage_scenarios))
