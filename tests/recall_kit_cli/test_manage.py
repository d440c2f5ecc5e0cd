"""`recall-kit add`, `show`, `rm`, `validate` and `stats`: managing memories from the command line."""

from __future__ import annotations

import os

import hashlib

import json
import subprocess
from pathlib import Path

import pytest
from cli_support import EXAMPLES, RECALL_KIT, RunCli, assert_one_line_error, clean_environ, json_out, run_in_pty

from memory_store import MemoryStore, parse_memory

DEPLOY = "memories/projects/ledgerline/deploy.md"


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    (root / "user").mkdir(parents=True)
    (root / "user" / "tea.md").write_text("---\nname: Tea\ndescription: green tea at four\ntype: user\n---\nSencha.\n")
    return root


def _add(store: Path, *args: str, body: str = "", cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RECALL_KIT), "add", "--root", str(store), *args], input=body, capture_output=True, text=True,
        env=clean_environ(), cwd=cwd, timeout=60,
    )


def test_add_writes_a_validated_memory_under_its_type_folder_with_the_body_from_stdin(store: Path) -> None:
    result = _add(store, "--type", "project", "--name", "Atlas: Migrations!", "--description", "how atlas migrates",
                  "--keyword", "alembic", body="Run alembic upgrade head.\n", cwd=store)
    assert result.returncode == 0, result.stderr
    target = store / "projects" / "atlas-migrations.md"
    assert result.stdout.strip() == f"added mem/projects/atlas-migrations.md ({target})"
    doc = parse_memory(target.read_bytes())
    assert (doc.name, doc.type, doc.keywords, doc.body) == (
        "Atlas: Migrations!", "project", ("alembic",), "Run alembic upgrade head.\n")
    with MemoryStore.open(store, watch=False) as opened:
        assert "mem/projects/atlas-migrations.md" in opened.snapshot().docs


def test_add_files_a_projects_memory_where_the_examples_do(store: Path) -> None:
    result = _add(store, "--type", "project", "--project", "Atlas", "--name", "Deploy", "--description", "how atlas ships",
                  body="fly deploy\n", cwd=store)
    assert result.returncode == 0, result.stderr
    assert (store / "projects" / "atlas" / "deploy.md").is_file()  # as examples/memories/projects/ledgerline/deploy.md
    wrong = _add(store, "--type", "user", "--project", "Atlas", "--name", "Tea", "--description", "tea", body="x\n", cwd=store)
    assert wrong.returncode == 2 and wrong.stderr.strip() == "recall-kit: not saved: --project is for --type project, not user"


def test_add_refuses_to_overwrite_without_force_and_replaces_with_it(store: Path) -> None:
    args = ("--type", "user", "--name", "Tea", "--description", "now oolong", "--body", "Oolong.")
    refused = _add(store, *args, cwd=store)
    assert_one_line_error(refused, "already exists", "--force")
    assert "Sencha" in (store / "user" / "tea.md").read_text()
    replaced = _add(store, *args, "--force", "--json", cwd=store)
    assert json_out(replaced) == {"ref": "mem/user/tea.md", "path": str(store / "user" / "tea.md"), "overwritten": True}
    assert parse_memory((store / "user" / "tea.md").read_bytes()).body == "Oolong.\n"


def test_add_rejects_what_the_store_would_skip_and_writes_nothing(store: Path) -> None:
    before = sorted(p.name for p in store.rglob("*"))
    assert_one_line_error(_add(store, "--type", "user", "--name", "x", "--description", "", "--body", "b",
                               cwd=store), "not saved", "description")
    assert_one_line_error(_add(store, "--type", "nonsense", "--name", "x", "--description", "d", cwd=store),
                          "nonsense")
    assert sorted(p.name for p in store.rglob("*")) == before


def test_add_into_a_type_folder_that_is_a_symlink_out_of_the_root_is_refused_and_writes_nothing(
    store: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (store / "reference").symlink_to(outside, target_is_directory=True)
    before = sorted(str(p) for p in store.rglob("*"))
    refused = _add(store, "--type", "reference", "--name", "Leak", "--description", "d", "--body", "b", cwd=store)
    assert_one_line_error(refused, "not saved", "mem/reference/leak.md", "symlink")
    assert list(outside.iterdir()) == [] and sorted(str(p) for p in store.rglob("*")) == before


def test_add_into_the_home_folder_or_above_is_refused_as_every_door_refuses_it(run_cli: RunCli, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**clean_environ(), "HOME": str(home)}
    for root, words in ((home, "is the home folder"), (tmp_path, "holds the home folder")):
        result = run_cli("add", "--root", str(root), "--type", "user", "--name", "Note", "--description", "d",
                         "--body", "x", env=env)
        assert_one_line_error(result, "not saved", words)
    assert list(home.iterdir()) == [] and not (tmp_path / "user").exists()


def test_add_without_a_root_anywhere_is_one_line(run_cli: RunCli) -> None:
    assert_one_line_error(run_cli("add", "--type", "user", "--name", "x", "--description", "d", "--body", "b"),
                          "no memory root", "RECALL_KIT_ROOTS")


def test_show_renders_the_memory_as_the_agent_sees_it_or_raw(run_cli: RunCli) -> None:
    shown = run_cli("show", DEPLOY, "--root", str(EXAMPLES))
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("<recalled-memories>") and f"Reference: {DEPLOY}" in shown.stdout
    raw = run_cli("show", "projects/ledgerline/deploy.md", "--root", str(EXAMPLES), "--raw")
    assert raw.stdout == (EXAMPLES / "projects/ledgerline/deploy.md").read_text()
    data = json_out(run_cli("show", DEPLOY, "--root", str(EXAMPLES), "--json"))
    assert data["ref"] == DEPLOY and "Fly.io" in data["text"] and data["raw"] is False


def test_show_of_an_unknown_ref_is_one_line(run_cli: RunCli) -> None:
    assert_one_line_error(run_cli("show", "memories/nope.md", "--root", str(EXAMPLES)), "no memory", "nope.md")


def test_rm_needs_yes_without_a_terminal_and_deletes_with_it(run_cli: RunCli, store: Path) -> None:
    assert_one_line_error(run_cli("rm", "mem/user/tea.md", "--root", str(store)), "--yes")
    assert (store / "user" / "tea.md").exists()
    removed = run_cli("rm", "mem/user/tea.md", "--root", str(store), "--yes")
    assert removed.returncode == 0 and removed.stdout == "removed mem/user/tea.md\n"
    assert not (store / "user" / "tea.md").exists()
    assert not (store / "user").exists() and store.is_dir()  # the folder it emptied goes; the root stays


def test_show_and_rm_take_a_ref_as_list_shows_it_with_a_byte_that_is_not_utf8(run_cli: RunCli, store: Path) -> None:
    (store / "user").joinpath(b"caf\xe9.md".decode("utf-8", "surrogateescape")).write_text(
        "---\nname: Cafe\ndescription: the coffee place\ntype: user\n---\nFlat white.\n")
    listed = run_cli("list", "--root", str(store))
    assert "mem/user/caf\\xe9.md" in listed.stdout
    shown = run_cli("show", "mem/user/caf\\xe9.md", "--root", str(store))
    assert shown.returncode == 0 and "Flat white." in shown.stdout
    removed = run_cli("rm", "user/caf\\xe9.md", "--root", str(store), "--yes")
    assert removed.returncode == 0 and removed.stdout == "removed mem/user/caf\\xe9.md\n"
    assert sorted(p.name for p in (store / "user").iterdir()) == ["tea.md"]



def test_a_file_named_as_another_is_shown_reads_apart_and_rm_takes_the_one_list_shows(run_cli: RunCli, store: Path) -> None:
    memory = "---\nname: {}\ndescription: d\ntype: user\n---\nx\n"
    (store / "user" / os.fsdecode(b"caf\xe9.md")).write_text(memory.format("Byte"))
    (store / "user" / "caf\\xe9.md").write_text(memory.format("Backslash"))  # a backslash, x, e, 9 in its name
    listed = run_cli("list", "--root", str(store)).stdout
    assert "mem/user/caf\\xe9.md" in listed and "mem/user/caf\\\\xe9.md" in listed  # two refs, not one twice
    assert "Backslash" in run_cli("show", "mem/user/caf\\\\xe9.md", "--root", str(store)).stdout
    ambiguous = run_cli("rm", "user/caf\\xe9.md", "--root", str(store), "--yes")  # a path that reads both ways
    assert ambiguous.returncode != 0 and "names 2 memories (mem/user/caf\\\\xe9.md, mem/user/caf\\xe9.md)" in ambiguous.stderr
    removed = run_cli("rm", "mem/user/caf\\\\xe9.md", "--root", str(store), "--yes")
    assert removed.returncode == 0 and removed.stdout == "removed mem/user/caf\\\\xe9.md\n"
    assert sorted(p.name for p in (store / "user").iterdir()) == [os.fsdecode(b"caf\xe9.md"), "tea.md"]

def test_rm_keeps_a_folder_that_still_holds_something(run_cli: RunCli, store: Path) -> None:
    (store / "user" / "deep").mkdir()
    (store / "user" / "deep" / "old.md").write_text("---\nname: Old\ndescription: an old note\ntype: user\n---\nx\n")
    (store / "user" / ".keep").write_text("")
    assert run_cli("rm", "mem/user/deep/old.md", "--root", str(store), "--yes").returncode == 0
    assert not (store / "user" / "deep").exists() and (store / "user" / ".keep").exists()  # hidden file: kept


def test_rm_asks_on_a_terminal_and_keeps_the_file_when_told_no(store: Path) -> None:
    kept = run_in_pty("rm", "mem/user/tea.md", "--root", str(store), cwd=store, answer=b"n\n")
    assert "remove mem/user/tea.md (Tea)? [y/N]" in kept.output and kept.returncode == 2
    assert (store / "user" / "tea.md").exists()
    gone = run_in_pty("rm", "mem/user/tea.md", "--root", str(store), cwd=store, answer=b"y\n")
    assert gone.returncode == 0 and "removed mem/user/tea.md" in gone.output
    assert not (store / "user" / "tea.md").exists()


def test_validate_exits_0_on_a_clean_store_and_1_naming_every_bad_file(run_cli: RunCli, store: Path) -> None:
    clean = run_cli("validate", "--root", str(store))
    assert clean.returncode == 0 and clean.stdout == "ok: 1 valid memories, 0 skipped\n"
    (store / "user" / "no-front.md").write_text("just text\n")
    (store / "user" / "bad-type.md").write_text("---\nname: a\ndescription: b\ntype: weird\n---\n")
    bad = run_cli("validate", "--root", str(store))
    assert bad.returncode == 1
    lines = bad.stdout.splitlines()
    assert lines[0] == "2 bad: 1 valid memories, 2 skipped"
    assert any(line.startswith("  mem/user/no-front.md: missing frontmatter") for line in lines)
    assert any(line.startswith("  mem/user/bad-type.md: ") and "weird" in line for line in lines)
    data = json.loads(run_cli("validate", "--root", str(store), "--json").stdout)
    assert data["valid"] == 1 and {e["ref"] for e in data["errors"]} == {"mem/user/no-front.md", "mem/user/bad-type.md"}


def test_validate_names_a_bad_keywords_value_that_the_memory_loads_without(run_cli: RunCli, store: Path) -> None:
    (store / "user" / "tags.md").write_text("---\nname: a\ndescription: b\ntype: user\nkeywords: 42\n---\nbody\n")
    bad = run_cli("validate", "--root", str(store))
    assert bad.returncode == 1
    assert bad.stdout.splitlines() == [
        "1 bad: 2 valid memories (1 with problems), 0 skipped",
        "  mem/user/tags.md: 'keywords' ignored: a list or a string is expected, got a number (the memory loads without it)",
    ]
    data = json.loads(run_cli("validate", "--root", str(store), "--json").stdout)
    assert data["valid"] == 2 and data["errors"] == []
    assert data["problems"] == [{"ref": "mem/user/tags.md",
                                 "problem": "'keywords' ignored: a list or a string is expected, got a number"}]


def test_validate_counts_bad_files_not_problem_lines(run_cli: RunCli, store: Path) -> None:
    (store / "user" / "tags.md").write_text(
        "---\nname: a\ndescription: b\ntype: user\nkeywords: {a: 1}\nusage_scenarios: 5\n---\nbody\n"
    )
    lines = run_cli("validate", "--root", str(store)).stdout.splitlines()
    assert lines[0] == "1 bad: 2 valid memories (1 with problems), 0 skipped"
    assert len(lines) == 3 and all(line.startswith("  mem/user/tags.md: ") for line in lines[1:])


def test_stats_counts_types_scopes_sizes_ages_enrichment_and_index(run_cli: RunCli, store: Path) -> None:
    data = json_out(run_cli("stats", "--root", str(EXAMPLES), "--root", str(store), "--json"))
    assert data["memories"] == 28 and data["by_scope"] == {"mem": 1, "memories": 27}
    assert sum(data["by_type"].values()) == 28 and data["by_type"]["user"] == 5
    assert data["bytes"] == sum(p.stat().st_size for p in EXAMPLES.rglob("*.md") if p.name != "MEMORY.md") + (
        store / "user" / "tea.md").stat().st_size
    assert data["oldest"]["ref"] and data["newest"]["ref"] and data["enrichment"] is None
    assert data["index"]["bytes"] > 0
    (store / ".recall-kit").mkdir()
    sha = hashlib.sha256((store / "user" / "tea.md").read_bytes()).hexdigest()
    entry = {"path": "user/tea.md", "sha256": sha, "keywords": ["sencha"], "usage_scenarios": []}
    (store / ".recall-kit" / "enrichment.jsonl").write_text(json.dumps(entry) + "\nnot json\n")
    text = run_cli("stats", "--root", str(store))
    assert text.returncode == 0
    # the corrupt sidecar line is reported as skipped; the fresh entry counts
    assert "1 memories, 1 skipped" in text.stdout and "enrichment: 1/1 memories" in text.stdout
    assert "by type:  user 1" in text.stdout


def test_add_on_a_terminal_takes_the_body_from_the_editor(store: Path, tmp_path: Path) -> None:
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "Body from the editor.\\n" > "$1"\n')
    editor.chmod(0o755)
    args = ("add", "--root", str(store), "--type", "feedback", "--name", "Edited", "--description", "d")
    written = run_in_pty(*args, cwd=store, env=clean_environ(EDITOR=str(editor)))
    assert written.returncode == 0, written.output
    assert parse_memory((store / "feedback" / "edited.md").read_bytes()).body == "Body from the editor.\n"
    unchanged = run_in_pty(*args, "--force", cwd=store, env=clean_environ(EDITOR="true"))
    assert unchanged.returncode == 2 and "not saved: the editor was closed without saving" in unchanged.output
    assert parse_memory((store / "feedback" / "edited.md").read_bytes()).body == "Body from the editor.\n"


def test_add_reads_no_more_of_stdin_than_a_memory_may_hold(store: Path) -> None:
    # An endless stdin (a typo'd redirect, /dev/zero) took gigabytes before: it is refused in one line once
    # the body passes what a memory file may hold, and nothing is written.
    with open("/dev/zero", "rb") as endless:
        result = subprocess.run([str(RECALL_KIT), "add", "--root", str(store), "--type", "user", "--name", "Zero",
                                 "--description", "d"], stdin=endless, capture_output=True, text=True,
                                env=clean_environ(), cwd=store, timeout=60)
    assert result.returncode == 2
    assert result.stderr == "recall-kit: not saved: the body on stdin is over the 262144-byte limit of a memory file\n"
    assert sorted(p.name for p in (store / "user").iterdir()) == ["tea.md"]


def test_a_body_on_stdin_that_is_not_utf8_is_refused_in_one_line(store: Path) -> None:
    result = subprocess.run([str(RECALL_KIT), "add", "--root", str(store), "--type", "user", "--name", "Cafe",
                             "--description", "d"], input=b"caf\xe9\n", capture_output=True, env=clean_environ(),
                            cwd=store, timeout=60)
    assert result.returncode == 2 and result.stderr == b"recall-kit: not saved: the body is not valid UTF-8\n"
    assert not (store / "user" / "cafe.md").exists()
