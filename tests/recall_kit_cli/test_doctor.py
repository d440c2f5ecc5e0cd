"""`recall-kit doctor` as a user runs it, in a git project whose Claude Code memory folder is sick:
the report (text, counts first; --json), the exit status, that nothing changes without --fix, what
--fix changes (the index, and only the index), and where users see doctor's counts (stats, hook status)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_support import assert_one_line_error, clean_environ, run_recall_kit
from doctor_support import home_environ, DEAD_ENTRY_LINE, TOKEN, Sick, sick_folder, tree_state, write_memory, write_trail
from recall_kit.testing import CLAUDE_CODE, agent_memory_folder


@pytest.fixture
def sick(tmp_path: Path) -> Sick:
    return sick_folder(tmp_path)


def doctor(sick: Sick, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return run_recall_kit("doctor", *args, cwd=cwd or sick.project, env=home_environ(sick.home, **env))


def test_text_report_counts_first_then_each_kind_and_exit_1(sick: Sick) -> None:
    write_trail(sick.home, [sick.folder], 300, ["memory/deploy-fly.md"])
    result = doctor(sick)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "doctor: 16 findings in 7 memories, 1 folder"
    assert lines[1].split(" · ") == [
        "  near-duplicates 1", "stale references 3", "index drift 3", "secrets 1", "unreachable at the prompt 1",
        "never recalled 6", "bad files 1",
    ]
    headings = [line for line in lines if line and not line.startswith(" ") and "(" in line and not line.startswith("doctor")]
    assert headings == ["near-duplicates (1)", "stale references (3)", "index drift (3)", "secrets (1)",
                        "unreachable at the prompt (1)", "never recalled (6)", "bad files (1)"]
    assert TOKEN not in result.stdout and TOKEN[:10] not in result.stdout
    assert f"{sick.folder}/MEMORY.md:{DEAD_ENTRY_LINE}" in result.stdout
    assert "memory/unlisted.md is not listed in memory/MEMORY.md: Claude Code never sees it there" in result.stdout


def test_json_report_and_nothing_changes_without_fix(sick: Sick) -> None:
    before = tree_state(sick.folder, sick.project)
    result = doctor(sick, "--json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert list(report)[0] == "counts" and sum(report["counts"].values()) == len(report["findings"]) == 10
    assert {f["kind"] for f in report["findings"]} == set(report["counts"]) - {"never_recalled"}
    assert report["roots"] == [{"path": str(sick.folder), "kind": "project", "memories": 7, "index_files": 1,
                                "index_reader": "Claude Code", "project": str(sick.project)}]
    assert any("never recalled: not judged" in note for note in report["notes"])  # no trail yet
    assert tree_state(sick.folder, sick.project) == before


def test_a_clean_folder_exits_0(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    for path in sick.folder.iterdir():
        path.unlink()
    write_memory(sick.folder, "deploy.md", "Deploying to Fly.io", "The app deploys to Fly.io from main via GitHub Actions",
                 "`src/app.py` reads the config with `load_config`; `make dev` runs it.\n")
    (sick.folder / "MEMORY.md").write_text("- [Deploying to Fly.io](deploy.md) — from main\n")
    result = doctor(sick)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("doctor: 0 findings in 1 memories, 1 folder\n")


def test_bad_input_is_one_line_and_exit_2(sick: Sick, tmp_path: Path) -> None:
    assert_one_line_error(doctor(sick, "--yes"), "--yes goes with --fix")
    assert_one_line_error(doctor(sick, "--root", str(tmp_path / "missing")), "does not exist")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert_one_line_error(doctor(sick, cwd=elsewhere), "no memory folder to check")
    assert_one_line_error(doctor(sick, "--root", str(sick.home)), "home")
    assert_one_line_error(doctor(sick, "--model-check"), "--model-check needs the selector model")


def test_fix_shows_the_diff_asks_and_writes_only_with_yes(sick: Sick) -> None:
    index = sick.folder / "MEMORY.md"
    old = index.read_bytes()
    before = tree_state(sick.folder, sick.project)
    asked = doctor(sick, "--fix")  # stdin is not a terminal: nothing is written
    assert asked.returncode == 1
    assert "-- [Gone](gone.md) — a memory that was deleted" in asked.stdout
    assert "+- [Release checklist](unlisted.md) — Tag the release" in asked.stdout
    assert "nothing written: not asked on a terminal (pass --yes" in asked.stdout
    assert tree_state(sick.folder, sick.project) == before
    fixed = doctor(sick, "--fix", "--yes")
    assert fixed.returncode == 1 and "mended" in fixed.stdout and "8 findings left" in fixed.stdout, fixed.stdout
    after = tree_state(sick.folder, sick.project)
    changed = {path for path in after if before.get(path) != after[path]} | set(before) - set(after)
    backups = sorted((sick.folder / ".recall-kit" / "index-backups").glob("*/*"))
    assert changed == {str(index), str(sick.folder / ".recall-kit"), *(str(p) for p in sick.folder.glob(".recall-kit/**/*"))}
    assert len(backups) == 1 and backups[0].read_bytes() == old
    kept = old.decode().split("\n")
    assert index.read_text() == "\n".join(kept[: DEAD_ENTRY_LINE - 1] + kept[DEAD_ENTRY_LINE:-1]) + (
        "\n- [Release checklist](unlisted.md) — Tag the release, write the changelog, announce it in the releases channel\n")
    again = doctor(sick, "--json")
    assert {f["detail"].get("problem") for f in json.loads(again.stdout)["findings"] if f["kind"] == "index_drift"} == {"dead_link"}


def test_fix_with_nothing_to_mend_says_so(sick: Sick) -> None:
    (sick.folder / "MEMORY.md").write_text("".join(f"- [{p.stem}]({p.name})\n" for p in sorted(sick.folder.glob("*.md"))
                                                   if p.name != "MEMORY.md"))
    result = doctor(sick, "--fix", "--yes")
    assert result.returncode == 1 and "--fix: nothing to mend (0 fixable findings" in result.stdout


def test_stats_says_when_doctor_last_found_something(sick: Sick) -> None:
    env = home_environ(sick.home)
    never = run_recall_kit("stats", "--root", str(sick.folder), cwd=sick.project, env=env)
    assert never.stdout.splitlines()[-1] == "doctor: never run on these folders (recall-kit doctor)"
    doctor(sick)
    stats = run_recall_kit("stats", "--root", str(sick.folder), "--json", cwd=sick.project, env=env)
    found = json.loads(stats.stdout)["doctor"]
    assert found["found"] is not None and found["found_counts"]["near_duplicate"] == 1
    record = sick.home / ".local" / "state" / "recall-kit" / "doctor.json"
    assert oct(record.stat().st_mode & 0o777) == "0o600" and not list(sick.folder.glob(".recall-kit*"))
    line = run_recall_kit("stats", "--root", str(sick.folder), cwd=sick.project, env=env).stdout.splitlines()[-1]
    assert line.startswith("doctor: last found something ") and "1 near-duplicates" in line


@pytest.mark.parametrize("planted", [
    {"checked": "soon", "counts": {"secret": 1}},
    {"checked": 1e20, "counts": {"secret": 1}, "found": 1e20, "found_counts": {"secret": 3}},
    {"checked": 1000, "counts": [1]},
    {"checked": 1000, "counts": {"secret": 1}, "found": float("nan"), "found_counts": {"secret": 3}},
    {"checked": 1000, "counts": {"secret": True}},
], ids=["a-word", "past-any-clock", "counts-a-list", "nan", "a-bool-count"])
def test_an_entry_of_doctors_record_it_never_wrote_is_left_out_by_stats_and_doctor(sick: Sick, planted: dict) -> None:
    # doctor.json is private, but a hand edit or another tool can leave anything there: a traceback in
    # stats, NaN in its --json, and every later doctor run broken, before
    env = home_environ(sick.home)
    record = sick.home / ".local" / "state" / "recall-kit" / "doctor.json"
    doctor(sick)
    mine = json.loads(record.read_text())["folders"]
    record.write_text(json.dumps({"version": 1, "folders": {str(sick.folder): planted, "/elsewhere": planted}}))
    for args in (("--json",), ()):
        stats = run_recall_kit("stats", "--root", str(sick.folder), *args, cwd=sick.project, env=env)
        assert stats.returncode == 0 and stats.stderr == "", stats.stderr
        assert stats.stdout.splitlines()[-1] == "doctor: never run on these folders (recall-kit doctor)" or args
    assert json.loads(run_recall_kit("stats", "--root", str(sick.folder), "--json", cwd=sick.project,
                                     env=env).stdout, parse_constant=_no_constant)["doctor"] == {"checked": None}
    again = doctor(sick)
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr
    assert set(json.loads(record.read_text())["folders"]) == set(mine)  # the planted entries are gone


def _no_constant(name: str) -> None:
    raise AssertionError(f"{name} is not JSON")


def test_hook_status_gives_doctors_last_counts_in_one_line(sick: Sick) -> None:
    def status() -> str:
        result = run_recall_kit("hook", "status", cwd=sick.project, env=home_environ(sick.home))
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()[-1]

    assert status() == "doctor: not run on the folders here yet (recall-kit doctor)"
    doctor(sick)
    line = status()
    assert line.startswith("doctor (") and "): 10 findings (1 near-duplicates, 3 stale references, 3 index drift" in line
    assert line.endswith("; recall-kit doctor shows them")
    status_json = run_recall_kit("hook", "status", "--json", cwd=sick.project, env=home_environ(sick.home))
    assert json.loads(status_json.stdout)["doctor"] == line
    write_memory(sick.folder, "new.md", "A new memory", "Written after doctor last looked", "x\n")
    assert status().endswith("; the folders changed since: recall-kit doctor")


def test_memory_text_in_the_report_cannot_drive_the_terminal(sick: Sick) -> None:
    write_memory(sick.folder, "escape.md", "Escape", "A memory whose line names a missing file and a terminal escape",
                 "See `src/gone.py` \x1b[2J\x1b]0;owned\x07 here.\n")
    result = doctor(sick)
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "src/gone.py` \\x1b[2J\\x1b]0;owned\\x07 here." in result.stdout


def test_a_file_name_that_is_not_utf8_is_shown_escaped_and_its_entry_links_its_own_bytes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    folder = home / "mem"
    folder.mkdir(parents=True)
    memory = os.fsencode(folder) + b"/caf\xe9.md"  # Latin-1 é: the store names it caf\udce9.md
    Path(os.fsdecode(memory)).write_text("---\nname: L\ndescription: a latin-1 file name\ntype: user\n---\nb\n")
    (folder / "MEMORY.md").write_text("# idx\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_recall_kit("doctor", "--root", "mem", *args, cwd=home, env=home_environ(home))

    text = run()
    assert text.returncode == 1 and "Traceback" not in text.stderr, text.stderr
    assert "mem/caf\\xe9.md is not listed in mem/MEMORY.md" in text.stdout  # as `recall-kit list` shows it
    found = json.loads(run("--json").stdout)["findings"]
    assert [f["refs"][1] for f in found] == ["mem/caf\udce9.md"]  # as `recall-kit list --json` gives it
    fixed = run("--fix", "--yes")
    assert fixed.returncode == 0 and "0 findings left" in fixed.stdout, fixed.stdout + fixed.stderr
    assert (folder / "MEMORY.md").read_bytes() == "# idx\n- [L](caf%E9.md) — a latin-1 file name\n".encode()
    assert run().returncode == 0  # the entry it wrote links that very file


def test_fix_checks_what_it_wrote_and_an_entry_appended_past_what_the_agent_loads_is_left(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    folder = agent_memory_folder(CLAUDE_CODE, home, project)
    write_memory(folder, "u/a.md", "Alpha", "Alpha is the first memory of this folder", "a\n", type="user")
    write_memory(folder, "u/b.md", "Beta", "Beta is the second memory, listed nowhere", "b\n", type="user")
    index = "# idx\n- [Alpha](u/a.md) — a\n" + "".join(f"note {n}\n" for n in range(1, 251))
    (folder / "MEMORY.md").write_text(index)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_recall_kit("doctor", *args, cwd=project, env=home_environ(home))

    fixed = run("--fix", "--yes")
    assert fixed.returncode == 1, fixed.stdout + fixed.stderr
    assert (folder / "MEMORY.md").read_text() == index + "- [Beta](u/b.md) — Beta is the second memory, listed nowhere\n"
    assert "found on checking again (1):" in fixed.stdout and "1 finding left" in fixed.stdout
    assert "memory/u/b.md is listed in memory/MEMORY.md only at line 253, past the 200 lines Claude Code loads" in fixed.stdout
    (folder / "MEMORY.md").write_text(index)
    as_json = run("--fix", "--yes", "--json")
    assert as_json.returncode == 1, as_json.stderr
    left = json.loads(as_json.stdout)["left"]
    assert left["counts"]["index_drift"] == 1 and [f["detail"]["problem"] for f in left["findings"]] == ["past_truncation"]
    assert run().returncode == 1  # what a plain run then finds, --fix said


def test_a_refused_write_and_an_oversized_index_are_each_said_in_one_plain_sentence(sick: Sick, tmp_path: Path) -> None:
    (sick.folder / "sub").mkdir()
    (sick.folder / "sub" / "MEMORY.md").write_bytes(b"- [a](a.md)\n" * 30_000)  # 360,000 bytes: over 256 KiB
    outside = tmp_path / "outside"
    outside.mkdir()
    (sick.folder / ".recall-kit").symlink_to(outside, target_is_directory=True)  # no backup can be kept: refused
    state = sick.home / ".local" / "state"
    state.mkdir(parents=True)
    (state / "recall-kit").symlink_to(outside, target_is_directory=True)  # nor doctor's record
    result = doctor(sick, "--fix", "--yes")
    assert "memory/sub/MEMORY.md is 360,000 bytes, over the 262,144-byte limit: not read." in result.stdout
    refusals = [line for line in result.stderr.splitlines() if "not mended" in line]
    assert len(refusals) == 1 and refusals[0].startswith("recall-kit: not mended: "), result.stderr
    assert any(line.startswith("recall-kit: warning: doctor's record for `stats` not kept: ") for line in result.stderr.splitlines())
    assert "recall-kit: warning: recall-kit:" not in result.stderr and result.returncode == 1
