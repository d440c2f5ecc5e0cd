"""`recall-kit hook status` says what is installed, whether the daemon runs and what a prompt here
would recall from; `recall-kit hook log` shows what each prompt got and why, from a private trail."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from integration_support import DEPLOY_PROMPT, EXAMPLES, Daemon, Env, wait_for

from recall_kit.limits import TRAIL_MAX_BYTES
from recall_kit.testing import Reply, ScriptedChatServer
from recall_kit_cli.integrations._surfaced import SurfacedRecord
from recall_kit_cli.integrations.trail import Trail, read_trail


def _key(path: Path | str) -> str:
    return "".join(c if c.isascii() and c.isalnum() else "-" for c in str(path))


def _prompt(env: Env, agent: str, cwd: Path, prompt: str = DEPLOY_PROMPT, session: str = "s-1") -> bytes:
    event = {"session_id": session, "hook_event_name": "UserPromptSubmit", "cwd": str(cwd), "prompt": prompt}
    return bytes(env.run("hook", agent, input=json.dumps(event)).stdout)


def _status(env: Env, cwd: Path) -> dict:
    result = env.run("hook", "status", "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_status_shows_the_install_the_daemon_and_this_folders_roots_with_their_counts(env: Env, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    folder = Path(env.vars["HOME"]) / ".claude" / "projects" / _key(project) / "memory"
    shutil.copytree(EXAMPLES, folder)
    assert env.run("hook", "install", "claude-code", "--user").returncode == 0

    status = _status(env, project)

    claude = next(a for a in status["agents"] if a["agent"] == "claude-code")
    assert [(i["scope"], i["installed"]) for i in claude["installs"]] == [("user", True), ("project", False)]
    ((root,),) = [p["roots"] for p in claude["prompts"]]
    expected = sum(1 for p in EXAMPLES.rglob("*.md") if p.name != "MEMORY.md")
    assert (root["path"], root["exists"], root["memories"], root["skipped"]) == (str(folder), True, expected, 0)
    qwen = next(a for a in status["agents"] if a["agent"] == "qwen-code")
    assert not qwen["installed"] and all(not r["exists"] for r in qwen["prompts"][0]["roots"])
    assert status["daemon"]["running"] is False
    text = env.run("hook", "status", cwd=project).stdout.decode()
    assert f"{folder}: {expected} memories" in text and "daemon: not running" in text


def test_status_warns_when_the_user_and_the_project_hook_would_both_run(env: Env, tmp_path: Path, memories: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    assert env.run("hook", "install", "claude-code", "--user").returncode == 0
    assert env.run("hook", "install", "claude-code", "--project", "--root", str(memories), cwd=project).returncode == 0

    claude = next(a for a in _status(env, project)["agents"] if a["agent"] == "claude-code")

    assert [p["source"] for p in claude["prompts"]] == ["agent folders", "--root"]
    assert "both run on every event" in env.run("hook", "status", cwd=project).stdout.decode()


def test_status_in_the_home_folder_counts_its_one_settings_file_once(env: Env) -> None:
    home = Path(env.vars["HOME"])  # there the project's .claude/settings.json is the user's
    assert env.run("hook", "install", "claude-code", "--user").returncode == 0

    claude = next(a for a in _status(env, home)["agents"] if a["agent"] == "claude-code")

    assert [(i["scope"], i["installed"], i.get("same_as")) for i in claude["installs"]] == [
        ("user", True, None), ("project", False, "user"),
    ]
    text = env.run("hook", "status", cwd=home).stdout.decode()
    assert "the same file as user's" in text and "both run on every event" not in text


def test_status_says_the_daemon_runs(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    status = _status(env, tmp_path)
    assert status["daemon"]["running"] is True and status["daemon"]["pid"] == daemon.process.pid
    assert status["daemon"]["enrichment"] == {"on": False, "why": "no model (or an untrusted one)"}
    text = env.run("hook", "status", cwd=tmp_path).stdout.decode()
    assert "  background enrichment: off: no model (or an untrusted one)" in text


def test_status_and_install_say_how_each_agent_is_asked_for_keywords_and_one_setting_stops_it(
    env: Env, tmp_path: Path
) -> None:
    installed = env.run("hook", "install", "claude-code", "--user").stdout.decode()
    assert "Claude Code is asked for keywords and usage_scenarios in each memory it saves, at each session's start" in installed
    status = _status(env, tmp_path)
    notes = {a["agent"]: a["keywords_note"] for a in status["agents"]}
    assert notes["claude-code"] == {"on": True, "when": "at each session's start"}
    assert notes["qwen-code"]["on"] is True and notes["qwen-code"]["when"].startswith("with each session's first prompt")
    text = env.run("hook", "status", cwd=tmp_path).stdout.decode()
    assert "  asks Qwen Code for keywords and usage_scenarios in each memory it saves, with each session's first prompt" in text
    env.vars["RECALL_KIT_AGENT_KEYWORDS"] = "0"
    assert all(not a["keywords_note"]["on"] for a in _status(env, tmp_path)["agents"])
    assert "does not ask the agent for keywords (agent_keywords is off)" in env.run("hook", "status", cwd=tmp_path).stdout.decode()


def test_the_log_lists_each_prompt_with_what_was_delivered_and_keeps_no_prompt_text(
    env: Env, daemon: Daemon, memories: Path
) -> None:
    event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": DEPLOY_PROMPT}
    assert b"Fly.io" in env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event)).stdout
    silent = {**event, "prompt": "zzqx wibble frobnicate"}
    env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(silent))

    result = env.run("hook", "log", "--json")

    assert result.returncode == 0, result.stderr
    hit, miss = json.loads(result.stdout)["prompts"]
    assert hit["session"] == "s-1" and hit["roots"] == [str(memories)] and hit["prompt_chars"] == len(DEPLOY_PROMPT)
    (initial,) = [d for d in hit["deliveries"] if d["point"] == "initial"]
    assert initial["phase"] == "fast" and "memories/projects/ledgerline/deploy.md" in initial["refs"]
    assert initial["latency_ms"] >= 0
    assert [d["reason"] for d in miss["deliveries"]] == ["no_relevant_results"]
    trail = Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "trail.jsonl"
    assert "ledgerline to production" not in trail.read_text() and "wibble" not in trail.read_text()
    assert stat.S_IMODE(trail.stat().st_mode) == 0o600
    text = env.run("hook", "log").stdout.decode()
    assert "initial point, fast: memories/projects/ledgerline/deploy.md" in text and "nothing passed the gate" in text


def test_prompt_text_is_kept_only_when_asked_for(env: Env, memories: Path) -> None:
    env.vars["RECALL_KIT_TRAIL_PROMPTS"] = "1"
    asked = Daemon(env)
    try:
        event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": DEPLOY_PROMPT}
        env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event))
    finally:
        asked.stop()
    (prompt,) = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
    assert prompt["prompt"] == DEPLOY_PROMPT


def test_a_kept_prompt_head_has_its_secrets_blanked_before_it_reaches_the_trail(tmp_path: Path) -> None:
    from recall_kit_cli.integrations.trail import describe

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    key = "sk-proj-Abc123XyZ987qwertyUIOP555"
    across = "x " * 95 + "ghp_" + "a1B2c3D4e5F6g7H8i9J0"  # a token the 200-character cut goes through
    trail = Trail(state / "trail.jsonl", keep_prompts=True)
    trail.begin("s-1", ["/r"], f"deploy with OPENAI_API_KEY={key}, the password is hunter2")
    trail.begin("s-2", ["/r"], across)
    written = (state / "trail.jsonl").read_text()
    assert key not in written and "hunter2" not in written and "ghp_" not in written
    first, second = read_trail(state / "trail.jsonl", limit=5)
    assert first.prompt is not None and first.prompt.startswith("deploy with")
    assert first.prompt_chars == len(f"deploy with OPENAI_API_KEY={key}, the password is hunter2")
    assert key not in "\n".join(describe(first)) and second.prompt is not None and "ghp_" not in second.prompt


def test_the_trail_is_off_with_its_setting(env: Env, memories: Path) -> None:
    env.vars["RECALL_KIT_TRAIL"] = "0"
    off = Daemon(env)
    try:
        event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": DEPLOY_PROMPT}
        assert b"Fly.io" in env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event)).stdout
    finally:
        off.stop()
    assert not (Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "trail.jsonl").exists()
    assert b"no prompts in" in env.run("hook", "log").stdout


def test_a_symlinked_trail_is_never_written_through_nor_read(env: Env, daemon: Daemon, memories: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    trail = Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "trail.jsonl"
    trail.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    trail.symlink_to(target)
    event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": DEPLOY_PROMPT}

    assert b"Fly.io" in env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event)).stdout

    assert target.read_text() == ""
    refused = env.run("hook", "log")
    assert refused.returncode == 2 and b"refusing to read the trail" in refused.stderr


def test_the_trail_rotates_past_its_bound_into_one_old_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    trail = Trail(state / "trail.jsonl")
    roots = ["/r" * 200]
    for i in range(TRAIL_MAX_BYTES // 400 + 10):
        trail.begin(f"s-{i}", roots, "q")
    assert trail.failures == 0
    sizes = sorted(p.stat().st_size for p in state.iterdir())
    assert len(sizes) == 2 and max(sizes) <= TRAIL_MAX_BYTES + 1024
    assert len(read_trail(state / "trail.jsonl", limit=5)) == 5
    assert os.stat(state / "trail.jsonl").st_mode & 0o077 == 0


def test_a_line_cut_by_a_crash_is_left_alone_and_the_next_record_is_kept_whole(tmp_path: Path) -> None:
    # kill -9 or a full disk mid-write leaves a last line without its newline; the next record must
    # not be glued onto it, or a restarted daemon forgets a delivery and delivers that memory again
    path = tmp_path / "state" / "surfaced.jsonl"
    path.parent.mkdir(mode=0o700)
    path.write_text('{"t": 1, "session": "zz", "refs": ["memory/d.md"')
    path.chmod(0o600)
    SurfacedRecord(path).add("a", ["memory/other.md"])
    restarted = SurfacedRecord(path)
    assert restarted.refs("a") == ("memory/other.md",) and restarted.refs("zz") == ()
    assert path.read_text().splitlines()[0] == '{"t": 1, "session": "zz", "refs": ["memory/d.md"'


def test_the_log_shows_the_models_choice_and_its_timing(env: Env, memories: Path) -> None:
    deploy = "memories/projects/ledgerline/deploy.md"
    prompt = "push the bookkeeping thing live on friday"  # the fast stage finds nothing for it
    with ScriptedChatServer(default=Reply.select(deploy)) as server:
        env.vars.update(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
        refining = Daemon(env)
        try:
            begin = {"op": "begin", "session": "s-1", "roots": [str(memories)], "query": prompt}
            env.request(begin, {"op": "consume", "session": "s-1", "point": "initial"})

            def refined_in_the_log() -> bool:
                env.request({"op": "consume", "session": "s-1", "point": "tool_result"})
                (entry,) = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
                return any(d["phase"] == "refined" and d["point"] != "discarded" for d in entry["deliveries"])

            wait_for(refined_in_the_log, "the refined delivery in the trail")
        finally:
            refining.stop()
    (entry,) = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
    (refined,) = [d for d in entry["deliveries"] if d["phase"] == "refined" and d["point"] != "discarded"]
    assert refined["strategy"] == "model" and refined["refs"] == [deploy]
    assert entry["recall"]["settled"] is True and entry["recall"]["model_ms"] is not None
    assert "the model's choice" in env.run("hook", "log").stdout.decode()


def test_the_trail_says_when_the_model_was_skipped(tmp_path: Path) -> None:
    from recall_kit import RecallEvent
    from recall_kit_cli.integrations.trail import describe

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    trail = Trail(state / "trail.jsonl")
    for handle, skipped in ((1, True), (2, False)):
        trail.begin(f"s-{handle}", ["/r"], "q")
        trail.emit(RecallEvent(session_id=f"s-{handle}", handle_id=handle, query_chars=1, docs_scanned=3, docs_selected=1,
                               strategy="heuristic", fast_ms=0.2, model_ms=None, settled=True, model_skipped=skipped))
    skipped, asked = read_trail(state / "trail.jsonl", limit=5)
    assert skipped.recall is not None and skipped.recall["model_skipped"] is True
    assert asked.recall is not None and asked.recall["model_skipped"] is False
    assert "  model skipped: the fast answer was certain" in describe(skipped)
    assert not any("skipped" in line for line in describe(asked))


def test_a_model_error_that_echoes_the_request_leaves_only_its_kind_and_status_in_the_trail(
    env: Env, memories: Path
) -> None:
    prompt = "push the bookkeeping thing live on friday"
    echo = f"invalid request: messages[1].content = {prompt!r}"  # what some servers answer
    with ScriptedChatServer(default=Reply.error(400, echo)) as server:
        env.vars.update(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted")
        failing = Daemon(env)
        try:
            begin = {"op": "begin", "session": "s-1", "roots": [str(memories)], "query": prompt}
            env.request(begin, {"op": "consume", "session": "s-1", "point": "initial"})

            def settled() -> bool:
                (entry,) = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
                return bool(entry["recall"] and entry["recall"]["settled"])

            wait_for(settled, "the model's failure in the trail")
        finally:
            failing.stop()
    trail = (Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "trail.jsonl").read_text()
    assert "bookkeeping" not in trail and "invalid request" not in trail
    (entry,) = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
    assert entry["recall"]["fallback"] == "http_error (HTTP 400)"
    assert "model fell back: http_error (HTTP 400)" in env.run("hook", "log").stdout.decode()


def test_lines_the_daemon_never_wrote_are_left_out_of_the_log_without_a_traceback(env: Env) -> None:
    trail = Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "trail.jsonl"
    trail.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    good = {"t": 1764590000.0, "kind": "begin", "session": "s-1", "roots": ["/m"], "prompt_chars": 9}
    lines = [
        {**good, "t": 1e20, "session": "far"}, {**good, "t": "soon", "session": "soon"}, {**good, "t": True},
        {**good, "session": "odd", "roots": 5, "prompt_chars": "many", "prompt": 7},
        good,
        {"t": 1764590001.0, "kind": "delivery", "session": "s-1", "handle": 1, "point": 3, "phase": None,
         "refs": 7, "reason": ["x"], "latency_ms": "fast"},
        {"t": 1764590002.0, "kind": "recall", "session": "s-1", "handle": 1, "settled": "yes", "fallback": {"a": 1},
         "fast_ms": 1e400, "selected": -3},
        {"t": 1764590003.0, "kind": "refused", "session": "odd", "reason": 5},
    ]
    trail.write_text("".join(json.dumps(line) + "\n" for line in lines) + "[" * 100_000 + "\n")
    trail.chmod(0o600)
    for args in (("hook", "log"), ("hook", "log", "--json"), ("hook", "log", "--session", "odd")):
        result = env.run(*args)
        assert result.returncode == 0 and b"Traceback" not in result.stderr, result.stderr
    prompts = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
    assert [p["session"] for p in prompts] == ["odd", "s-1"]  # no time, no line
    odd, ours = prompts
    assert odd["roots"] == [] and odd["prompt_chars"] is None and odd["refused"] == "refused"
    assert ours["deliveries"] == [{"point": None, "phase": None, "strategy": None, "reason": None, "refs": [],
                                   "latency_ms": None}]
    assert ours["recall"]["settled"] is None and ours["recall"]["fast_ms"] is None and ours["recall"]["selected"] is None


def test_the_log_says_a_repeated_prompt_got_nothing_new_and_names_an_unknown_session(
    env: Env, daemon: Daemon, memories: Path
) -> None:
    event = {"session_id": "s-1", "hook_event_name": "UserPromptSubmit", "cwd": "/", "prompt": DEPLOY_PROMPT}
    assert b"Fly.io" in env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event)).stdout
    again = env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(event))
    assert b"Fly.io" not in again.stdout  # delivered once in a session
    silent = {**event, "prompt": "zzqx wibble frobnicate"}
    env.run("hook", "claude-code", "--root", str(memories), input=json.dumps(silent))

    first, repeat, miss = json.loads(env.run("hook", "log", "--json").stdout)["prompts"]
    assert [(d["reason"], d["refs"]) for d in repeat["deliveries"]] == [("already_delivered", first["deliveries"][0]["refs"])]
    assert [d["reason"] for d in miss["deliveries"]] == ["no_relevant_results"]  # not every silence is a repeat
    text = env.run("hook", "log", "--session", "s-1").stdout.decode()
    assert "not delivered (already delivered in this session)" in text and "nothing passed the gate" in text

    unknown = env.run("hook", "log", "--session", "s-2")
    assert unknown.returncode == 0
    assert unknown.stdout.decode().splitlines() == [
        f"the trail knows no session 's-2': {Path(env.vars['XDG_STATE_HOME']) / 'recall-kit' / 'trail.jsonl'} holds "
        "prompts of 1 other session (`recall-kit hook log` lists them)"
    ]
