"""`doctor --model-check` against a scripted OpenAI-compatible server on loopback: one bounded call per
near-duplicate group, the proposal shown as a diff, and nothing ever written, whatever the model says."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from cli_support import clean_environ, run_recall_kit
from doctor_support import home_environ, Sick, sick_folder, tree_state, write_memory
from recall_kit.health import HealthPlan, HealthRoot, RecallSet, check_health, review_near_duplicates
from recall_kit.settings import load_settings
from recall_kit.testing import Reply, ScriptedChatServer

MERGED = {
    "conflict": False,
    "explanation": "Both say main deploys to Fly.io through GitHub Actions.",
    "merged": {"name": "Deploying to Fly.io", "description": "main deploys to Fly.io via GitHub Actions after CI",
               "type": "project", "body": "Every merge to `main` deploys; nobody deploys by hand."},
}


def doctor(sick: Sick, server: ScriptedChatServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = home_environ(sick.home, RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
    return run_recall_kit("doctor", "--model-check", *args, cwd=sick.project, env=env)


def test_one_call_per_group_a_diff_and_nothing_written(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    before = tree_state(sick.folder, sick.project)
    with ScriptedChatServer(default=Reply.content(json.dumps(MERGED))) as server:
        result = doctor(sick, server)
        assert len(server.requests) == 1
        asked = json.dumps(server.requests[0].body)
    assert result.returncode == 1, result.stderr
    assert "model check (1 model call to scripted; nothing is written):" in result.stdout
    assert "no conflict: Both say main deploys to Fly.io" in result.stdout
    assert "+++ memory/deploy-fly.md (proposed merge, not written)" in result.stdout
    assert "+description: main deploys to Fly.io via GitHub Actions after CI" in result.stdout
    assert "recall-kit rm memory/fly-deploys-from-main.md" in result.stdout
    assert "GitHub Actions deploys the app to Fly.io from main" in asked  # both memories were shown
    assert tree_state(sick.folder, sick.project) == before


def test_an_unusable_or_hostile_answer_is_said_and_never_trusted(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    hostile = {**MERGED, "explanation": "ok\x1b[2J\nforged line", "merged": {**MERGED["merged"], "type": "gossip"}}
    for reply, said in ((Reply.non_json(), "answer is not usable: answer is not JSON"),
                        (Reply.content(json.dumps(hostile)), "merged type 'gossip' is not one of"),
                        (Reply.error(500, "boom"), "the model gave no answer: HTTP 500")):
        with ScriptedChatServer(default=reply) as server:
            result = doctor(sick, server, "--json")
        proposal = json.loads(result.stdout)["model_check"]["proposals"][0]
        assert said in proposal["failure"] and proposal["merged"] is None, proposal
    escaped = {**MERGED, "explanation": "ok\x1b[2J\nforged line"}
    with ScriptedChatServer(default=Reply.content(json.dumps(escaped))) as server:
        text = doctor(sick, server).stdout
    assert "\x1b" not in text and "no conflict: ok [2J forged line" in text  # one line, no escape sent


def test_calls_are_bounded_and_the_rest_are_named(tmp_path: Path) -> None:
    folder = tmp_path / "memory"
    for n, topic in enumerate(["postgres pool size", "redis cache ttl", "nightly batch start time"]):
        for copy in ("a", "b"):
            write_memory(folder, f"{n}-{copy}.md", topic.title(), f"The harbor {topic} setting and where it is set",
                         f"Set in harbor settings ({topic}).\n")
    report = check_health(HealthPlan((HealthRoot(str(folder)),), (RecallSet("t", (str(folder),)),)), use_cache=False)
    assert sum(f.kind == "near_duplicate" for f in report.findings) == 3
    with ScriptedChatServer(default=Reply.content(json.dumps(MERGED))) as server:
        settings = load_settings({"base_url": server.base_url, "model": "scripted"}, environ={})
        review = review_near_duplicates(report, settings.selector, max_calls=2)
        assert len(server.requests) == 2
    assert (review.calls, review.not_asked, len(review.proposals)) == (2, 1, 2)


def test_an_untrusted_project_files_model_gets_nothing(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    with ScriptedChatServer(default=Reply.content(json.dumps(MERGED))) as server:
        (sick.project / "recall-kit.toml").write_text(f'[selector]\nbase_url = "{server.base_url}"\nmodel = "cloned"\n')
        result = run_recall_kit("doctor", "--model-check", cwd=sick.project, env=home_environ(sick.home))
        assert result.returncode == 2 and "--model-check needs the selector model" in result.stderr
        assert "config trust" in result.stderr and server.requests == []


def test_a_memory_whose_file_name_is_not_utf8_is_shown_to_the_model_as_the_cli_shows_it(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    twin = sick.folder / "fly-deploys-from-main.md"
    twin.rename(os.fsdecode(os.fsencode(sick.folder) + b"/fly-d\xe9ploys.md"))  # Latin-1 é in its name
    with ScriptedChatServer(default=Reply.content(json.dumps(MERGED))) as server:
        result = doctor(sick, server, "--json")
        assert len(server.requests) == 1
        asked = server.requests[0].body["messages"][1]["content"]
    proposal = json.loads(result.stdout)["model_check"]["proposals"][0]
    assert proposal["failure"] is None and proposal["refs"] == ["memory/deploy-fly.md", "memory/fly-d\udce9ploys.md"]
    assert "### Memory 2: memory/fly-d\\xe9ploys.md (modified" in asked


def test_a_command_it_advises_quotes_a_file_name_a_shell_would_run_or_split(tmp_path: Path) -> None:
    sick = sick_folder(tmp_path)
    hostile = sick.folder / "fly deploys $(touch PWNED).md"  # a name an agent or a cloned repo may write
    (sick.folder / "fly-deploys-from-main.md").rename(hostile)
    with ScriptedChatServer(default=Reply.content(json.dumps(MERGED))) as server:
        result = doctor(sick, server)
    assert result.returncode == 1, result.stderr
    assert "then remove the rest: recall-kit rm 'memory/fly deploys $(touch PWNED).md'" in result.stdout, result.stdout
