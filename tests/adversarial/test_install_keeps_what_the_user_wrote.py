"""`recall-kit hook install|uninstall claude-code|qwen-code` edits only what it can recognise as its own and
keeps the rest of the user's settings file, its symlink, its numbers and its original, as they were:
for each agent, with its own settings file."""

from __future__ import annotations

import difflib
import json
import os
import re
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import RECALL_KIT
from integration_support import Env, env, memories  # noqa: F401  (fixtures)

from recall_kit_cli.integrations.agents import AGENTS, Agent

EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse", "Stop", "SessionEnd")
NOTIFIER = "/opt/notifier hook claude-code --sound"
# What a user wrote by hand: four-space indent, a number no float holds, escapes, their own hooks.
USERS_FILE = """{
    "model": "opus",
    "cleanupPeriodDays": 1e400,
    "ratio": 1.50,
    "big": 12345678901234567890,
    "greeting": "caf\\u00e9 \\ud83d\\ude00",
    "permissions": {"allow": ["Bash(npm run lint)"], "deny": []},
    "hooks": {
        "Stop": [
            {"hooks": [{"type": "command", "command": "/opt/notifier hook claude-code --sound"}]}
        ],
        "PostToolUse": [
            {"matcher": "Write", "hooks": [{"type": "command", "command": "prettier -w"}]}
        ]
    }
}
"""
PLAIN_FILE = USERS_FILE.replace("1e400", "30")  # for the tests of other things than numbers


@pytest.fixture(params=sorted(AGENTS))
def agent(request: pytest.FixtureRequest) -> Agent:
    return AGENTS[request.param]


def _settings(env: Env, agent: Agent) -> Path:
    return Path(env.vars["HOME"]) / agent.config_dir / "settings.json"


def _write_settings(env: Env, agent: Agent, text: str = USERS_FILE) -> Path:
    path = _settings(env, agent)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def _strict_json(text: str) -> Any:
    """The document as a strict JSON parser (like Claude Code's) reads it: NaN and Infinity are errors."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _commands(settings: dict[str, Any], event: str) -> list[str]:
    return [h["command"] for g in settings["hooks"].get(event, []) for h in g["hooks"]]


def _ours(settings: dict[str, Any], event: str) -> list[str]:
    return [c for c in _commands(settings, event) if c.split()[0].endswith("/recall-kit")]


def _one_line_error(result: Any, *words: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_a_symlinked_settings_file_stays_a_link_and_its_target_is_updated(
    env: Env, agent: Agent, memories: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles" / agent.name
    dotfiles.mkdir(parents=True)
    (dotfiles / "settings.json").write_text(USERS_FILE)
    link = _settings(env, agent)
    link.parent.mkdir(parents=True)
    link.symlink_to(dotfiles / "settings.json")

    result = env.run("hook", "install", agent.name, "--root", str(memories))

    assert result.returncode == 0, result.stderr
    assert link.is_symlink() and os.readlink(link) == str(dotfiles / "settings.json")
    settings = _strict_json((dotfiles / "settings.json").read_text())
    assert all(len(_ours(settings, event)) == 1 for event in EVENTS)
    assert sorted(p.name for p in dotfiles.iterdir()) == ["settings.json"]  # no temp file or backup left there


def test_a_users_own_hook_that_mentions_hook_claude_code_is_never_taken_for_ours(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent, PLAIN_FILE)
    for _ in range(2):  # installing again must not take it either
        result = env.run("hook", "install", agent.name, "--root", str(memories))
        assert result.returncode == 0, result.stderr
    settings = _strict_json(path.read_text())
    assert _commands(settings, "Stop")[0] == NOTIFIER and len(_ours(settings, "Stop")) == 1
    assert "prettier -w" in _commands(settings, "PostToolUse")

    env.run("hook", "uninstall", agent.name)
    assert NOTIFIER in _commands(_strict_json(path.read_text()), "Stop")


def test_numbers_and_every_byte_the_user_wrote_survive_an_install(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent)

    result = env.run("hook", "install", agent.name, "--root", str(memories))

    assert result.returncode == 0, result.stderr
    text = path.read_text()
    settings = _strict_json(text)  # 1e400 is not written back as Infinity
    assert '"cleanupPeriodDays": 1e400' in text and '"ratio": 1.50' in text and "12345678901234567890" in text
    assert all(len(_ours(settings, event)) == 1 for event in EVENTS)
    # the edit only inserts: every character of the user's file is still there, in order
    matcher = difflib.SequenceMatcher(None, USERS_FILE, text, autojunk=False)
    assert {op for op, *_ in matcher.get_opcodes()} <= {"equal", "insert"}, text


def test_a_read_only_settings_file_is_refused_in_one_line_and_left_alone(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent)
    path.chmod(0o444)

    result = env.run("hook", "install", agent.name, "--root", str(memories))

    _one_line_error(result, str(path), "read-only")
    assert path.read_text() == USERS_FILE and stat.S_IMODE(path.stat().st_mode) == 0o444
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_a_hard_linked_settings_file_is_refused_in_one_line_and_both_links_stay_one_file(
    env: Env, agent: Agent, memories: Path, tmp_path: Path
) -> None:
    path = _write_settings(env, agent)
    dotfiles = tmp_path / "dotfiles-settings.json"
    os.link(path, dotfiles)  # the rename of an atomic write would leave the dotfiles copy behind, silently

    result = env.run("hook", "install", agent.name, "--root", str(memories))

    _one_line_error(result, str(path), "hard links", "nothing was changed")
    assert path.read_text() == USERS_FILE and os.path.samefile(path, dotfiles)
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.json"]


def test_a_folder_where_the_backup_goes_is_named_in_the_one_line_error(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent)
    in_the_way = path.with_name("settings.json.recall-kit-backup")
    in_the_way.mkdir()

    result = env.run("hook", "install", agent.name, "--root", str(memories))

    _one_line_error(result, f"cannot write {in_the_way}", f"{path} was not changed")
    assert path.read_text() == USERS_FILE


def test_the_original_file_is_kept_whatever_is_installed_after_it(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent)
    for root in (memories, memories / "projects", memories / "user"):
        result = env.run("hook", "install", agent.name, "--root", str(root))
        assert result.returncode == 0, result.stderr

    original = path.with_name("settings.json.recall-kit-original")
    assert original.read_text() == USERS_FILE
    assert stat.S_IMODE(original.stat().st_mode) & 0o077 == 0  # settings can hold keys: a copy is private
    last = _strict_json(path.with_name("settings.json.recall-kit-backup").read_text())
    assert _ours(last, "Stop")[0].endswith(f"--root {memories / 'projects'}")  # the state before the last install


@pytest.mark.parametrize("planted", ["0644-file", "symlink", "hard-link"])
def test_a_planted_backup_never_leaves_a_copy_others_can_read(
    env: Env, agent: Agent, memories: Path, tmp_path: Path, planted: str
) -> None:
    path = _write_settings(env, agent, PLAIN_FILE.replace('"model": "opus"', '"env": {"API_KEY": "sk-secret"}'))
    backup = path.with_name("settings.json.recall-kit-backup")
    elsewhere = tmp_path / "world-readable.txt"
    elsewhere.write_text("someone else's file\n")
    elsewhere.chmod(0o644)
    if planted == "0644-file":
        backup.write_text("stale\n")
        backup.chmod(0o644)  # as a checkout or a copy with a umask of 022 leaves it
    elif planted == "symlink":
        backup.symlink_to(elsewhere)
    else:
        os.link(elsewhere, backup)

    result = env.run("hook", "install", agent.name, "--root", str(memories))

    assert result.returncode == 0, result.stderr
    info = os.lstat(backup)
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.getuid()
    assert info.st_nlink == 1 and "sk-secret" in backup.read_text()
    assert elsewhere.read_text() == "someone else's file\n" and stat.S_IMODE(elsewhere.stat().st_mode) == 0o644
    original = path.with_name("settings.json.recall-kit-original")
    assert stat.S_IMODE(os.lstat(original).st_mode) == 0o600


def test_a_root_that_does_not_exist_is_refused_unless_allowed_loudly(env: Env, agent: Agent, memories: Path) -> None:
    typo = Path(env.vars["HOME"]) / "memroies"

    refused = env.run("hook", "install", agent.name, "--root", str(typo))

    _one_line_error(refused, "does not exist", str(typo), "--allow-missing")
    assert not _settings(env, agent).exists()
    not_a_folder = env.run("hook", "install", agent.name, "--root", str(memories / "user" / "profile.md"))
    _one_line_error(not_a_folder, "not a folder")

    allowed = env.run("hook", "install", agent.name, "--root", str(typo), "--allow-missing")

    assert allowed.returncode == 0, allowed.stderr
    assert b"warning" in allowed.stderr and str(typo).encode() in allowed.stderr
    assert b"the hook recalls nothing (the daemon refuses it)" in allowed.stderr  # from any root, not just it
    assert _ours(_strict_json(_settings(env, agent).read_text()), "Stop")[0].endswith(f"--root {typo}")


def test_a_root_the_daemon_would_refuse_is_refused_at_install(env: Env, agent: Agent) -> None:
    home = env.vars["HOME"]
    for root, why in [("/", "is the file system root"), (home, "is the home folder"), (str(Path(home).parent), "holds the home folder")]:
        refused = env.run("hook", "install", agent.name, "--root", root)
        _one_line_error(refused, f"root {root} {why}, not a folder of memories; nothing was changed")
    assert not _settings(env, agent).exists()


def test_a_settings_file_of_a_gigabyte_is_refused_unread(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent, PLAIN_FILE)
    os.truncate(path, 1 << 30)  # sparse: a clone's file read whole took 4 GB of memory
    for command in (("install", agent.name, "--root", str(memories)), ("uninstall", agent.name)):
        refused = env.run("hook", *command)
        _one_line_error(refused, f"{path} is over 1,048,576 bytes", "nothing was changed")
    assert path.stat().st_size == 1 << 30
    status = env.run("hook", "status")
    assert status.returncode == 0 and b"over 1,048,576 bytes" in status.stdout + status.stderr


def test_a_dangling_link_makes_no_folder_for_its_target(env: Env, agent: Agent, memories: Path, tmp_path: Path) -> None:
    nowhere = tmp_path / "no-such-folder" / "settings.json"
    link = _settings(env, agent)
    link.parent.mkdir(parents=True)
    link.symlink_to(nowhere)
    refused = env.run("hook", "install", agent.name, "--root", str(memories))
    _one_line_error(refused, f"{link} leads to {nowhere}, whose folder does not exist; nothing was changed")
    assert not nowhere.parent.exists() and link.is_symlink()
    link.unlink()
    link.parent.rmdir()
    link.parent.symlink_to(nowhere.parent, target_is_directory=True)  # the agent's folder itself, to nowhere
    refused = env.run("hook", "install", agent.name, "--root", str(memories))
    _one_line_error(refused, f"{link} leads to {nowhere}, whose folder does not exist; nothing was changed")
    assert not nowhere.parent.exists()
    link.parent.unlink()
    link.parent.mkdir()
    link.symlink_to(nowhere)
    nowhere.parent.mkdir()  # a link to a file yet to be written, in a folder that is there: written
    assert env.run("hook", "install", agent.name, "--root", str(memories)).returncode == 0 and nowhere.is_file()


def test_a_first_install_in_a_home_reached_through_a_link_makes_the_agents_folder(
    env: Env, agent: Agent, memories: Path, tmp_path: Path
) -> None:
    real = tmp_path / "real-home"
    real.mkdir()
    linked = tmp_path / "home-link"
    linked.symlink_to(real, target_is_directory=True)
    result = subprocess.run([RECALL_KIT, "hook", "install", agent.name, "--root", str(memories)],
                            env={**env.vars, "HOME": str(linked)}, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert (real / agent.config_dir / "settings.json").is_file()

def test_uninstall_removes_exactly_our_entries_and_gives_the_file_back_as_it_was(env: Env, agent: Agent, memories: Path) -> None:
    path = _write_settings(env, agent)
    assert env.run("hook", "install", agent.name, "--root", str(memories)).returncode == 0

    result = env.run("hook", "uninstall", agent.name)

    assert result.returncode == 0, result.stderr
    assert path.read_text() == USERS_FILE
    again = env.run("hook", "uninstall", agent.name)
    assert again.returncode == 0 and b"nothing to remove" in again.stdout
    assert path.read_text() == USERS_FILE


def test_an_install_without_roots_and_its_uninstall_leave_the_file_as_it_was(env: Env, agent: Agent) -> None:
    path = _write_settings(env, agent)

    installed = env.run("hook", "install", agent.name)

    assert installed.returncode == 0, installed.stderr
    settings = _strict_json(path.read_text())
    assert all(_ours(settings, event) == [_ours(settings, "Stop")[0]] for event in EVENTS)
    assert _ours(settings, "Stop")[0].endswith(f"/recall-kit hook {agent.name}")  # no --root: the agent's folders
    assert all(
        h["timeout"] == agent.hook_timeout for g in settings["hooks"]["Stop"] for h in g["hooks"] if "recall-kit" in h["command"]
    )
    assert env.run("hook", "uninstall", agent.name).returncode == 0
    assert path.read_text() == USERS_FILE


def test_one_agents_uninstall_leaves_the_other_agents_entries_alone(env: Env, memories: Path) -> None:
    # a hand-written claude-code hook in Qwen Code's settings (it runs there too) is not qwen-code's to remove
    qwen = _write_settings(env, AGENTS["qwen-code"], PLAIN_FILE)
    by_hand = json.loads(PLAIN_FILE)
    claude_command = f"/opt/venv/bin/recall-kit hook claude-code --root {memories}"
    by_hand["hooks"]["Stop"].append({"hooks": [{"type": "command", "command": claude_command}]})
    text = json.dumps(by_hand, indent=4) + "\n"
    qwen.write_text(text)

    assert env.run("hook", "install", "qwen-code").returncode == 0
    assert claude_command in _commands(_strict_json(qwen.read_text()), "Stop")
    assert env.run("hook", "uninstall", "qwen-code").returncode == 0

    assert qwen.read_text() == text


# A settings file as a Qwen Code user may write it: Qwen Code reads it with strip-json-comments, then
# JSON.parse (checked in its 0.24.4 bundle), so // and /* */ comments and a byte-order mark are valid.
COMMENTED_FILE = """\ufeff{
    // my settings, by hand
    "model": {"name": "qwen3-coder"}, /* the one that works offline */
    "ratio": 1.50, // kept as written
    "url": "http://example.org/* not a comment */",
    "hooks": {
        /* the notifier first */
        "Stop": [
            {"hooks": [{"type": "command", "command": "/opt/notifier hook claude-code --sound"}]} // sound
        ]
        // the end of my hooks
    }
}
/* a comment left open at the end runs to the end, as strip-json-comments reads it"""


def _jsonc(text: str) -> Any:
    """The document as Qwen Code reads it: comments and a byte-order mark stripped, then strict JSON.
    A test-side reader of its own (a tokenizer of strings and comments), not recall-kit's parser."""
    out, i, in_string = [], 0, False
    text = text.removeprefix("\ufeff")
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(ch)
            if ch == "\\":
                out.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
            out.append(ch)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            continue
        else:
            out.append(ch)
        i += 1
    return _strict_json("".join(out))


@pytest.mark.parametrize("line_ending", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_a_commented_qwen_code_settings_file_is_installed_into_and_given_back_byte_for_byte(
    env: Env, memories: Path, line_ending: str
) -> None:
    agent = AGENTS["qwen-code"]
    original = COMMENTED_FILE.replace("\n", line_ending)
    path = _write_settings(env, agent, original)
    assert _jsonc(original)["hooks"]["Stop"][0]["hooks"][0]["command"] == NOTIFIER

    installed = env.run("hook", "install", agent.name, "--root", str(memories))

    assert installed.returncode == 0, installed.stderr
    text = path.read_bytes().decode()
    matcher = difflib.SequenceMatcher(None, original, text, autojunk=False)
    assert {op for op, *_ in matcher.get_opcodes()} <= {"equal", "insert"}, text  # every byte kept, in order
    settings = _jsonc(text)
    assert all(len(_ours(settings, event)) == 1 for event in EVENTS) and NOTIFIER in _commands(settings, "Stop")
    assert settings["model"] == {"name": "qwen3-coder"} and settings["url"] == "http://example.org/* not a comment */"
    again = env.run("hook", "install", agent.name, "--root", str(memories))  # nothing to change: nothing changes
    assert again.returncode == 0 and path.read_bytes().decode() == text
    assert env.run("hook", "uninstall", agent.name).returncode == 0
    assert path.read_bytes() == original.encode()


def test_comments_beside_our_entries_stay_when_they_are_removed(env: Env, memories: Path) -> None:
    agent = AGENTS["qwen-code"]
    path = _write_settings(env, agent, '{\n  "model": {"name": "m"}\n}\n')
    assert env.run("hook", "install", agent.name, "--root", str(memories)).returncode == 0
    # the user annotates the file around what we wrote, and adds a hook of their own after ours
    text = path.read_text().replace('    "Stop": [', '    // before Stop\n    "Stop": [  // ours follow\n', 1)
    text = text.replace('"hooks": {', '"hooks": { /* mine and recall-kit\'s */', 1)
    text = text.replace('\n  }\n}', ',\n    // my own\n    "Notification": [{"hooks": [{"type": "command", "command": "beep"}]}]\n  }\n}')
    path.write_text(text)
    assert _jsonc(text)["hooks"]["Notification"][0]["hooks"][0]["command"] == "beep"

    assert env.run("hook", "uninstall", agent.name).returncode == 0

    left = path.read_text()
    settings = _jsonc(left)
    # a list only our entries filled goes with them, unless the user wrote a comment in it
    assert settings["hooks"] == {"Stop": [], "Notification": [{"hooks": [{"type": "command", "command": "beep"}]}]}
    assert "UserPromptSubmit" not in left
    for comment in ("// before Stop", "// ours follow", "/* mine and recall-kit's */", "// my own"):
        assert comment in left, left
    assert env.run("hook", "install", agent.name, "--root", str(memories)).returncode == 0  # and in again
    assert all(len(_ours(_jsonc(path.read_text()), event)) == 1 for event in EVENTS)


def test_claude_codes_settings_with_a_comment_are_still_refused_as_it_reads_none(env: Env, memories: Path) -> None:
    agent = AGENTS["claude-code"]
    path = _write_settings(env, agent, '{\n  // a comment\n  "model": "opus"\n}\n')
    result = env.run("hook", "install", agent.name, "--root", str(memories))
    _one_line_error(result, "is not valid JSON", "line 2 column 3")
    assert path.read_text() == '{\n  // a comment\n  "model": "opus"\n}\n'


def test_comments_anywhere_between_tokens_survive_an_install_and_its_uninstall() -> None:
    import random

    from recall_kit_cli.integrations.agent_settings import with_our_hooks, without_our_hooks

    agent, command = AGENTS["qwen-code"], "/opt/rk/bin/recall-kit hook qwen-code"
    bases = [PLAIN_FILE, '{"model": {"name": "m"}}', '{\n  "a": [1, 2]\n}\n',
             json.dumps({"x": 1, "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "beep"}]}]}}, indent=2)]
    comments = [" /* c */ ", "// line\n", "\n// own line\n", "/* multi\nline */", " // tail\n"]
    rng = random.Random(7)
    tried = 0
    while tried < 300:
        text = rng.choice(bases)
        for _ in range(rng.randint(1, 4)):  # a comment where whitespace may go: after , : [ { or before ] }
            places = [m.end() for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[,:\[{]', text) if m.group() in ",:[{"]
            places += [m.start() for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\]}]', text) if m.group() in "]}"]
            at = rng.choice(places)
            text = text[:at] + rng.choice(comments) + text[at:]
        try:
            _jsonc(text)
        except ValueError:
            continue  # a line comment that swallowed a token: no file Qwen Code reads either
        tried += 1
        installed = with_our_hooks(agent, text, command)
        assert all(len(_ours(_jsonc(installed), event)) == 1 for event in EVENTS), installed
        ops = {op for op, *_ in difflib.SequenceMatcher(None, text, installed, autojunk=False).get_opcodes()}
        assert ops <= {"equal", "insert"}, (text, installed)
        assert with_our_hooks(agent, installed, command) == installed
        assert without_our_hooks(agent, installed) == text, (text, installed)
