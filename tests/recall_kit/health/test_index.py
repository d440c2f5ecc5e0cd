"""The index rules: what of MEMORY.md an agent loads (both clients' algorithm, in UTF-16 units), which
links count, and the mending, which keeps every other byte."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from doctor_support import write_memory
from memory_store import MemoryRoot
from recall_kit.health import (
    HealthPlan,
    HealthRoot,
    IndexReader,
    RecallSet,
    apply_repair,
    check_health,
    plan_repairs,
    seen_lines,
)

CLAUDE = IndexReader("Claude Code", 200, 25_000)


def test_seen_lines_counts_file_lines_after_the_clients_trim() -> None:
    assert seen_lines("\n".join(f"l{n}" for n in range(1, 201)), CLAUDE) == 200
    assert seen_lines("\n".join(f"l{n}" for n in range(1, 202)), CLAUDE) == 200
    # leading blank lines are trimmed before counting, so line 203 of the file is the 200th loaded
    assert seen_lines("\n\n  \n" + "\n".join(f"l{n}" for n in range(1, 260)), CLAUDE) == 203
    assert seen_lines("", CLAUDE) == 0 and seen_lines("\ufeff \n", CLAUDE) == 0  # JavaScript's trim takes the BOM


def test_seen_lines_cuts_at_the_last_line_break_before_the_character_limit() -> None:
    small = IndexReader("x", 200, 100)
    lines = ["a" * 40, "b" * 40, "c" * 40]  # breaks at 40 and 81: the third line ends past 100
    assert seen_lines("\n".join(lines), small) == 2
    assert seen_lines("a" * 150, small) == 0  # no break before the limit: the first line is cut in its middle
    # UTF-16 code units: an emoji is two, as JavaScript's length counts it
    assert seen_lines("\n".join(["😀" * 25, "b" * 10]), IndexReader("x", 200, 55)) == 1
    assert seen_lines("\n".join(["é" * 25, "b" * 10]), IndexReader("x", 200, 55)) == 2


def plan(folder: Path) -> HealthPlan:
    return HealthPlan((HealthRoot(str(folder), "project", CLAUDE),), (RecallSet("t", (str(folder),)),))


def test_mending_removes_the_dead_entry_appends_the_missing_one_and_keeps_every_other_byte(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "kept.md", "Kept", "A memory that is listed", "x\n")
    write_memory(folder, "sub/new.md", "New [one](x) \x1b[31m", "Its description\nspans two lines", "y\n")
    original = (
        "\ufeff# Index\r\n"
        "  *  [Kept](kept.md) — listed, with odd spacing\r\n"
        "- [Gone](gone.md#part \"title\") — dead\r\n"
        "- [Also gone](<gone two.md>)\r\n"
        "Some prose without a link, and a tab\there\r\n"
        "- [Two links](kept.md) and [a dead one](dead.md)"  # no final newline
    )
    (folder / "MEMORY.md").write_bytes(original.encode("utf-8"))
    report = check_health(plan(folder), use_cache=False)
    repairs = plan_repairs(report)
    assert len(repairs) == 1 and repairs[0].removed_lines == (3, 4) and repairs[0].added == ("memory/sub/new.md",)
    new = repairs[0].new.decode("utf-8")
    kept = original.split("\r\n")
    assert new.startswith(kept[0] + "\r\n" + kept[1] + "\r\n" + kept[4] + "\r\n" + kept[5] + "\r\n")
    entry = new.split("\r\n")[4]
    # the memory's own text cannot end the title, start a link or a line, or send a terminal escape
    assert entry == r"- [New \[one\](x) \[31m](sub/new.md) — Its description spans two lines"
    backup = apply_repair(repairs[0])
    assert backup.read_bytes() == original.encode("utf-8") and (folder / "MEMORY.md").read_bytes() == repairs[0].new
    assert oct(backup.stat().st_mode & 0o777) == "0o600"
    assert (folder / ".recall-kit" / ".gitignore").read_text() == "*\n"  # the backup never goes to git
    again = check_health(plan(folder), use_cache=False)
    assert [f.detail["problem"] for f in again.findings] == ["dead_link"] and not again.findings[0].fixable


def test_an_index_that_is_not_utf8_is_reported_but_never_rewritten(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "a.md", "Alpha memory", "Something worth remembering about alpha", "x\n")
    (folder / "MEMORY.md").write_bytes(b"- [Gone](gone.md) \xff\n")
    report = check_health(plan(folder), use_cache=False)
    assert {f.detail["problem"] for f in report.findings} == {"dead_link", "unlisted"}
    assert not any(f.fixable for f in report.findings) and plan_repairs(report) == []


def test_a_memory_is_covered_by_the_nearest_index_above_it(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "top.md", "Editor", "Neovim with LazyVim on Arch Linux", "x\n")
    write_memory(folder, "team/shared.md", "Deploys", "Production deploys from main through GitHub Actions", "y\n")
    write_memory(folder, "team/deep/more.md", "Database pool", "Postgres pool of twenty connections per pod", "z\n")
    (folder / "MEMORY.md").write_text("- [Top](top.md)\n")
    (folder / "team" / "MEMORY.md").write_text("- [Shared](shared.md)\n- [More](./deep/more.md)\n- [Up](../top.md)\n")
    assert check_health(plan(folder), use_cache=False).findings == ()


def test_an_appended_entry_escapes_the_description_so_it_cannot_link_show_an_image_or_end_the_title(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "tea.md", "Tea <b> `x", "green tea, see [old notes](gone.md) ![img](http://example.com/a.png) "
                 "<http://example.com> `code`", "x\n")
    (folder / "MEMORY.md").write_text("# Index\n")
    repairs = plan_repairs(check_health(plan(folder), use_cache=False))
    entry = repairs[0].new.decode("utf-8").split("\n")[1]
    assert entry == (r"- [Tea \<b> \`x](tea.md) — green tea, see \[old notes\](gone.md) "
                     r"!\[img\](http://example.com/a.png) \<http://example.com> \`code\`")
    apply_repair(repairs[0])
    assert check_health(plan(folder), use_cache=False).findings == ()  # gone.md is no link of the index


def test_a_link_through_a_symlinked_folder_to_a_memory_is_its_entry_and_only_a_link_to_no_memory_is_dead(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "user/tea.md", "Tea", "Green tea every morning, no sugar", "x\n")
    (folder / "people").symlink_to("user", target_is_directory=True)
    outside = tmp_path / "outside"
    write_memory(outside, "coffee.md", "Coffee", "Coffee after lunch only", "y\n")
    (folder / "elsewhere").symlink_to(outside, target_is_directory=True)
    index = "# Index\n- [Tea](people/tea.md) — mine\n- [Gone](people/gone.md)\n- [Coffee](elsewhere/coffee.md)\n"
    (folder / "MEMORY.md").write_text(index)
    report = check_health(plan(folder), use_cache=False)
    drift = [(f.detail["problem"], f.line) for f in report.findings if f.kind == "index_drift"]
    assert drift == [("dead_link", 3), ("dead_link", 4)]  # tea.md is listed; no line names it unlisted
    repairs = plan_repairs(report)
    assert repairs[0].removed_lines == (3, 4) and repairs[0].added == ()
    assert repairs[0].new.decode("utf-8") == "# Index\n- [Tea](people/tea.md) — mine\n"  # the user's line stays


def _age(backup: Path) -> tuple[str, int]:
    stamp, _, attempt = backup.name.partition("-")
    return stamp, int(attempt or 0)


def test_two_indexes_whose_paths_read_alike_keep_their_own_backups_the_last_20_of_each(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    root = MemoryRoot(folder)
    versions = {rel: [f"{rel} version {n}\n".encode() for n in range(26)] for rel in ("a__b/MEMORY.md", "a/b/MEMORY.md")}
    for rel, [first, *_] in versions.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(first)
    for n in range(1, 26):  # within a second or two: the same time stamp, told apart by the attempt
        for rel, written in versions.items():
            root.replace_index(rel, written[n], expected=written[n - 1])
    kept = folder / ".recall-kit" / "index-backups"
    assert sorted(path.name for path in kept.iterdir()) == ["a%5F%5Fb__MEMORY.md", "a__b__MEMORY.md"]  # a folder per index, its path readable
    for rel, written in versions.items():
        mine = sorted((kept / rel.replace("_", "%5F").replace("/", "__")).iterdir(), key=_age)
        assert [path.read_bytes() for path in mine] == written[5:25]  # the old bytes of its last 20 writes, named in age order



@pytest.mark.parametrize("first", ["a" * 150, "é" * 75])
def test_an_index_whose_backup_name_would_be_too_long_for_a_file_name_is_mended_and_kept_apart(
    tmp_path: Path, first: str
) -> None:
    folder = tmp_path / "memory"
    root = MemoryRoot(folder)
    rels = [f"{first}/{last}/MEMORY.md" for last in ("b" * 120, "b" * 119 + "c")]  # each name legal; flattened, over 255 bytes
    for rel in rels:
        (folder / rel).parent.mkdir(parents=True)
        (folder / rel).write_bytes(b"old\n")
        backup = root.replace_index(rel, f"new {rel}\n".encode(), expected=b"old\n")
        assert (folder / rel).read_bytes() == f"new {rel}\n".encode() and backup.read_bytes() == b"old\n"
        assert len(os.fsencode(backup.parent.name)) <= 200 and backup.parent.name.startswith(first[:40])
    kept = folder / ".recall-kit" / "index-backups"
    assert len(list(kept.iterdir())) == 2  # alike for their first 166 bytes, still a folder each

def test_a_secret_in_the_index_is_reported_and_the_mending_diff_does_not_show_it(tmp_path: Path) -> None:
    # both agents load the index into every session: a key there reaches every context
    folder = tmp_path / "memory"
    write_memory(folder, "good.md", "Good", "A memory that is listed", "x\n")
    token, key = "ghp_aBcD1234eFgH5678iJkL9012mNoP", "AKIAIOSFODNN7EXAMPLE"
    (folder / "MEMORY.md").write_text(
        f"# Index\n- [Good](good.md) — listed\n- [Dead](dead.md) — token {token} for CI\nSee [good](good.md): {key}\n")
    report = check_health(plan(folder), use_cache=False)
    secrets = [(f.files, f.line) for f in report.findings if f.kind == "secret"]
    assert secrets == [((str(folder / "MEMORY.md"),), 3), ((str(folder / "MEMORY.md"),), 4)]
    repairs = plan_repairs(report)
    diff = "\n".join(repairs[0].diff())
    assert repairs[0].removed_lines == (3,) and "- [Dead](dead.md) — token" in diff
    assert token[:12] not in diff and key[:12] not in diff
    assert token.encode() not in repairs[0].new and key.encode() in repairs[0].new  # what is written is the file's own


def test_the_mending_diff_shows_an_ordinary_link_as_it_is_written(tmp_path: Path) -> None:
    # the diff the user approves is what --fix writes: only a sure secret is blanked, never a link like this
    folder = tmp_path / "memory"
    write_memory(folder, "good.md", "Good", "A memory that is listed", "x\n")
    write_memory(folder, "deploy-notes-v2.md", "Deploy notes v2", "build/out2 holds the v2 bundle", "x\n")
    (folder / "MEMORY.md").write_text("# Index\n- [Good](good.md) — listed\n")
    repairs = plan_repairs(check_health(plan(folder), use_cache=False))
    added = [line for line in repairs[0].diff() if line.startswith("+") and not line.startswith("+++")]
    assert added == ["+- [Deploy notes v2](deploy-notes-v2.md) — build/out2 holds the v2 bundle"]
    assert added[0][1:].encode() in repairs[0].new
