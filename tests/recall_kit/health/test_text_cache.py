"""Doctor's per-file cache: a second run reads only the files that changed and finds the same; a cache
file that is not this user's own is not used, and the run still finds everything."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from doctor_support import TOKEN, sick_folder, write_memory
from recall_kit.health import HealthPlan, HealthRoot, RecallSet, check_health


def plan(folder: Path, project: Path) -> HealthPlan:
    return HealthPlan((HealthRoot(str(folder), "project", None, str(project)),), (RecallSet("t", (str(folder),)),))


def findings(report: object) -> list[tuple[object, ...]]:
    return sorted((f.kind, f.files, f.line, f.message) for f in report.findings)  # type: ignore[attr-defined]


def test_a_second_run_reuses_what_it_read_and_rereads_what_changed(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    cache = tmp_path / "cache"
    first = check_health(plan(sick.folder, sick.project), cache_dir=cache)
    (cached,) = cache.glob("doctor-text-*.json")
    assert oct(cached.stat().st_mode & 0o777) == "0o600" and TOKEN not in cached.read_text()
    assert findings(check_health(plan(sick.folder, sick.project), cache_dir=cache)) == findings(first)
    write_memory(sick.folder, "misc.md", "Misc", "misc", f"now with a token {TOKEN}\n")
    changed = check_health(plan(sick.folder, sick.project), cache_dir=cache)
    assert ("secret", (str(sick.folder / "misc.md"),)) in {(f.kind, f.files) for f in changed.findings}
    assert len(json.loads(cached.read_text())) == 8  # both versions of misc.md, the others once


def test_a_cache_file_that_is_a_symlink_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sick = sick_folder(tmp_path)
    cache = tmp_path / "cache"
    check_health(plan(sick.folder, sick.project), cache_dir=cache)
    (cached,) = cache.glob("doctor-text-*.json")
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps({key: {"s": [], "r": [], "l": {}} for key in json.loads(cached.read_text())}))
    cached.unlink()
    os.symlink(planted, cached)
    report = check_health(plan(sick.folder, sick.project), cache_dir=cache)
    assert any(f.kind == "secret" for f in report.findings)  # the planted "nothing here" was not believed
    assert "doctor's cache" in caplog.text


def test_clearing_the_caches_or_forgetting_a_memory_removes_doctors_too_and_older_versions_go(tmp_path: Path) -> None:
    from memory_store import MemoryStore
    from recall_kit.cache import clear_cache_files, forget_memory

    sick = sick_folder(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    (cache / "doctor-text-0000older.json").write_text("{}")  # what an older doctor left
    check_health(plan(sick.folder, sick.project), cache_dir=cache)
    assert len(list(cache.glob("doctor-text-*.json"))) == 1  # the older version went when this one was written
    with MemoryStore.open(sick.folder, watch=False) as store:
        forget_memory(store, f"{sick.folder.name}/misc.md", cache_dir=cache)
    assert list(cache.glob("doctor-text-*.json")) == []  # it held lines of the memory now forgotten
    check_health(plan(sick.folder, sick.project), cache_dir=cache)
    clear_cache_files(cache)
    assert list(cache.glob("doctor-text-*.json")) == []


@pytest.mark.parametrize("damage", [
    '{"a":',  # cut short
    "[" * 100_000 + "]" * 100_000,  # nested past what json reads
    '{"%s": {"s": [[Infinity, 1]], "r": [], "l": {}}}',  # a line number no int holds
    '{"%s": {"s": [], "r": [], "l": []}}',  # shown lines that are not a mapping
])
def test_a_damaged_cache_file_is_ignored_and_rebuilt(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    sick = sick_folder(tmp_path)
    cache = tmp_path / "cache"
    first = check_health(plan(sick.folder, sick.project), cache_dir=cache)
    (cached,) = cache.glob("doctor-text-*.json")
    whole = cached.read_text()
    cached.write_text(damage.replace("%s", next(iter(json.loads(whole)))))
    assert findings(check_health(plan(sick.folder, sick.project), cache_dir=cache)) == findings(first)
    assert json.loads(cached.read_text()) == json.loads(whole)  # written again whole, not left off for good
    assert "doctor's cache off" not in caplog.text


def test_what_a_killed_doctor_left_goes_with_the_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memory_store import MemoryStore
    from recall_kit.cache import clear_cache_files, forget_memory

    sick = sick_folder(tmp_path)
    cache = tmp_path / "cache"

    replace = os.replace

    def killed(source: str, target: str) -> None:
        if "doctor-text" in os.fspath(target):
            raise KeyboardInterrupt  # as kill -9 between the write and the rename: the temp file stays
        replace(source, target)

    def forget() -> None:
        with MemoryStore.open(sick.folder, watch=False) as store:
            forget_memory(store, f"{sick.folder.name}/misc.md", cache_dir=cache)

    for clear in (lambda: clear_cache_files(cache), forget):
        with monkeypatch.context() as patched:
            patched.setattr(os, "replace", killed)
            with pytest.raises(KeyboardInterrupt):
                check_health(plan(sick.folder, sick.project), cache_dir=cache)
        (left,) = [path for path in cache.iterdir() if "doctor-text" in path.name]
        assert left.name.endswith(".tmp") and left.stat().st_size  # lines of the memories, scrubbed
        clear()
        assert not [path for path in cache.iterdir() if "doctor-text" in path.name]
