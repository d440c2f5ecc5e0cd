"""recall_kit.health on hand-made folders: each kind of finding is reported, its near miss is not,
and a clean folder gets nothing."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from doctor_support import BAD, DEAD_ENTRY_LINE, PROSE_LINE, TOKEN, Sick, age, sick_folder, write_memory
from recall_kit.health import (
    NEVER_RECALLED_MIN_PROMPTS,
    Finding,
    HealthPlan,
    HealthReport,
    HealthRoot,
    IndexReader,
    RecalledPrompt,
    RecallSet,
    check_health,
)

CLAUDE = IndexReader("Claude Code", 200, 25_000)


def plan_of(folder: Path, project: Path | None, reader: IndexReader | None = CLAUDE) -> HealthPlan:
    return HealthPlan((HealthRoot(str(folder), "project", reader, str(project) if project else None),),
                      (RecallSet("Claude Code", (str(folder),)),))


def check(sick: Sick, history: list[RecalledPrompt] | None = None, **options: object) -> HealthReport:
    return check_health(plan_of(sick.folder, sick.project), history=history, use_cache=False, **options)  # type: ignore[arg-type]


def of_kind(report: HealthReport, kind: str) -> list[Finding]:
    return [f for f in report.findings if f.kind == kind]


def names(findings: list[Finding]) -> list[str]:
    return sorted(os.path.basename(f.files[-1]) for f in findings)


def test_each_kind_is_found_in_the_sick_folder_and_no_near_miss(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    report = check(sick)
    dup = of_kind(report, "near_duplicate")
    assert [sorted(os.path.basename(p) for p in f.files) for f in dup] == [["deploy-fly.md", "fly-deploys-from-main.md"]]
    assert dup[0].detail["similarity"] >= 0.389  # staging-render.md: same topic, another fact, not in it
    stale = {(f.detail["what"], f.detail["reference"]) for f in of_kind(report, "stale_reference")}
    # src/app.py, load_config, make dev and npm run build exist: only what is gone is named
    assert stale == {("path", "src/old_loader.py"), ("symbol", "parse_legacy_flags"), ("command", "release")}
    assert all(f.line in (7, 8) and f.files[0].endswith("loader.md") for f in of_kind(report, "stale_reference"))
    drift = {(f.detail["problem"], f.line, f.fixable) for f in of_kind(report, "index_drift")}
    assert drift == {("dead_link", DEAD_ENTRY_LINE, True), ("dead_link", PROSE_LINE, False), ("unlisted", None, True)}
    secret = of_kind(report, "secret")
    assert [(os.path.basename(f.files[0]), f.line) for f in secret] == [("ci-token.md", 8)]  # not line 7's "token lives in"
    unreachable = of_kind(report, "unreachable")
    assert names(unreachable) == ["misc.md"] and unreachable[0].detail["cause"] == "gate"
    assert "specific word" in unreachable[0].message and "'pgbouncer'" in unreachable[0].action
    assert names(of_kind(report, "bad_file")) == [BAD]
    assert of_kind(report, "never_recalled") == []  # no trail given: not judged, and said so
    assert any("never recalled: not judged" in note for note in report.notes)


def test_the_secret_itself_is_never_in_the_report(tmp_path: Path) -> None:
    report = check(sick_folder(tmp_path))
    text = json.dumps(report.to_json())
    assert TOKEN not in text and TOKEN[:12] not in text
    assert of_kind(report, "secret")[0].detail["column"] == len("Old value, rotated: ") + 1


def test_a_reference_or_a_suggested_word_holding_a_secret_is_never_printed(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    keys = ("ghp_aBcD1234eFgH5678iJkL9012mNoP", "AKIAIOSFODNN7EXAMPLE", "sk_live_abcdefghijklmnop1234")
    write_memory(sick.folder, "keys.md", "Where keys live", "Which file and make target hold the deploy keys", (
        f"The deploy key is in `keys/{keys[0]}.txt` on the box.\n"
        f"Run `make push-{keys[1]}` to publish, then `{keys[2]}()` from billing; `src/gone_loader.py` is gone.\n"))
    write_memory(sick.folder, "alarm.md", "Misc", "misc",  # unreachable: doctor suggests words of its body
                 "Unlock the office alarm with qwzxplmnbvkjhgfdrt and the vault with bcdfghjklmnpqrstvw.\n")
    report = check(sick)
    text = json.dumps(report.to_json())
    assert not [piece for piece in (*keys, "qwzxplmnbvkjhgfdrt", "bcdfghjklmnpqrstvw") if piece[:12].lower() in text.lower()]
    # the rest of those lines is still judged: the reference the scrubber leaves is named
    stale = {f.detail["reference"] for f in of_kind(report, "stale_reference") if f.files[0].endswith("keys.md")}
    assert stale == {"src/gone_loader.py"}
    alarm = [f for f in of_kind(report, "unreachable") if f.files[0].endswith("alarm.md")]
    assert alarm and set(alarm[0].detail["suggested_words"]) <= {"unlock", "office", "alarm", "vault"}
    assert alarm[0].detail["suggested_words"]
    assert of_kind(report, "secret") and {os.path.basename(f.files[0]) for f in of_kind(report, "secret")} >= {"keys.md", "alarm.md"}


def test_a_gone_path_of_letters_and_digits_is_judged_and_its_line_shown_whole(tmp_path: Path) -> None:
    # learning's scrub blanks such paths as random-looking tokens; doctor asks only for sure secrets,
    # so a moved `build/out2/...` is named, and its line is shown as written
    sick = sick_folder(tmp_path)
    (sick.project / "build" / "out3").mkdir(parents=True)
    (sick.project / "build" / "out3" / "report-v2.txt").write_text("here\n")
    write_memory(sick.folder, "reports.md", "Where reports go", "The nightly report lands in the build folder",
                 "Read build/out2/report-v2.txt after the nightly run; build/out3/report-v2.txt is the copy.\n")
    report = check(sick)
    stale = [f for f in of_kind(report, "stale_reference") if f.files[0].endswith("reports.md")]
    assert [f.detail["reference"] for f in stale] == ["build/out2/report-v2.txt"]
    assert "build/out2/report-v2.txt after the nightly run" in json.dumps(report.to_json())


def test_a_clean_folder_gets_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "deploy.md", "Deploying to Fly.io", "The app deploys to Fly.io from main via GitHub Actions", "No manual deploys.\n")
    write_memory(folder, "editor.md", "Editor and shell", "Neovim with LazyVim, zsh with starship on Arch Linux", "Keys: `<leader>ff`.\n")
    (folder / "MEMORY.md").write_text("- [Deploying](deploy.md) — Fly.io\n- [Editor](editor.md) — Neovim\n")
    report = check_health(plan_of(folder, None), use_cache=False)
    assert report.findings == () and report.clean


def test_never_recalled_needs_enough_prompts_since_the_memory_was_written(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    root = str(sick.folder)
    delivered = frozenset({(root, "deploy-fly.md")})
    start = os.path.getmtime(sick.folder / "misc.md") + 10

    def prompts(n: int) -> list[RecalledPrompt]:
        return [RecalledPrompt(start + i, (root,), delivered) for i in range(n)]

    few = check(sick, prompts(NEVER_RECALLED_MIN_PROMPTS - 1))
    assert of_kind(few, "never_recalled") == [] and any("fewer than 300" in n for n in few.notes)
    enough = check(sick, prompts(NEVER_RECALLED_MIN_PROMPTS))
    never = names(of_kind(enough, "never_recalled"))
    assert "deploy-fly.md" not in never and "misc.md" in never and len(never) == 6
    # a memory written after the trail began has had fewer prompts: not judged yet
    age(sick.folder, 0)
    assert of_kind(check(sick, prompts(NEVER_RECALLED_MIN_PROMPTS)), "never_recalled") == []


def test_a_twin_that_takes_the_place_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "a.md", "Postgres pool size", "The harbor Postgres pool holds twenty connections per pod", "pool_size=20\n")
    write_memory(folder, "b.md", "Postgres pool size", "The harbor Postgres pool holds twenty connections per pod",
                 "pool_size=20, max_overflow=5\n")
    write_memory(folder, "c.md", "Postgres pool size", "The harbor Postgres pool holds twenty connections per pod",
                 "Set in session.py.\n")
    report = check_health(plan_of(folder, None), use_cache=False)
    # the same head three times: the fast stage's two places go to the first two, the third never comes
    twins = of_kind(report, "unreachable")
    assert names(twins) == ["c.md"] and twins[0].detail["cause"] == "twin"
    assert twins[0].detail["twins"] == ["memory/a.md", "memory/b.md"] and "ranks #3" in twins[0].message
    assert "sets it apart" in twins[0].action and "'session'" in twins[0].action


def test_memories_listed_past_line_200_are_past_truncation_and_line_200_is_not(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "seen.md", "Seen at the last line", "Listed on line 200 of the index exactly", "x\n")
    write_memory(folder, "past.md", "Listed after the cut", "Listed on line 201 of the index only", "y\n")
    filler = [f"- note {n}: nothing to link" for n in range(1, 200)]
    (folder / "MEMORY.md").write_text("\n".join(filler + ["- [Seen](seen.md)"]) + "\n")
    exactly_200 = check_health(plan_of(folder, None), use_cache=False)
    assert {(f.detail["problem"], os.path.basename(f.files[-1])) for f in of_kind(exactly_200, "index_drift")} == {
        ("unlisted", "past.md")}
    (folder / "MEMORY.md").write_text("\n".join(filler + ["- [Seen](seen.md)", "- [Past](past.md)"]) + "\n")
    report = check_health(plan_of(folder, None), use_cache=False)
    past = of_kind(report, "index_drift")
    assert [(f.detail["problem"], f.line, os.path.basename(f.files[-1])) for f in past] == [("past_truncation", 201, "past.md")]
    assert "never sees it" in past[0].message and "still recalls it" in past[0].message
    # no agent known to read this index: nothing is past its truncation
    assert of_kind(check_health(plan_of(folder, None, reader=None), use_cache=False), "index_drift") == []


def test_a_memory_md_that_is_a_symlink_or_a_fifo_is_reported_and_never_read(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    write_memory(folder, "deploy.md", "Deploying to Fly.io", "The app deploys to Fly.io from main via GitHub Actions", "x\n")
    outside = tmp_path / "outside.md"
    outside.write_text("- [Gone](gone.md)\n")
    (folder / "MEMORY.md").symlink_to(outside)
    sub = folder / "team"
    sub.mkdir()
    os.mkfifo(sub / "MEMORY.md")  # a reader that opened it would block forever
    report = check_health(plan_of(folder, None), use_cache=False)
    problems = sorted(f.message for f in of_kind(report, "index_drift"))
    assert len(problems) == 2 and "a symlink" in problems[0] and "not a regular file" in problems[1]
    assert not any(f.detail.get("problem") == "dead_link" for f in report.findings)  # the symlink's target was not read


def test_a_ten_megabyte_memory_is_a_bad_file_and_does_not_stop_the_rest(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    (sick.folder / "huge.md").write_bytes(b"---\nname: huge\ndescription: big\ntype: user\n---\n" + b"x" * (10 << 20))
    (sick.folder / "sub").mkdir()
    (sick.folder / "sub" / "MEMORY.md").write_bytes(b"- [a](a.md)\n" * (1 << 20))  # 12 MB index: not read
    report = check(sick)
    assert "huge.md" in names(of_kind(report, "bad_file"))
    assert any("over the" in f.message and "sub/MEMORY.md" in f.message for f in of_kind(report, "index_drift"))
    assert names(of_kind(report, "unreachable")) == ["misc.md"]  # the rest is checked as before


def test_references_outside_the_project_urls_and_placeholders_are_not_judged(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    (sick.project / "services" / "api" / "src").mkdir(parents=True)
    (sick.project / "services" / "api" / "src" / "routes.py").write_text("ROUTES = []\n")
    write_memory(sick.folder, "refs.md", "Where the routes are", "The API routes live in the api service's routes module", (
        "`src/routes.py` (inside services/api), `../other/thing.py`, `/etc/hosts`, `~/.zshrc`, https://example.com/a/b.py,\n"
        "`sentry.io/organizations/acme`, `<team>/<slug>.md`, `$HOME/x.py`, and/or client/server, `*.py`, `MD013`.\n"))
    stale = [f for f in of_kind(check(sick), "stale_reference") if f.files[0].endswith("refs.md")]
    assert stale == []


def test_claude_codes_session_id_is_not_a_secret_and_a_token_beside_it_is(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    folder.mkdir()
    front = ("---\nname: deploy-flow\ndescription: The app deploys to Fly.io from main\nmetadata: \n  node_type: memory\n"
             "  type: project\n  originSessionId: 289bcc88-8fb2-4c1b-a8c6-6708f4126dc4\n")
    (folder / "a.md").write_text(front + "---\n\nNo secret here.\n")
    (folder / "b.md").write_text(front.replace("deploy-flow", "ci-token") + f"  token: {TOKEN}\n---\n\nSee above.\n")
    secrets = of_kind(check_health(plan_of(folder, None), use_cache=False), "secret")
    assert [(os.path.basename(f.files[0]), f.line) for f in secrets] == [("b.md", 8)]


def test_the_screen_of_a_large_set_finds_what_running_every_memory_finds(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    for n in range(3):  # the same head three times: the third is crowded out
        write_memory(sick.folder, f"pool-{n}.md", "Postgres pool size", "The harbor Postgres pool holds twenty connections per pod",
                     f"pool_size=20 ({n})\n")
    write_memory(sick.folder, "body-twin.md", "Connection limits", "What the RDS instance allows",
                 "The harbor Postgres pool holds twenty connections per pod. " * 6 + "\n")
    every = {f.files[0] for f in of_kind(check(sick, exact_max=10_000), "unreachable")}
    screened = check(sick, exact_max=0)
    assert every and {f.files[0] for f in of_kind(screened, "unreachable")} == every
    assert any("a screen found at risk" in note for note in screened.notes)


def test_the_screen_tries_at_most_its_bound_the_newest_first_and_says_how_many_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sick = sick_folder(tmp_path)
    write_memory(sick.folder, "notes.md", "Notes", "notes", "The pgbouncer pool was resized twice.\n")  # one word
    age(sick.folder, 86_400)
    every = {os.path.basename(f.files[0]) for f in of_kind(check(sick, exact_max=0), "unreachable")}
    assert len(every) >= 2
    newest = sorted(every)[0]
    os.utime(sick.folder / newest, (time.time(), time.time()))  # the rest are a day old
    monkeypatch.setattr("recall_kit._health_reach.UNREACHABLE_MAX_TRIED", 1)
    bounded = check(sick, exact_max=0)
    assert {os.path.basename(f.files[0]) for f in of_kind(bounded, "unreachable")} == {newest}
    assert any("the newest; " in note and "older ones at risk were not judged" in note for note in bounded.notes)


def test_a_name_only_in_a_file_over_a_mebibyte_is_found_and_one_behind_a_fifo_is_not_judged(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    (sick.project / "src" / "generated.py").write_text("x = 1\n" * 200_000 + "def only_in_generated():\n    pass\n")
    (sick.project / "assets.bin").write_bytes(b"\0" * (2 << 20))  # binary: holds no name, is no reason not to judge
    write_memory(sick.folder, "gen.md", "Generated code", "What the code generator writes for the loader",
                 "`only_in_generated` is written by the generator; `never_written_anywhere` was dropped.\n")

    def stale(report: HealthReport) -> set[str]:
        return {f.detail["reference"] for f in of_kind(report, "stale_reference") if f.files[0].endswith("gen.md")}

    report = check(sick)
    assert stale(report) == {"never_written_anywhere"}  # the large file was read for the name it alone holds
    assert not any("could not be read" in note for note in report.notes)
    os.mkfifo(sick.project / "src" / "pipe.py")
    (sick.project / "Makefile").unlink()
    os.mkfifo(sick.project / "Makefile")
    report = check(sick)
    assert stale(report) == set()  # a FIFO could be where the name lives: not judged
    assert ("command", "release") not in {(f.detail["what"], f.detail["reference"]) for f in of_kind(report, "stale_reference")}
    assert [note for note in report.notes if "could not be read" in note] == [
        f"stale references: 2 entries of {sick.project} could not be read (2 FIFO, socket or device); "
        "symbols and commands only they could hold were not judged"]
