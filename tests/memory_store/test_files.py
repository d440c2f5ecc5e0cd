"""MemoryRoot: memory files read, written, removed and resolved only inside their root, never through a symlink."""

from __future__ import annotations

import ctypes
import dataclasses
import datetime
import hashlib
import marshal
import os
from pathlib import Path
from typing import Iterator

import pytest
from store_helpers import memory, write

from memory_store import (
    Enrichment,
    EnrichmentEntry,
    MemoryExistsError,
    MemoryNotFoundError,
    MemoryParseError,
    MemoryPathError,
    MemoryRoot,
    MemoryStore,
    MemoryStoreError,
    atomic_write,
    decode_doc,
    encode_doc,
    parse_memory,
    read_enrichment,
    sidecar_path,
)
from memory_store._write import write_in_folder


def tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry below ``folder``: a file's bytes, a symlink's target, a folder as "/"."""
    found: dict[str, bytes | str] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            found[rel] = "-> " + os.readlink(path)
        elif path.is_dir():
            found[rel] = "/"
        else:
            found[rel] = path.read_bytes()
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    write(folder / "secret.md", memory(name="Secret", body="outside the root\n"))
    return folder


@pytest.fixture
def files(root: Path) -> MemoryRoot:
    write(root / "user" / "tea.md", memory(name="Tea"))
    return MemoryRoot(root)


class OpenWatch:
    """inotify IN_OPEN on one path: whether anything opened it, without opening it ourselves."""

    _IN_OPEN = 0x20

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        assert self._fd >= 0 and libc.inotify_add_watch(self._fd, os.fsencode(path), self._IN_OPEN) >= 0

    def opened(self) -> bool:
        try:
            return bool(os.read(self._fd, 4096))
        except BlockingIOError:
            return False

    def close(self) -> None:
        os.close(self._fd)


@pytest.fixture
def fifo(root: Path) -> Iterator[tuple[Path, OpenWatch]]:
    path = root / "user" / "pipe.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    watch = OpenWatch(path)
    yield path, watch
    watch.close()


# --- saving and writing ------------------------------------------------------------------------


def test_save_writes_a_validated_memory_under_its_type_folder_made_when_missing(files: MemoryRoot, root: Path) -> None:
    saved = files.save(name="Atlas: Migrations!", description="how atlas migrates", type="project",
                       body="Run alembic upgrade head.", keywords=["alembic"])
    assert (saved.ref, saved.path, saved.overwritten) == (
        "mem/projects/atlas-migrations.md", root / "projects" / "atlas-migrations.md", False)
    doc = parse_memory(saved.path.read_bytes())
    assert (doc.name, doc.type, doc.keywords, doc.body) == (
        "Atlas: Migrations!", "project", ("alembic",), "Run alembic upgrade head.\n")
    assert sorted(os.listdir(root / "projects")) == ["atlas-migrations.md"]  # no temp file left


def test_save_refuses_what_the_store_would_skip_before_touching_the_disk(files: MemoryRoot, root: Path) -> None:
    before = tree(root)
    with pytest.raises(MemoryParseError, match="missing 'description'"):
        files.save(name="x", description="", type="project")
    with pytest.raises(MemoryParseError, match="unknown type"):
        files.save(name="x", description="d", type="gossip")
    # what the reader would drop, or a folder no word names (filed under projects/memory/ before)
    for blank in ("  ", "\u200b"):
        with pytest.raises(MemoryParseError, match="a keyword is empty"):
            files.save(name="x", description="d", type="user", keywords=["tea", blank])
    # one the store would load the memory without, `validate` then naming it
    with pytest.raises(MemoryParseError, match="over 100 characters"):
        files.save(name="x", description="d", type="user", keywords=["a" * 150])
    # text no file can hold: a lone surrogate, as os.fsdecode gives one
    with pytest.raises(MemoryParseError, match="lone surrogate"):
        files.save(name="x", description="d", type="user", body="caf\udce9")
    with pytest.raises(MemoryParseError, match="not valid UTF-8"):
        files.write("user/w.md", "---\nname: n\ndescription: d\ntype: user\n---\n\udce9\n", overwrite=False)
    for project in ("", "../..", "!!!"):
        with pytest.raises(MemoryParseError, match="has no letter or digit"):
            files.save(name="x", description="d", type="project", project=project)
    assert tree(root) == before


def test_a_root_that_is_no_folder_of_memories_is_refused_by_memoryroot_as_by_every_door(tmp_path: Path) -> None:
    home = os.path.expanduser("~")
    for path, words in ((home, "is the home folder"), (os.path.dirname(home), "holds the home folder"),
                        ("/", "is the file system root"), (str(tmp_path / "x\0"), "holds a NUL character")):
        with pytest.raises(MemoryStoreError, match=words):
            MemoryRoot(path)


def test_save_never_replaces_a_memory_unless_asked(files: MemoryRoot, root: Path) -> None:
    with pytest.raises(MemoryExistsError, match="^mem/user/tea.md already exists$"):
        files.save(name="Tea", description="now oolong", type="user", body="Oolong.")
    assert parse_memory((root / "user" / "tea.md").read_bytes()).name == "Tea"
    (root / "user" / "tea.md").chmod(0o640)
    saved = files.save(name="Tea", description="now oolong", type="user", body="Oolong.", overwrite=True)
    assert saved.overwritten and parse_memory(saved.path.read_bytes()).body == "Oolong.\n"
    assert (saved.path.stat().st_mode & 0o777) == 0o640  # replacing keeps the file's permission bits
    assert sorted(os.listdir(root / "user")) == ["tea.md"]


def test_a_new_file_never_replaces_one_that_appeared_meanwhile(root: Path) -> None:
    write(root / "late.md", "the other writer's\n")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(FileExistsError):
            write_in_folder(fd, "late.md", b"ours\n", replace=False)
    finally:
        os.close(fd)
    assert (root / "late.md").read_text() == "the other writer's\n" and os.listdir(root) == ["late.md"]


def test_a_name_of_240_bytes_is_not_too_long_because_of_the_temp_file(files: MemoryRoot, root: Path) -> None:
    name = "\U00020000" * 60  # 60 characters of 4 bytes: the longest slug, 240 bytes before ".md"
    saved = files.save(name=name, description="a long name", type="project")
    assert len(os.fsencode(saved.path.name)) == 243 and parse_memory(saved.path.read_bytes()).name == name
    target = root / ("n" * 250)
    assert atomic_write(target, "x") == target and target.read_text() == "x"


def test_write_into_a_type_folder_that_is_a_symlink_out_of_the_root_is_refused(
    files: MemoryRoot, root: Path, outside: Path
) -> None:
    (root / "reference").symlink_to(outside, target_is_directory=True)
    before_inside, before_outside = tree(root), tree(outside)
    with pytest.raises(MemoryPathError, match="refused mem/reference/leak.md: reference is a symlink") as raised:
        files.save(name="Leak", description="d", type="reference")
    assert "\n" not in str(raised.value)
    with pytest.raises(MemoryPathError, match="is a symlink"):
        files.write("reference/secret.md", "overwritten", overwrite=True)
    assert tree(root) == before_inside and tree(outside) == before_outside


def test_write_through_a_type_folder_symlinked_inside_the_root_is_refused_too(files: MemoryRoot, root: Path) -> None:
    (root / "feedback").symlink_to(root / "user", target_is_directory=True)
    before = tree(root)
    with pytest.raises(MemoryPathError, match="feedback is a symlink"):
        files.save(name="Loop", description="d", type="feedback")
    with pytest.raises(MemoryPathError, match="feedback is a symlink"):
        files.remove("feedback/tea.md")
    assert tree(root) == before


def test_write_over_a_symlinked_file_is_refused_and_its_target_kept(
    files: MemoryRoot, root: Path, outside: Path
) -> None:
    (root / "user" / "inside.md").symlink_to(root / "user" / "tea.md")
    (root / "user" / "escape.md").symlink_to(outside / "secret.md")
    before_inside, before_outside = tree(root), tree(outside)
    for rel in ("user/inside.md", "user/escape.md"):
        for overwrite in (False, True):
            with pytest.raises(MemoryPathError, match="is a symlink"):
                files.write(rel, memory(name="Replaced"), overwrite=overwrite)
    assert tree(root) == before_inside and tree(outside) == before_outside


def test_write_over_a_dangling_symlink_creates_nothing_where_it_points(files: MemoryRoot, root: Path, tmp_path: Path) -> None:
    (root / "user" / "dangling.md").symlink_to(tmp_path / "nowhere" / "made.md")
    (root / "project").mkdir()
    (root / "project" / "dangling.md").symlink_to(root / "project" / "made.md")
    for rel in ("user/dangling.md", "project/dangling.md"):
        for overwrite in (False, True):
            with pytest.raises(MemoryPathError, match="is a symlink"):
                files.write(rel, memory(), overwrite=overwrite)
    assert not (tmp_path / "nowhere").exists() and not (root / "project" / "made.md").exists()


def test_a_fifo_at_the_path_is_refused_and_never_opened(files: MemoryRoot, fifo: tuple[Path, OpenWatch]) -> None:
    path, watch = fifo
    with pytest.raises(MemoryPathError, match="not a regular file"):
        files.read_bytes("user/pipe.md")
    with pytest.raises(MemoryPathError, match="not a regular file"):
        files.resolve("user/pipe.md")
    for overwrite in (False, True):
        with pytest.raises(MemoryPathError, match="not a regular file"):
            files.write("user/pipe.md", memory(), overwrite=overwrite)
    assert not watch.opened() and path.is_fifo()


@pytest.mark.parametrize("rel", [
    "../outside/secret.md", "user/../../outside/secret.md", "/etc/passwd.md", "", "user//tea.md", "./user/tea.md",
    "user/.hidden.md", ".recall-kit/x.md", "user", "user/tea.txt", "MEMORY.md", "user/tea.md\x00",
])
def test_paths_that_are_not_plain_memory_paths_inside_the_root_are_refused(files: MemoryRoot, root: Path, rel: str) -> None:
    before = tree(root)
    for attempt in (files.read_bytes, files.resolve, files.remove, lambda r: files.write(r, memory(), overwrite=True)):
        with pytest.raises(MemoryPathError, match="^refused mem/"):
            attempt(rel)
    assert tree(root) == before


# --- reading, resolving and removing ------------------------------------------------------------


def test_read_gives_the_bytes_and_follows_a_symlinked_memory_only_inside_the_root(
    files: MemoryRoot, root: Path, outside: Path
) -> None:
    (root / "user" / "alias.md").symlink_to(root / "user" / "tea.md")
    (root / "user" / "escape.md").symlink_to(outside / "secret.md")
    assert files.read_bytes("user/tea.md") == (root / "user" / "tea.md").read_bytes()
    assert files.read_bytes("user/alias.md") == (root / "user" / "tea.md").read_bytes()
    assert files.resolve("user/alias.md") == root / "user" / "alias.md"
    for attempt in (files.read_bytes, files.resolve):
        with pytest.raises(MemoryPathError, match="refused mem/user/escape.md: symlink points outside the root"):
            attempt("user/escape.md")


def test_read_of_a_ref_whose_folder_is_a_symlink_out_of_the_root_is_refused(
    files: MemoryRoot, root: Path, outside: Path
) -> None:
    (root / "reference").symlink_to(outside, target_is_directory=True)
    for attempt in (files.read_bytes, files.resolve):
        with pytest.raises(MemoryPathError, match="refused mem/reference/secret.md: reference is a symlink"):
            attempt("reference/secret.md")


def test_read_is_capped_like_the_scan_and_a_missing_file_is_not_found(root: Path) -> None:
    write(root / "big.md", memory(body="x" * 2000))
    files = MemoryRoot(root, max_bytes=1000)
    with pytest.raises(MemoryStoreError, match=r"cannot read mem/big.md: file is \d+ bytes, over the 1000-byte limit"):
        files.read_bytes("big.md")
    with pytest.raises(MemoryNotFoundError, match="no memory file mem/gone.md"):
        files.read_bytes("gone.md")
    with pytest.raises(MemoryNotFoundError, match="no memory file mem/nowhere/gone.md"):
        files.read_bytes("nowhere/gone.md")


def test_remove_deletes_the_file_or_the_link_never_the_target(files: MemoryRoot, root: Path) -> None:
    (root / "user" / "alias.md").symlink_to(root / "user" / "tea.md")
    files.remove("user/alias.md")
    assert not (root / "user" / "alias.md").is_symlink() and (root / "user" / "tea.md").is_file()
    files.remove("user/tea.md")
    assert not (root / "user").exists()  # emptied: the folder goes too
    with pytest.raises(MemoryNotFoundError, match="no memory file mem/user/tea.md"):
        files.remove("user/tea.md")


def test_a_store_hands_out_its_roots_and_resolves_refs_by_label(root: Path, tmp_path: Path) -> None:
    write(root / "user" / "tea.md", memory(name="Tea"))
    with MemoryStore.open(root, ("other", tmp_path / "other"), watch=False, allow_missing=True) as store:
        assert store.root("mem").path == root and store.root("other").label == "other"
        assert store.read_bytes("mem/user/tea.md") == (root / "user" / "tea.md").read_bytes()
        assert store.resolve("mem/user/tea.md") == root / "user" / "tea.md"
        with pytest.raises(MemoryPathError, match="unknown root 'nope' in 'nope/x.md'"):
            store.read_bytes("nope/x.md")
        with pytest.raises(MemoryNotFoundError, match="memory root does not exist"):
            store.read_bytes("other/x.md")
        store.remove("mem/user/tea.md")
    assert not (root / "user" / "tea.md").exists()


def test_errors_are_store_errors_and_the_os_errors_they_mean() -> None:
    assert issubclass(MemoryExistsError, MemoryStoreError) and issubclass(MemoryExistsError, FileExistsError)
    assert issubclass(MemoryNotFoundError, MemoryStoreError) and issubclass(MemoryNotFoundError, FileNotFoundError)
    assert issubclass(MemoryPathError, MemoryStoreError)
    assert str(MemoryExistsError("mem/a.md already exists")) == "mem/a.md already exists"


# --- enrichment --------------------------------------------------------------------------------


def _entry(root: Path, rel: str, keywords: tuple[str, ...] = ("k",)) -> EnrichmentEntry:
    return EnrichmentEntry(rel, hashlib.sha256((root / rel).read_bytes()).hexdigest(), keywords)


def test_recording_enrichment_writes_the_roots_own_sidecar_and_drops_gone_memories(files: MemoryRoot, root: Path) -> None:
    assert not files.has_sidecar()
    files.record_enrichment([EnrichmentEntry("gone.md", "0" * 64, ("old",))])
    written = files.record_enrichment([_entry(root, "user/tea.md")], live_paths=["user/tea.md"])
    assert written == sidecar_path(root) and files.has_sidecar()
    entries, problems = read_enrichment(written)
    assert problems == [] and set(entries) == {"user/tea.md"}
    assert sorted(os.listdir(root / ".recall-kit")) == [".gitignore", "enrichment.jsonl", "enrichment.jsonl.lock"]


def test_recording_enrichment_never_goes_through_a_symlinked_sidecar(files: MemoryRoot, root: Path, outside: Path) -> None:
    (root / ".recall-kit").symlink_to(outside, target_is_directory=True)
    before = tree(outside)
    with pytest.raises(MemoryPathError, match=r"refused mem/.recall-kit/enrichment.jsonl: .recall-kit is a symlink"):
        files.record_enrichment([_entry(root, "user/tea.md")])
    assert not files.has_sidecar() and tree(outside) == before
    (root / ".recall-kit").unlink()
    (root / ".recall-kit").mkdir()
    (root / ".recall-kit" / "enrichment.jsonl").symlink_to(outside / "sidecar.jsonl")
    with pytest.raises(MemoryPathError, match="it is a symlink; symlinks are not followed"):
        files.record_enrichment([_entry(root, "user/tea.md")])
    assert not files.has_sidecar() and tree(outside) == before


def test_a_store_records_enrichment_in_the_sidecar_it_was_given(root: Path, tmp_path: Path) -> None:
    write(root / "user" / "tea.md", memory(name="Tea"))
    mapped = tmp_path / "dataset" / "enrichment.jsonl"
    with MemoryStore.open(root, watch=False, enrichment={"mem": mapped}) as store:
        assert store.record_enrichment("mem", [_entry(root, "user/tea.md", ("sencha",))]) == mapped
        assert store.root("mem").has_sidecar()
    assert not (root / ".recall-kit").exists()
    with MemoryStore.open(root, watch=False, enrichment={"mem": mapped}) as store:
        enrichment = store.snapshot().docs["mem/user/tea.md"].enrichment
    assert enrichment is not None and enrichment.keywords == ("sencha",)


# --- the doc codec -----------------------------------------------------------------------------


def test_the_doc_codec_round_trips_every_field_but_enrichment(root: Path) -> None:
    path = write(root / "a.md", memory(extra="keywords: [db, {x: 1}]\nusage_scenarios: [migrate]\nowner: ops\n"))
    doc = parse_memory(path.read_bytes(), scope="mem", path="a.md", abspath=path, mtime=12.5)
    assert doc.problems  # kept by the cache too: a restored doc still tells `validate`
    assert decode_doc(encode_doc(doc)) == doc
    assert decode_doc(memoryview(encode_doc(dataclasses.replace(doc, enrichment=Enrichment(("x",)))))) == doc
    with pytest.raises(ValueError):
        encode_doc(dataclasses.replace(doc, extra={"when": datetime.date(2024, 1, 2)}))


@pytest.mark.parametrize("field, value, named", [
    (0, 7, "'scope'"), (1, None, "'path'"), (3, 42, "'name'"), (4, b"bytes", "'description'"),
    (5, "secret-type", "'type'"), (6, "not a list", "'keywords'"), (6, ("ok", 3), "'keywords'"),
    (7, ["x"], "'extra'"), (7, {1: "x"}, "'extra'"), (8, 0.5, "'body'"), (9, "now", "'mtime'"),
    (10, True, "'size'"), (10, -1, "'size'"), (11, "abc", "'content_hash'"), (12, "one", "'usage_scenarios'"),
    (13, "one", "'problems'"),
])
def test_the_doc_codec_refuses_a_blob_with_a_field_of_the_wrong_shape(
    root: Path, field: int, value: object, named: str
) -> None:
    path = write(root / "a.md", memory())
    fields = list(marshal.loads(encode_doc(parse_memory(path.read_bytes(), scope="mem", path="a.md", abspath=path))))
    fields[field] = value
    with pytest.raises(ValueError, match=named):
        decode_doc(marshal.dumps(tuple(fields)))


@pytest.mark.parametrize("blob", [b"", b"\x00garbage", marshal.dumps(("too", "short")), marshal.dumps([1] * 14)])
def test_the_doc_codec_refuses_what_is_not_an_encoded_doc(blob: bytes) -> None:
    with pytest.raises(ValueError, match="not an encoded memory"):
        decode_doc(blob)


# --- whether enrichment can be recorded ------------------------------------------------------------


def test_a_root_whose_sidecar_can_be_written_says_so(files: MemoryRoot, root: Path) -> None:
    assert files.sidecar_refusal() is None
    files.record_enrichment([_entry(root, "user/tea.md")])
    assert files.sidecar_refusal() is None


@pytest.mark.parametrize("where", [".recall-kit", ".recall-kit/enrichment.jsonl", ".recall-kit/enrichment.jsonl.lock"])
def test_a_sidecar_folder_file_or_lock_that_is_a_symlink_is_a_refusal_named_in_one_line(
    files: MemoryRoot, root: Path, outside: Path, where: str
) -> None:
    if where != ".recall-kit":
        (root / ".recall-kit").mkdir()
    (root / where).symlink_to(outside / "secret.md" if where != ".recall-kit" else outside)
    before = tree(outside)
    reason = files.sidecar_refusal()
    assert reason is not None and reason.startswith(f"mem/{where}: ") and "symlink" in reason and "\n" not in reason
    with pytest.raises(MemoryStoreError):
        files.record_enrichment([_entry(root, "user/tea.md")])
    assert tree(outside) == before


def test_a_sidecar_folder_that_is_a_file_is_reported_and_refused(files: MemoryRoot, root: Path) -> None:
    (root / ".recall-kit").write_text("not a folder")
    assert files.sidecar_refusal() == "mem/.recall-kit: the sidecar folder is not a folder"
    with MemoryStore.open(root, watch=False) as store:
        assert [(e.ref, e.reason) for e in store.snapshot().errors] == [
            ("mem/.recall-kit", "the sidecar folder is not a folder")]


@pytest.mark.parametrize("where, what", [
    (".recall-kit/enrichment.jsonl", "sidecar"), (".recall-kit/enrichment.jsonl.lock", "sidecar's lock"),
])
def test_a_fifo_at_the_sidecar_or_its_lock_is_refused_without_being_opened(
    files: MemoryRoot, root: Path, where: str, what: str
) -> None:
    (root / ".recall-kit").mkdir()
    os.mkfifo(root / where)  # opened for reading, it would block until a writer came
    assert files.sidecar_refusal() == f"mem/{where}: {what} is not a regular file"
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    assert list(snapshot.docs) == ["mem/user/tea.md"]
    assert (root / where).is_fifo()
