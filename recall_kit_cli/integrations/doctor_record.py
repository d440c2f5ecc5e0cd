"""When ``recall-kit doctor`` last checked each folder and last found something there, for
``recall-kit stats``.

One private file in the state folder, ``doctor.json`` (0600, this user's, never through a symlink:
``memory_store.open_private``), never in a memory folder: a memory folder may be committed, and what
doctor found is the user's business. Written whole (a temp file renamed over it, under a lock), at
most ``MAX_RECORDED_FOLDERS`` folders, the least recently checked dropped first.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memory_store import (
    RecallKitError, open_private, parse_json, private_folder, private_lock, read_private, recorded_time,
)
from recall_kit.health import KIND_TITLES, HealthReport
from recall_kit_cli.integrations._runtime import runtime_paths

MAX_RECORDED_FOLDERS = 500
FINGERPRINT_MAX_ENTRIES = 50_000  # as many as a store holds (memory_store.MAX_ROOT_ENTRIES)
_MAX_BYTES = 1 << 20  # 500 folders of counts is about 100 KB


def record_path(environ: Mapping[str, str]) -> Path:
    """Where the record is: ``doctor.json`` in the state folder (``$XDG_STATE_HOME/recall-kit``)."""
    return runtime_paths(dict(environ)).state / "doctor.json"


def read_record(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Folder -> {"checked": time, "counts": {kind: n}, "found": time or None, "found_counts": {kind: n}}
    (found: the last check that found something); {} without a record.
    UnsafePathError when the file is a symlink, not a regular file or another user's."""
    data = read_private(record_path(environ), _MAX_BYTES)
    if data is None:
        return {}
    try:
        value = parse_json(data)
    except ValueError:
        return {}
    folders = value.get("folders") if isinstance(value, dict) else None
    if not isinstance(folders, dict):
        return {}
    entries = ((str(folder), _entry(raw)) for folder, raw in folders.items())
    return {folder: entry for folder, entry in entries if entry is not None}


def _entry(raw: object) -> dict[str, Any] | None:
    """A folder's entry as ``record`` writes it, or None for one it never wrote (a time of 1e20 or
    "soon", counts that are not counts): left out, as the trail leaves out such a line."""
    if not isinstance(raw, dict):
        return None
    checked = recorded_time(raw.get("checked"))
    counts, found_counts = _counts(raw.get("counts")), _counts(raw.get("found_counts", {}))
    found = raw.get("found")
    if checked is None or counts is None or found_counts is None or (found is not None and recorded_time(found) is None):
        return None
    return {"checked": checked, "counts": counts, "found": recorded_time(found), "found_counts": found_counts,
            "fingerprint": raw.get("fingerprint")}


def _counts(raw: object) -> dict[str, int] | None:
    if not isinstance(raw, dict):
        return None
    counts = {}
    for kind, n in raw.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            return None
        counts[str(kind)] = n
    return counts


def record(report: HealthReport, environ: Mapping[str, str], *, now: float | None = None) -> None:
    """Note, for each folder ``report`` checked, that doctor checked it now and what it found there.
    RecallKitError or OSError when the state folder cannot be used (the caller says so and goes on)."""
    now = time.time() if now is None else now
    path = record_path(environ)
    private_folder(path.parent)
    with private_lock(path.with_name(path.name + ".lock")):
        folders = read_record(environ)
        for root in report.roots:
            counts: dict[str, int] = {}
            for finding in report.findings:
                if finding.files and finding.files[0].startswith(root.path.rstrip("/") + "/") or finding.files[:1] == (root.path,):
                    counts[finding.kind] = counts.get(finding.kind, 0) + 1
            before = folders.get(root.path, {})
            folders[root.path] = {
                "checked": now, "counts": counts, "found": now if counts else before.get("found"),
                "fingerprint": fingerprint(root.path),
                "found_counts": counts if counts else before.get("found_counts", {}),
            }
        kept = sorted(folders.items(), key=lambda item: -item[1]["checked"])[:MAX_RECORDED_FOLDERS]
        _write(path, json.dumps({"version": 1, "folders": dict(kept)}, indent=1, sort_keys=True) + "\n")


def fingerprint(folder: str) -> list[int]:
    """What changes when a folder's memories or index change, for the cost of listing it: how many
    visible files it holds and the newest mtime_ns among them and its folders (hidden entries and
    symlinked folders skipped, as the store walks)."""
    count = newest = 0
    pending = [folder]
    while pending and count < FINGERPRINT_MAX_ENTRIES:
        current = pending.pop()
        try:
            with os.scandir(current) as listing:
                for entry in listing:
                    if entry.name.startswith("."):
                        continue
                    try:
                        info = entry.stat(follow_symlinks=False)
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                    except OSError:
                        continue
                    count += 1
                    newest = max(newest, info.st_mtime_ns)
        except OSError:
            continue
    return [count, newest]


def summary(folders: Sequence[str], environ: Mapping[str, str]) -> str:
    """doctor's counts at its last check of ``folders``, as one line, and whether they changed since:
    what ``hook status`` shows, for the cost of reading the record and listing the folders."""
    try:
        recorded = read_record(environ)
    except (RecallKitError, OSError) as exc:
        return f"doctor: its record cannot be read ({exc})"
    entries = [recorded.get(os.path.abspath(folder)) for folder in folders]
    if not folders:
        return "doctor: no memory folder here yet"
    if any(entry is None for entry in entries):
        return "doctor: not run on the folders here yet (recall-kit doctor)"
    counts: dict[str, int] = {}
    for entry in entries:
        assert entry is not None
        for kind, n in entry["counts"].items():
            counts[kind] = counts.get(kind, 0) + n
    when = _when(min(e["checked"] for e in entries if e is not None))
    changed = any(e is not None and e.get("fingerprint") != fingerprint(os.path.abspath(f)) for e, f in zip(entries, folders))
    after = "; the folders changed since: recall-kit doctor" if changed else ""
    if not counts:
        return f"doctor ({when}): nothing found{after}"
    titles: dict[str, str] = {str(kind): title for kind, title in KIND_TITLES.items()}
    shown = ", ".join(f"{counts[k]} {title}" for k, title in titles.items() if counts.get(k))
    return f"doctor ({when}): {sum(counts.values())} findings ({shown}){after or '; recall-kit doctor shows them'}"


def _write(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = open_private(temp, os.O_WRONLY | os.O_EXCL, create=True)
    try:
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.replace(temp, path)
    except OSError:
        os.unlink(temp)
        raise


def last_found(folders: list[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """For ``stats``: when doctor last checked these folders and last found something, and what; None
    when it never checked any of them. RecallKitError when the record cannot be read."""
    recorded = read_record(environ)
    mine = [recorded[f] for f in (os.path.abspath(p) for p in folders) if f in recorded]
    if not mine:
        return None
    checked = max(entry["checked"] for entry in mine)
    found_times = [entry["found"] for entry in mine if entry["found"] is not None]
    found = max(found_times) if found_times else None
    return {"checked": checked, "counts": _summed(mine, "counts"), "found": found,
            "found_counts": _summed([e for e in mine if e.get("found") == found], "found_counts") if found else {}}


def _summed(entries: list[dict[str, Any]], key: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for entry in entries:
        for kind, n in entry[key].items():
            counts[kind] = counts.get(kind, 0) + n
    return counts



def doctor_stats(folders: Sequence[str], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``last_found`` for ``stats --json``: {"checked": null} when doctor never checked these folders,
    and the reason in "error" when the record cannot be read."""
    try:
        found = last_found(list(folders), os.environ if environ is None else environ)
    except (RecallKitError, OSError) as exc:
        return {"checked": None, "error": str(exc)}
    return found if found is not None else {"checked": None}


def doctor_line(stats: Mapping[str, Any]) -> str:
    """``doctor_stats`` as the line ``stats`` prints."""
    if stats.get("error"):
        return f"doctor: its record cannot be read ({stats['error']})"
    if stats.get("checked") is None:
        return "doctor: never run on these folders (recall-kit doctor)"
    checked = _when(stats["checked"])
    if not stats.get("found"):
        return f"doctor: nothing found, ever (last checked {checked})"
    found = _when(stats["found"])
    titles: dict[str, str] = {str(kind): title for kind, title in KIND_TITLES.items()}
    found_counts = stats.get("found_counts", {})
    shown = ", ".join(f"{found_counts[k]} {title}" for k, title in titles.items() if found_counts.get(k))
    now = sum(stats.get("counts", {}).values())
    latest = f"{now} at its last check, {checked}" if now else f"nothing at its last check, {checked}"
    return f"doctor: last found something {found} ({shown}); {latest}"


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))
