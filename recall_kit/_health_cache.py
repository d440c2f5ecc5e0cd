"""What doctor read in each memory file's text, kept per version of the file: the lines learning's
scrubber blanks and the references the text names (with each naming line as doctor shows it).

Reading and scrubbing every memory is most of doctor's cost (5.2 of 6.5 s at 1,000 memories:
bench/bench_doctor.py), while between two runs few files change. The results depend only on the
file's bytes (its SHA-256, which the store keeps) and on the code that reads them, so they are kept
under both: the file is named after a hash of the scrubber's and the reference reader's source, and
a change to either starts it over. It lives in the index cache's folder, this user's alone
(``private_folder``, ``open_private``); one that cannot be used is not used, and nothing fails for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from memory_store import UnsafePathError, open_private, parse_json, private_folder, read_private
from recall_kit import _health_text, _secrets
from recall_kit._cache_file import DOCTOR_TEXT_PREFIX, DOCTOR_TEXT_SUFFIX, TEMP_SUFFIX, default_cache_dir, remove_doctor_text
from recall_kit._health_text import Reference

MAX_CACHED_FILES = 50_000  # versions kept; those not seen in a run go first
_MAX_BYTES = 64 << 20
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TextChecks:
    """One file version's secret lines (line, column), its references, and each reference's line as shown."""

    secrets: tuple[tuple[int, int], ...]
    references: tuple[Reference, ...]
    shown: Mapping[int, str]


def _code_version() -> str:
    digest = hashlib.sha256()
    for module in (_secrets, _health_text):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


class TextCache:
    """The kept results, read once at the start of a run and written once at its end."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None, *, use: bool = True) -> None:
        self._entries: dict[str, TextChecks] = {}
        self._seen: set[str] = set()
        self._changed = False
        self._path: Path | None = None
        if not use:
            return
        try:
            folder = private_folder(Path(cache_dir) if cache_dir is not None else default_cache_dir())
            self._path = folder / f"{DOCTOR_TEXT_PREFIX}{_code_version()}{DOCTOR_TEXT_SUFFIX}"
            self._entries = _read(self._path)
        except (UnsafePathError, OSError, ValueError) as exc:
            _log.warning("recall-kit: doctor's cache off: %s", exc)
            self._path = None

    def get(self, content_hash: str) -> TextChecks | None:
        self._seen.add(content_hash)
        return self._entries.get(content_hash)

    def put(self, content_hash: str, checks: TextChecks) -> None:
        self._entries[content_hash] = checks
        self._seen.add(content_hash)
        self._changed = True

    def save(self) -> None:
        """Write what changed (a temp file renamed over the old one); a failure is logged, never raised."""
        if self._path is None or not self._changed:
            return
        kept = sorted(self._entries, key=lambda key: key not in self._seen)[:MAX_CACHED_FILES]
        payload = {key: _encoded(self._entries[key]) for key in kept}
        temp = self._path.with_name(f"{self._path.name}.{secrets.token_hex(6)}{TEMP_SUFFIX}")  # as every writer's in the folder
        try:
            fd = open_private(temp, os.O_WRONLY | os.O_EXCL, create=True)
            try:
                os.write(fd, json.dumps(payload, separators=(",", ":")).encode("utf-8"))
            finally:
                os.close(fd)
            os.replace(temp, self._path)
            remove_doctor_text(self._path.parent, keep=self._path)  # those of older code: never read again
        except (UnsafePathError, OSError) as exc:
            _log.warning("recall-kit: doctor's cache not written: %s", exc)
            try:
                os.unlink(temp)
            except OSError:
                pass


def _read(path: Path) -> dict[str, TextChecks]:
    data = read_private(path, _MAX_BYTES)
    if data is None:
        return {}
    try:
        value = parse_json(data)
    except ValueError:
        return {}  # damaged (cut short, not JSON, nested past reading): rebuilt by this run's save
    if not isinstance(value, dict):
        return {}
    entries = {}
    for key, entry in value.items():
        try:
            if any(kind not in ("path", "command", "symbol") for kind, *_ in entry["r"]):
                continue
            entries[str(key)] = TextChecks(
                tuple((int(line), int(column)) for line, column in entry["s"]),
                tuple(Reference(str(kind), str(name), int(line), str(runner)) for kind, name, line, runner in entry["r"]),  # type: ignore[arg-type]
                {int(line): str(text) for line, text in entry["l"].items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue  # an entry we did not write: read the file again
    return entries


def _encoded(checks: TextChecks) -> dict[str, object]:
    return {
        "s": [list(pair) for pair in checks.secrets],
        "r": [[r.kind, r.name, r.line, r.runner] for r in checks.references],
        "l": {str(line): text for line, text in checks.shown.items()},
    }
