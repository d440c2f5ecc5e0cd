"""Claude Code and Qwen Code themselves, installed from npm at pinned versions and run offline
(`-p`) against a scripted model, with recall-kit's hook installed in a throwaway HOME and the
memories in the agent's own memory folder. Everything is asserted from the requests the agent's
model received.

One turn per agent (module scope) is played once and looked at by several tests: the prompt,
a `Read`/`read_file` of notes.txt (sent once the model selector has been asked), a second read,
then text. The fast stage answers the prompt with one memory; the selector (a scripted
OpenAI-compatible server the daemon is configured for) picks that one and another.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from agent_clients import (
    AGENTS,
    CLAUDE_CODE,
    AgentRun,
    git_project,
    install_hook,
    prepare_home,
    recalled_blocks,
    refs_in,
    run_agent,
    settings_file,
    uninstall_hook,
)
from integration_support import EXAMPLES, Daemon, Env, stop_daemon, wait_for
from recall_kit.testing import AgentRequest, Reply, ScriptedAgentServer, ScriptedChatServer, Turn, agent_memory_folder
from memory_store import parse_memory
from recall_kit._vocabulary import VOCABULARY_LEAD, WRITING_NOTE
from recall_kit_cli.integrations import agents as agent_records

HOOK_TIMEOUT_S = agent_records.CLAUDE_CODE.hook_timeout  # seconds, as Qwen Code's: the same for both

PROMPT = "how do I deploy ledgerline to production?"
FAST = "ledgerline-deploy.md"  # what the fast stage delivers for PROMPT
PICK = "commit-messages.md"  # the model selector's pick: no word in common with PROMPT
MEMORIES = {
    FAST: "projects/ledgerline/deploy.md",
    PICK: "feedback/commit-messages.md",
    "editor-and-shell.md": "user/editor-and-shell.md",
    "small-diffs.md": "feedback/small-diffs.md",
}
INDEX_MARKER = "memory-index-7f3a"  # a word only MEMORY.md holds
READ_TOOL = {CLAUDE_CODE: "Read", "qwen-code": "read_file"}
NOTES = "the pool size is 20"  # what the first read returns
RUN_TIMEOUT_S = 120  # a bound on one `-p` run, not a wait anything relies on
# a user's own settings, written by hand: every byte must survive install and uninstall
CLAUDE_USER_SETTINGS = '{\n    "env": {"EDITOR": "vi"},\n    "cleanupPeriodDays": 30\n}\n'


def note_vocabulary(text: str) -> list[str]:
    """The vocabulary the writing note showed in ``text`` (a request's conversation)."""
    assert WRITING_NOTE in text, text[:2000]
    line = text[text.index(VOCABULARY_LEAD) + len(VOCABULARY_LEAD):].split("\n", 1)[0]
    terms = json.JSONDecoder().raw_decode(line)[0]
    assert isinstance(terms, list)
    return terms


def ref(name: str) -> str:
    """A memory's ref: the root's label (its folder's name, "memory") and the file."""
    return f"memory/{name}"


def write_memories(folder: Path) -> None:
    folder.mkdir(parents=True)
    for name, source in MEMORIES.items():
        shutil.copy(EXAMPLES / source, folder / name)
    lines = [f"# Memory index ({INDEX_MARKER})", ""] + [f"- [{name}]({name})" for name in MEMORIES]
    (folder / "MEMORY.md").write_text("\n".join(lines) + "\n")


def warm_daemon(env: Env, memory: Path) -> None:
    """Open the root set in the daemon before the timed part, so the first hook finds it indexed."""
    begin = {"op": "begin", "session": "warm-up", "roots": [str(memory)], "query": "warm up"}
    answers = env.request(begin, {"op": "consume", "session": "warm-up", "point": "initial"},
                          {"op": "close_session", "session": "warm-up"})
    assert all(answer["ok"] for answer in answers), answers


def selector_asked(selector: ScriptedChatServer) -> Callable[[], None]:
    """Blocks until the model selector has been asked about PROMPT (its answer is immediate)."""
    return lambda: wait_for(lambda: any(r.query == PROMPT for r in selector.requests),
                            "the model selector to be asked about the prompt", timeout=60)


@dataclass
class Played:
    agent: str
    run: AgentRun
    main: list[AgentRequest]
    side: list[AgentRequest]
    errors: list[str]
    settings_before: bytes
    settings_after_uninstall: bytes


def play(agent: str, binary: Path, env: Env, base: Path) -> Played:
    home = Path(env.vars["HOME"])
    project = git_project(base / "project")
    prepare_home(agent, home)
    settings = settings_file(agent, home)
    if agent == CLAUDE_CODE:
        settings.parent.mkdir(parents=True)
        settings.write_text(CLAUDE_USER_SETTINGS)
    before = settings.read_bytes()
    memory = agent_memory_folder(agent, home, project)
    write_memories(memory)
    # the model picks FAST as well: delivered already, it must not come again
    with ScriptedChatServer(default=Reply.select(ref(FAST), ref(PICK))) as selector:
        # no background enrichment: its terms would change what the fast stage delivers for PROMPT
        env.vars.update(RECALL_KIT_BASE_URL=selector.base_url, RECALL_KIT_MODEL="scripted", RECALL_KIT_DAEMON_ENRICH="0")
        daemon = Daemon(env)
        try:
            warm_daemon(env, memory)
            install_hook(agent, env)
            read = READ_TOOL[agent]
            script = [Turn.call(read, file_path=str(project / "notes.txt")).when(selector_asked(selector)),
                      Turn.call(read, file_path=str(project / "more.txt")), Turn.say("done")]
            with ScriptedAgentServer(script) as server:
                run = run_agent(agent, binary, env, project, server, PROMPT, timeout=RUN_TIMEOUT_S)
        finally:
            daemon.stop()
    assert run.returncode == 0, (run.stdout, run.stderr)
    uninstall_hook(agent, env)
    return Played(agent, run, server.main_requests, server.side_requests, server.errors, before, settings.read_bytes())


@pytest.fixture(scope="module", params=AGENTS)
def played(request: pytest.FixtureRequest, clis: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Played:
    agent = request.param
    base = tmp_path_factory.mktemp(agent)
    env = Env(base)
    try:
        return play(agent, clis[agent], env, base)
    finally:
        stop_daemon(env)


def block_refs(request: AgentRequest) -> list[list[str]]:
    return [refs_in(block) for _, block in recalled_blocks(request)]


def position(request: AgentRequest, needle: str | re.Pattern[str]) -> tuple[int, int]:
    """(part, offset) of the first occurrence of ``needle`` in the request's conversation."""
    pattern = needle if isinstance(needle, re.Pattern) else re.compile(re.escape(needle))
    for index, part in enumerate(request.parts):
        found = pattern.search(part.text)
        if found:
            return index, found.start()
    raise AssertionError(f"{needle!r} is not in the request")


def test_the_turn_runs_the_scripted_tools_and_ends(played: Played) -> None:
    assert played.errors == []
    assert len(played.main) == 3, [r.reply for r in played.main]
    if played.agent == CLAUDE_CODE:
        assert played.run.result["result"] == "done" and played.run.result["num_turns"] == 3
    else:
        assert played.run.stdout.strip() == "done"


def test_the_fast_block_arrives_with_the_prompt(played: Played) -> None:
    first = played.main[0]
    assert PROMPT in first.text()
    assert block_refs(first) == [[ref(FAST)]]


def test_the_selectors_pick_arrives_after_the_first_tool_result(played: Played) -> None:
    second = played.main[1]
    assert block_refs(second) == [[ref(FAST)], [ref(PICK)]]  # the fast block, still in the history, then the pick
    pick_block = re.compile(r"(?:<|&lt;)recalled-memories(?:>|&gt;)(?:(?!recalled-memories).)*" + re.escape(ref(PICK)), re.S)
    assert position(second, NOTES) < position(second, pick_block)


def test_a_memory_is_delivered_at_most_once_per_session(played: Played) -> None:
    last = played.main[-1]  # the whole turn's history: the second tool result added nothing
    delivered = Counter(r for refs in block_refs(last) for r in refs)
    assert delivered == Counter({ref(FAST): 1, ref(PICK): 1})
    assert len(recalled_blocks(last)) == len(recalled_blocks(played.main[1]))


def test_memory_md_never_arrives(played: Played) -> None:
    for request in played.main:
        for _, block in recalled_blocks(request):
            assert "MEMORY.md" not in block and INDEX_MARKER not in block


def test_side_queries_are_answered_apart_from_the_turn(played: Played) -> None:
    if played.agent == CLAUDE_CODE:
        assert {r.purpose for r in played.side} <= {"other"}
    else:  # its own recall asked once, about the same prompt (it is answered with an empty selection)
        recalls = [r for r in played.side if r.purpose == "recall"]
        assert len(recalls) == 1 and PROMPT in recalls[0].text()


def test_the_writing_note_and_the_stores_vocabulary_reach_the_agents_memory_writer(played: Played) -> None:
    first = played.main[0]
    vocabulary = note_vocabulary(first.text())
    assert {"fly.io", "conventional commits", "neovim", "pull request"} <= set(vocabulary)
    if played.agent == CLAUDE_CODE:  # SessionStart context, in the request the main agent (the writer) answers
        assert f"SessionStart hook additional context: {WRITING_NOTE}" in first.text()
    else:  # with the first prompt, in the conversation its memory extractor reads too (below)
        assert position(first, PROMPT) < position(first, WRITING_NOTE)
    later = "\n".join(part.text for request in played.main[1:] for part in request.parts[len(first.parts):])
    assert WRITING_NOTE not in later  # once a session


def test_uninstall_leaves_the_settings_file_byte_for_byte_as_it_was(played: Played) -> None:
    assert played.settings_after_uninstall == played.settings_before


@pytest.mark.parametrize("agent", AGENTS)
def test_with_no_daemon_that_can_start_the_turn_succeeds_with_nothing_added(
    agent: str, clis: dict[str, Path], tmp_path: Path
) -> None:
    env = Env(tmp_path)
    runtime = Path(env.vars["XDG_RUNTIME_DIR"]) / "recall-kit"
    runtime.write_text("")  # a file where the daemon's folder goes: no daemon can listen, none is trusted
    home = Path(env.vars["HOME"])
    project = git_project(tmp_path / "project")
    prepare_home(agent, home)
    memory = agent_memory_folder(agent, home, project)
    write_memories(memory)
    install_hook(agent, env)
    env.vars["QWEN_DEBUG_LOG_FILE"] = "1"
    script = [Turn.call(READ_TOOL[agent], file_path=str(project / "notes.txt")), Turn.say("done")]
    try:
        with ScriptedAgentServer(script) as server:
            run = run_agent(agent, clis[agent], env, project, server, PROMPT, timeout=RUN_TIMEOUT_S)
    finally:
        stop_daemon(env)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert len(server.main_requests) == 2
    assert all(recalled_blocks(r) == [] for r in server.main_requests)
    log = env.hook_log.read_text()  # the hook said why it handed nothing over
    assert re.search(r"UserPromptSubmit: refusing the daemon's socket .*recall-kit is not a folder", log), log
    if agent == CLAUDE_CODE:  # the client waited for the hook less than the hook's timeout
        assert run.result["result"] == "done"
        assert run.result["time_to_request_ms"] < HOOK_TIMEOUT_S * 1000
    else:
        debug = "\n".join(p.read_text() for p in (home / ".qwen" / "debug").glob("*.txt"))
        durations = re.findall(r"Hook execution for UserPromptSubmit: 1 hooks executed successfully, "
                               r"total duration: (\d+)ms", debug)
        assert durations and all(int(ms) < HOOK_TIMEOUT_S * 1000 for ms in durations), debug[-2000:]


@pytest.mark.parametrize("agent", AGENTS)
def test_one_user_install_and_nothing_else_recalls_what_the_agent_wrote_at_the_next_prompt(
    agent: str, clis: dict[str, Path], tmp_path: Path
) -> None:
    # no daemon started, no folder named, no model configured: the first hook starts the daemon,
    # which finds the agent's own folder for this project from the event alone
    env = Env(tmp_path)
    home = Path(env.vars["HOME"])
    project = git_project(tmp_path / "project")
    prepare_home(agent, home)
    write_memories(agent_memory_folder(agent, home, project))
    install_hook(agent, env)
    try:
        with ScriptedAgentServer([Turn.say("done")]) as server:
            run = run_agent(agent, clis[agent], env, project, server, PROMPT, timeout=RUN_TIMEOUT_S)
    finally:
        stop_daemon(env)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert block_refs(server.main_requests[0]) == [[ref(FAST)]], env.hook_log.read_text() if env.hook_log.exists() else ""


# -- the agent writes the words itself ------------------------------------------------------------
FLAGS = "feature-flags.md"
FLAGS_MEMORY = (  # what the scripted model makes the agent write, with the words the note asks for
    "---\nname: Feature flags in ledgerline\ndescription: ledgerline gates unfinished work behind LaunchDarkly flags\n"
    "type: project\nkeywords: [kill switch, dark launch, rollout toggle]\n"
    "usage_scenarios: [how do I dark launch a feature?]\n---\nEvery flag has an owner and an expiry date.\n"
)
KEYWORD_PROMPT = "how do I flip the kill switch for a dark launch?"  # only the memory's keywords match
WRITE_TOOL = {CLAUDE_CODE: "Write", "qwen-code": "write_file"}
WRITE_ARGS = {CLAUDE_CODE: (), "qwen-code": ("--approval-mode", "auto-edit")}  # Qwen Code's -p refuses edits unless told
SESSION_START_MARKER = "session-start-marker-5d1e"


def add_session_start_marker(settings: Path, folder: Path) -> None:
    """A SessionStart hook of the test's own beside ours, adding a marker: where that context goes."""
    script = folder / "marker_hook.py"
    script.write_text("import json\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': 'SessionStart', "
                      f"'additionalContext': '{SESSION_START_MARKER}'}}}}))\n")
    data = json.loads(settings.read_text())
    data["hooks"]["SessionStart"].append({"hooks": [{"type": "command", "command": f"{sys.executable} {script}", "timeout": 5}]})
    settings.write_text(json.dumps(data, indent=2) + "\n")


@pytest.mark.parametrize("agent", AGENTS)
def test_a_memory_the_agent_writes_with_its_keywords_is_delivered_by_them_at_the_next_prompt(
    agent: str, clis: dict[str, Path], tmp_path: Path
) -> None:
    env = Env(tmp_path)
    home = Path(env.vars["HOME"])
    project = git_project(tmp_path / "project")
    prepare_home(agent, home)
    memory = agent_memory_folder(agent, home, project)
    write_memories(memory)
    settings = install_hook(agent, env)
    if agent != CLAUDE_CODE:
        add_session_start_marker(settings, tmp_path)
    daemon = Daemon(env)  # no model: what is delivered is the fast stage's, from the memory's own words
    try:
        warm_daemon(env, memory)
        write = Turn.call(WRITE_TOOL[agent], file_path=str(memory / FLAGS), content=FLAGS_MEMORY)
        with ScriptedAgentServer([write, Turn.say("saved")]) as writer:
            wrote = run_agent(agent, clis[agent], env, project, writer,
                              "remember: unfinished ledgerline work goes behind LaunchDarkly flags",
                              timeout=RUN_TIMEOUT_S, extra=WRITE_ARGS[agent])
        assert wrote.returncode == 0, (wrote.stdout, wrote.stderr)
        # written by the agent's own tool (Claude Code rewrites it: type, keywords and usage_scenarios under `metadata`)
        written = parse_memory((memory / FLAGS).read_bytes())
        assert (written.type, written.keywords) == ("project", ("kill switch", "dark launch", "rollout toggle"))
        wait_for(lambda: env.request({"op": "status"})[0]["stores"][0]["docs"] == len(MEMORIES) + 1,
                 "the daemon to take the agent's new memory in")
        with ScriptedAgentServer([Turn.say("done")]) as asker:
            asked = run_agent(agent, clis[agent], env, project, asker, KEYWORD_PROMPT, timeout=RUN_TIMEOUT_S)
        assert asked.returncode == 0, (asked.stdout, asked.stderr)
    finally:
        daemon.stop()
        stop_daemon(env)
    assert block_refs(asker.main_requests[0]) == [[ref(FLAGS)]]
    for server in (writer, asker):  # each session's writer was asked for the words
        assert WRITING_NOTE in server.main_requests[0].text()
    if agent != CLAUDE_CODE:
        # Qwen Code's memory extractor (it skips a turn whose main agent wrote a memory itself) sees
        # the first prompt's context, the note with it; SessionStart context only reaches the main
        # agent's system prompt, never the extractor: why the note comes with the first prompt
        extractions = [r for r in writer.side_requests + asker.side_requests if r.purpose == "extraction"]
        assert extractions and all(WRITING_NOTE in r.text() for r in extractions)
        assert all(SESSION_START_MARKER not in r.text() for r in extractions)
        assert SESSION_START_MARKER in asker.main_requests[0].parts[0].text  # its system prompt


def test_qwen_code_reads_a_commented_settings_file_we_installed_into_and_runs_our_hook(
    clis: dict[str, Path], tmp_path: Path
) -> None:
    # comments and a byte-order mark, which Qwen Code reads (strip-json-comments, then JSON.parse)
    agent = "qwen-code"
    env = Env(tmp_path)
    home = Path(env.vars["HOME"])
    project = git_project(tmp_path / "project")
    prepare_home(agent, home)
    settings = settings_file(agent, home)
    plain = settings.read_text()
    commented = "\ufeff// by hand\n" + plain.replace('"model":', '/* offline */ "model":', 1).replace("\n}", " // last\n}", 1)
    settings.write_text(commented)
    write_memories(agent_memory_folder(agent, home, project))
    install_hook(agent, env)
    assert "// by hand" in settings.read_text() and "/* offline */" in settings.read_text()
    try:
        with ScriptedAgentServer([Turn.say("done")]) as server:
            run = run_agent(agent, clis[agent], env, project, server, PROMPT, timeout=RUN_TIMEOUT_S)
    finally:
        stop_daemon(env)
    assert run.returncode == 0, (run.stdout, run.stderr)
    assert block_refs(server.main_requests[0]) == [[ref(FAST)]]  # it read the file, and our hook ran
    uninstall_hook(agent, env)
    assert settings.read_text() == commented
