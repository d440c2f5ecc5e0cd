"""The daemon enriches the memories it watches, with the trusted model it refines with: the real
`recall-kit serve`, real inotify, a scripted model on loopback. A memory written mid-session is
recalled by its enriched words at the session's next prompt; a prompt's selector call goes first;
with no model, an untrusted one or enrichment off, no enrichment request is sent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration_support import RECALL_KIT, Daemon, Env, wait_for
from memory_store import MemoryStore, read_enrichment, sidecar_path
from recall_kit.testing import Reply, ScriptedChatServer
from recall_kit.testing.scripted_server import is_enrichment

KEYWORDS = ["kill switch", "dark launch", "rollout toggle", "gradual release"]
ENRICHED = Reply.content(json.dumps({"keywords": KEYWORDS, "usage_scenarios": ["how do I dark launch a feature?"]}))
FLAGS = (
    "---\nname: Feature flags in ledgerline\ndescription: ledgerline gates unfinished work behind LaunchDarkly flags\n"
    "type: project\n---\nEvery flag has an owner and an expiry date.\n"
)
OWN = (  # a memory its writer gave terms to: never sent
    "---\nname: Editor\ndescription: prefers neovim\ntype: user\nkeywords: [vim, editor]\n"
    "usage_scenarios: [which editor do I use?]\n---\nbody\n"
)
PROMPT = "how do I flip the kill switch for a dark launch?"  # only the enriched words match


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "memory"
    (folder / "user").mkdir(parents=True)
    (folder / "user" / "editor.md").write_text(OWN)
    return folder


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer(default=Reply.empty(), enrichment=ENRICHED) as started:
        yield started


def _with_model(env: Env, server: ScriptedChatServer, **extra: str) -> Env:
    env.vars.update(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted", **extra)
    return env


def _prompt(env: Env, root: Path, session: str, query: str) -> Any:
    begin = {"op": "begin", "session": session, "roots": [str(root)], "query": query}
    return env.request(begin, {"op": "consume", "session": session, "point": "initial"})[1]["delivery"]


def _store_status(env: Env) -> dict[str, Any]:
    (store,) = env.request({"op": "status"})[0]["stores"]
    return dict(store)


def test_a_memory_written_mid_session_is_recalled_by_its_enriched_words_at_the_next_prompt(
    env: Env, root: Path, server: ScriptedChatServer
) -> None:
    daemon = Daemon(_with_model(env, server))
    try:
        _prompt(env, root, "s1", "which editor do I use?")  # the session begins, its store opens
        (root / "project").mkdir()
        (root / "project" / "flags.md").write_text(FLAGS)  # the agent writes a memory mid-session
        before = (root / "project" / "flags.md").read_bytes()
        wait_for(lambda: _store_status(env)["enrichment"]["enriched"] == 1, "the daemon to enrich the new memory",
                 timeout=30)
        delivered: list[Any] = []

        def recalled() -> bool:  # the store's watch takes the sidecar in; the index follows
            delivered.append(_prompt(env, root, "s1", PROMPT))
            return delivered[-1] is not None
        wait_for(recalled, "the fast stage to recall the memory by its enriched words")
        assert delivered[-1]["phase"] == "fast" and delivered[-1]["refs"] == ["memory/project/flags.md"]
        assert (root / "project" / "flags.md").read_bytes() == before  # never written into the memory
        entries, problems = read_enrichment(sidecar_path(root))
        assert problems == [] and set(entries) == {"project/flags.md"} and list(entries["project/flags.md"].keywords) == KEYWORDS
        enrichments = [r for r in server.requests if is_enrichment(r)]
        assert len(enrichments) == 1 and "Feature flags in ledgerline" in enrichments[0].user_message
        assert '["editor", "vim"]' in enrichments[0].user_message  # the store's vocabulary came along
        status = env.request({"op": "status"})[0]["enrichment"]
        assert status["on"] is True and (status["enriched"], status["pending"], status["calls"]) == (1, 0, 1)
        shown = env.run("serve", "--status")
        assert "enrichment: on with scripted" in shown.stdout.decode() and "1 enriched, 0 pending" in shown.stdout.decode()
        log = env.run("hook", "log").stdout.decode()
        assert "memory/project/flags.md  enriched: 4 keywords, 1 usage scenarios" in log
    finally:
        daemon.stop()


def test_a_prompts_selector_request_goes_before_the_daemons_enrichment(
    env: Env, root: Path, server: ScriptedChatServer
) -> None:
    server.hold()
    (root / "project").mkdir()
    (root / "project" / "flags.md").write_text(FLAGS)
    daemon = Daemon(_with_model(env, server))
    try:
        # the session's start opens its root set without a prompt: its new memory is being enriched
        env.request({"op": "writing_note", "session": "s1", "roots": [str(root)]})
        (enrichment,) = server.wait_for_requests(1, timeout=30)
        assert is_enrichment(enrichment)
        env.request({"op": "begin", "session": "s1", "roots": [str(root)], "query": "which editor do I use?"})
        selections = lambda: [r for r in server.requests if not is_enrichment(r)]  # noqa: E731
        wait_for(lambda: len(selections()) >= 1, "the prompt's selector request")
        assert enrichment.connection_closed.wait(10)  # cut for the prompt, before any answer was let go
        server.release(5)
        wait_for(lambda: _store_status(env)["enrichment"]["enriched"] == 1, "the enrichment, tried again", timeout=30)
        assert _store_status(env)["enrichment"]["preempted"] >= 1
    finally:
        daemon.stop()


@pytest.mark.parametrize("how", ["no model", "untrusted project file", "daemon_enrich off", "fast only"])
def test_with_no_trusted_model_or_enrichment_off_no_enrichment_request_is_sent(
    env: Env, root: Path, server: ScriptedChatServer, how: str
) -> None:
    args: list[str] = []
    cwd = None
    if how == "no model":
        env.vars["RECALL_KIT_BASE_URL"] = server.base_url  # an endpoint but no model: nothing is configured
    elif how == "untrusted project file":
        cwd = env.base / "cloned"
        cwd.mkdir()
        (cwd / "recall-kit.toml").write_text(
            f'daemon_enrich = true\n[selector]\nbase_url = "{server.base_url}"\nmodel = "scripted"\n')
    elif how == "daemon_enrich off":
        _with_model(env, server, RECALL_KIT_DAEMON_ENRICH="0")
    else:
        _with_model(env, server)
        args.append("--fast-only")
    daemon = Daemon(env, *args, cwd=cwd)
    try:
        _prompt(env, root, "s1", "which editor do I use?")
        (root / "project").mkdir()
        (root / "project" / "flags.md").write_text(FLAGS)
        wait_for(lambda: _store_status(env)["docs"] == 2, "the store to take the new memory in")
        _prompt(env, root, "s1", "feature flags in ledgerline with LaunchDarkly")  # a model would be asked now
        enrichment = env.request({"op": "status"})[0]["enrichment"]
        assert enrichment["on"] is False and "enrichment" not in _store_status(env)
    finally:
        daemon.stop()
    assert [r for r in server.requests if is_enrichment(r)] == []
    if how != "daemon_enrich off":
        assert server.requests == []  # nothing at all reached the model


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_sidecar_that_is_a_fifo_or_a_symlink_gets_no_model_call_and_prompts_still_run(
    env: Env, root: Path, server: ScriptedChatServer, tmp_path: Path, kind: str
) -> None:
    (root / ".recall-kit").mkdir()
    sidecar = root / ".recall-kit" / "enrichment.jsonl"
    if kind == "fifo":
        os.mkfifo(sidecar)
    else:
        (tmp_path / "elsewhere.jsonl").write_text("")
        sidecar.symlink_to(tmp_path / "elsewhere.jsonl")
    (root / "project").mkdir()
    (root / "project" / "flags.md").write_text(FLAGS)
    daemon = Daemon(_with_model(env, server))
    try:
        _prompt(env, root, "s1", "feature flags in ledgerline with LaunchDarkly")
        wait_for(lambda: _store_status(env).get("enrichment", {}).get("refused_roots") == ["memory"],
                 "the daemon to see the sidecar cannot be written")
    finally:
        daemon.stop()
    assert [r for r in server.requests if is_enrichment(r)] == []
    if kind == "symlink":
        assert (tmp_path / "elsewhere.jsonl").read_text() == ""  # nothing written through it


def test_kill_9_mid_enrichment_leaves_a_valid_sidecar_and_a_restart_asks_only_for_the_rest(
    env: Env, root: Path, server: ScriptedChatServer
) -> None:
    (root / "project").mkdir()
    for i in range(40):
        (root / "project" / f"m{i:02d}.md").write_text(FLAGS.replace("Feature flags", f"Flags {i}"))
    server.enrichment = ENRICHED.after(20)
    daemon = Daemon(_with_model(env, server, RECALL_KIT_ENRICH_CALLS_PER_MINUTE="6000"))
    try:
        _prompt(env, root, "s1", "which editor do I use?")
        wait_for(lambda: _store_status(env)["enrichment"]["enriched"] >= 10, "some memories enriched", timeout=60)
    finally:
        daemon.process.send_signal(signal.SIGKILL)  # mid-enrichment: calls in flight, the sidecar being rewritten
        daemon.process.wait(10)
        daemon.stop()
    entries, problems = read_enrichment(sidecar_path(root))
    assert problems == [] and 10 <= len(entries) < 40 + 1
    with MemoryStore.open(root, watch=False) as store:
        snapshot = store.snapshot()
    assert snapshot.errors == () and len(snapshot.docs) == 41
    enriched_before = set(entries)
    asked_before = len([r for r in server.requests if is_enrichment(r)])
    restarted = Daemon(_with_model(env, server, RECALL_KIT_ENRICH_CALLS_PER_MINUTE="6000"))
    try:
        _prompt(env, root, "s2", "which editor do I use?")
        wait_for(lambda: _store_status(env)["enrichment"]["pending"] == 0
                 and _store_status(env)["enrichment"]["in_flight"] == 0, "the rest enriched", timeout=60)
    finally:
        restarted.stop()
    later = [r for r in server.requests if is_enrichment(r)][asked_before:]
    titles = {line.removeprefix("Title: ") for r in later for line in r.user_message.splitlines() if line.startswith("Title: ")}
    assert not any(f"project/m{title.split()[1]:0>2}.md" in enriched_before for title in titles if title.startswith("Flags "))
    entries, problems = read_enrichment(sidecar_path(root))
    assert problems == [] and len(entries) == 40


def test_an_untrusted_project_file_cannot_turn_the_note_or_enrichment_on_or_off(env: Env, tmp_path: Path) -> None:
    project = tmp_path / "cloned"
    project.mkdir()
    (project / "recall-kit.toml").write_text("agent_keywords = false\ndaemon_enrich = false\n")
    shown = subprocess.run([RECALL_KIT, "config", "--json"], cwd=project, env=env.vars, capture_output=True, text=True)
    data = json.loads(shown.stdout)
    assert data["agent_keywords"]["value"] == "on" and data["daemon_enrich"]["value"] == "on"
    assert "agent_keywords ignored" in shown.stderr and "daemon_enrich ignored" in shown.stderr


def test_an_enrichment_error_that_echoes_the_memory_leaves_only_its_kind_and_status_in_the_trail(
    env: Env, root: Path
) -> None:
    echo = "invalid request: Title: Feature flags in ledgerline Body: Every flag has an owner"  # the request, echoed
    with ScriptedChatServer(default=Reply.empty(), enrichment=Reply.error(400, echo)) as server:
        daemon = Daemon(_with_model(env, server))
        try:
            _prompt(env, root, "s1", "which editor do I use?")
            (root / "project").mkdir()
            (root / "project" / "flags.md").write_text(FLAGS)
            wait_for(lambda: _store_status(env)["enrichment"]["failed"] >= 1, "the enrichment to fail", timeout=30)
            log = env.run("hook", "log").stdout.decode()
        finally:
            daemon.stop()
    trail = (Path(env.vars["XDG_STATE_HOME"]) / "recall-kit" / "trail.jsonl").read_text()
    assert "ledgerline" not in trail and "invalid request" not in trail and "owner" not in trail
    assert "memory/project/flags.md  failed: http_error (HTTP 400)" in log
