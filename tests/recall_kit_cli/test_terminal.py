"""Hostile text never reaches the terminal raw, in any field, on a terminal or through a pipe; bytes
that are not UTF-8 never give a traceback; JSON stays exact UTF-8."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from cli_support import EXAMPLES, RECALL_KIT, RunCli, clean_environ, run_in_pty

from recall_kit.testing import Reply, ScriptedChatServer

CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"
LINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
FORGED = "\nrejected: forged"
RAW = ("\x1b", "\x07", "\x9b")  # ESC, BEL, 8-bit CSI: none may reach the output
EVIL_FILE = f"deploy{CLEAR}{TITLE}\r{FORGED}.md"


def _memory(name: str, description: str, body: str, keywords: str = "[]") -> str:
    quoted = json.dumps  # a JSON string is a valid YAML double-quoted scalar, escapes included
    return (f"---\nname: {quoted(name)}\ndescription: {quoted(description)}\ntype: project\n"
            f"keywords: {keywords}\n---\n{body}\n")


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """Every field of two memories carries terminal escapes and forged lines; a third file is skipped."""
    root = tmp_path / "hostile"
    (root / "project").mkdir(parents=True)
    payload = CLEAR + TITLE + LINK + "\rCR" + FORGED
    (root / "project" / "deploy.md").write_text(_memory(
        f"deploy ledgerline {payload}", f"how ledgerline deploys to production {payload}",
        f"body {CLEAR}{TITLE}{LINK}\rCR \u009b31m", json.dumps(["deploy" + FORGED])))
    (root / "project" / EVIL_FILE).write_text(_memory(
        "deploy ledgerline staging", "ledgerline deploys staging to production", "staging body"))
    (root / "project" / f"bad{CLEAR}{FORGED}.md").write_text("no frontmatter\n")
    return root


def assert_safe(output: str) -> None:
    for raw in RAW:
        assert raw not in output, repr(output)
    assert "\r" not in output.replace("\r\n", "\n"), repr(output)
    for line in output.splitlines():
        assert not line.lstrip().startswith(("rejected: forged", "forged")), repr(output)


def test_every_human_field_is_sanitised_through_a_pipe(run_cli: RunCli, hostile: Path) -> None:
    root = str(hostile)
    outputs = {
        "list": run_cli("list", "--root", root),
        "query": run_cli("query", "deploy ledgerline production", "--root", root, "--fast-only", "-v"),
        "block": run_cli("query", "deploy ledgerline production", "--root", root, "--fast-only",
                         "--format", "block"),
        "show": run_cli("show", "hostile/project/deploy.md", "--root", root),
        "raw": run_cli("show", "hostile/project/deploy.md", "--root", root, "--raw"),
        "validate": run_cli("validate", "--root", root),
        "stats": run_cli("stats", "--root", root),
    }
    for command, result in outputs.items():
        assert result.returncode in (0, 1), (command, result.stderr)
        assert_safe(result.stdout + result.stderr)
    assert "\\x1b[2J" in outputs["list"].stdout and "\\n" in outputs["list"].stdout  # shown, escaped
    assert "\\x1b]8;;http://evil.example/" in outputs["raw"].stdout
    assert "\\x9b31m" in outputs["show"].stdout
    assert outputs["validate"].returncode == 1 and "skipped" in outputs["validate"].stdout


def test_show_makes_an_escape_in_each_field_visible_as_list_does(run_cli: RunCli, tmp_path: Path) -> None:
    root = tmp_path / "evil"
    (root / "user").mkdir(parents=True)
    (root / "user" / "evil.md").write_text(_memory(f"Evil {CLEAR} name", f"a {TITLE} description", f"body {CLEAR} red"))
    listed = run_cli("list", "--root", str(root))
    shown = run_cli("show", "evil/user/evil.md", "--root", str(root))
    assert listed.returncode == 0 and shown.returncode == 0, shown.stderr
    assert "Evil \\x1b[2J name" in listed.stdout
    lines = shown.stdout.splitlines()
    assert "Title: Evil \\x1b[2J name" in lines  # not "Evil [2J name": the ESC is shown, not dropped
    assert "Description: a \\x1b]0;pwned\\x07 description" in lines
    assert "body \\x1b[2J red" in lines
    assert_safe(shown.stdout)
    block = json.loads(run_cli("show", "evil/user/evil.md", "--root", str(root), "--json").stdout)["text"]
    # --json: the agent's block exactly, whose body shows a control character escaped as the terminal does
    assert block.startswith("<recalled-memories>") and "body \\x1b[2J red" in block and "\x1b" not in block


def test_every_human_field_is_sanitised_on_a_terminal(hostile: Path) -> None:
    for args in (("list",), ("query", "deploy ledgerline production", "--fast-only", "-v"), ("validate",),
                 ("show", "hostile/project/deploy.md")):
        result = run_in_pty(*args, "--root", str(hostile), cwd=hostile)
        assert result.returncode in (0, 1), result.output
        assert_safe(result.output)
        status = result.output.split("<recalled-memories>")[0]  # a memory's own lines are shown whole
        assert all(len(line) <= 80 for line in status.splitlines())


def test_the_model_refs_and_the_server_error_text_are_sanitised(run_cli: RunCli, hostile: Path) -> None:
    hostile_ref = f"hostile/project/x{CLEAR}{TITLE}{FORGED}.md"
    args = ("query", "deploy ledgerline production", "--root", str(hostile), "--model", "scripted")
    with ScriptedChatServer(default=Reply.select(hostile_ref)) as server:
        refs = run_cli(*args, "--base-url", server.base_url)
    with ScriptedChatServer(default=Reply.raw_error(400, f"bad {CLEAR}{TITLE}{LINK}{FORGED}")) as server:
        error = run_cli(*args, "--base-url", server.base_url)
    assert refs.returncode == 0 and error.returncode == 0, refs.stderr + error.stderr
    assert "  rejected: hostile/project/x\\x1b[2J" in refs.stdout
    assert "model failed (HTTP 400: bad " in error.stdout
    assert_safe(refs.stdout + refs.stderr)
    assert_safe(error.stdout + error.stderr)


def test_watch_output_is_sanitised_even_through_a_pipe(hostile: Path) -> None:
    proc = subprocess.Popen([str(RECALL_KIT), "watch", "--root", str(hostile), "--debounce-ms", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_environ(), cwd=hostile)
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline().decode()
        skipped = proc.stdout.readline().decode()
        (hostile / "project" / f"new{CLEAR}{FORGED}.md").write_text(_memory("n", "d", "b"))
        change = proc.stdout.readline().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        rest, errors = proc.communicate(timeout=30)
    assert proc.returncode == 0, errors
    assert first.startswith("v1: 2 memories, 1 skipped in hostile (")
    assert skipped.startswith("  skipped hostile/project/bad\\x1b[2J\\n")
    assert change.startswith("v2: 3 memories, 1 skipped; changed hostile/project/new\\x1b[2J\\nrejected: forged.md")
    assert_safe(first + skipped + change + rest.decode() + errors.decode())


def test_watch_on_a_terminal_is_sanitised_and_ctrl_c_ends_it_with_0(hostile: Path) -> None:
    result = run_in_pty("watch", "--root", str(hostile), cwd=hostile, interrupt_after="skipped hostile")
    assert result.returncode == 0, result.output
    assert result.output.startswith("v1: 2 memories, 1 skipped")
    assert_safe(result.output)


def test_lines_fit_an_80_column_terminal_but_a_pipe_gets_them_whole(run_cli: RunCli, tmp_path: Path) -> None:
    root = tmp_path / "wide"
    (root / "user").mkdir(parents=True)
    (root / "user" / "long.md").write_text(_memory("long", "a description " * 20, "b"))
    (root / "user" / "cjk.md").write_text(_memory("中文", "部署" * 60, "b"))
    piped = run_cli("list", "--root", str(root))
    assert max(len(line) for line in piped.stdout.splitlines()) > 200
    on_tty = run_in_pty("list", "--root", str(root), cwd=root)
    lines = on_tty.output.splitlines()
    assert on_tty.returncode == 0 and len(lines) == 3
    assert all(len(line) <= 80 for line in lines) and lines[1].endswith("…") and lines[2].endswith("…")
    cjk = next(line for line in lines if "中文" in line)
    cells = sum(2 if "\u4e00" <= ch <= "\u9fff" else 1 for ch in cjk)
    assert 78 <= cells <= 80


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_undecodable_file_names_and_arguments_never_give_a_traceback(tmp_path: Path, locale: str) -> None:
    root = tmp_path / "bytes"
    os.makedirs(root / "user")
    with open(os.fsencode(root / "user") + b"/caf\xe9 deploy.md", "w") as f:
        f.write(_memory("caf\u00e9 deploy ledgerline", "deploy ledgerline to production", "b"))
    env = clean_environ(LC_ALL=locale, LANG=locale, PYTHONIOENCODING="")
    del env["PYTHONIOENCODING"]
    query = b"caf\xe9 deploy ledgerline production"

    def run(*args: bytes | str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([os.fsencode(str(RECALL_KIT)), *args], capture_output=True, env=env, cwd=root,
                              timeout=60)

    for args in (("list",), ("query", query, "--fast-only"), ("validate",), ("stats",)):
        text = run(*args, "--root", str(root))
        assert text.returncode == 0 and b"Traceback" not in text.stderr, text.stderr
        assert args[0] == "validate" or b"caf\\xe9" in text.stdout
    for args in (("list",), ("query", query, "--fast-only")):
        raw = run(*args, "--root", str(root), "--json")
        assert raw.returncode == 0, raw.stderr
        data = json.loads(raw.stdout.decode("utf-8"))  # strict: valid UTF-8
        assert "\\udce9" in raw.stdout.decode()
        found = data["docs"][0] if args[0] == "list" else data
        if args[0] == "list":
            assert os.fsencode(found["path"]) == b"user/caf\xe9 deploy.md"
        else:
            assert os.fsencode(data["query"]) == query and data["docs"]


def test_json_never_echoes_credentials_in_the_base_url(run_cli: RunCli) -> None:
    result = run_cli("query", "deploy ledgerline", "--root", str(EXAMPLES), "--json", "--model", "m",
                     "--base-url", "http://alice:s3cr3t-pass@127.0.0.1:9/v1", "--model-timeout", "2")
    assert result.returncode == 0, result.stderr
    assert "s3cr3t-pass" not in result.stdout + result.stderr
    assert json.loads(result.stdout)["refinement"]["base_url"].startswith("http://")


def test_ctrl_c_while_waiting_for_the_model_exits_130_quietly(tmp_path: Path) -> None:
    with ScriptedChatServer(default=Reply.hang()) as server:
        result = run_in_pty("query", "deploy ledgerline production", "--root", str(EXAMPLES),
                            "--base-url", server.base_url, "--model", "m", cwd=tmp_path,
                            interrupt_after="delivered at once")
    assert result.returncode == 130, result.output
    assert "Aborted" not in result.output and "Traceback" not in result.output


def test_ctrl_c_reaches_the_command_when_the_test_runner_itself_ignores_it(tmp_path: Path) -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the suite started as a background job
    try:
        with ScriptedChatServer(default=Reply.hang()) as server:
            result = run_in_pty("query", "deploy ledgerline production", "--root", str(EXAMPLES),
                                "--base-url", server.base_url, "--model", "m", "--model-timeout", "20",
                                cwd=tmp_path, interrupt_after="delivered at once")
    finally:
        signal.signal(signal.SIGINT, previous)
    assert result.returncode == 130, result.output  # not 0 after waiting out the model's 20 s


def test_library_warnings_reach_stderr_as_one_cleaned_line(run_cli: RunCli, tmp_path: Path) -> None:
    blocked = tmp_path / f"cache{CLEAR}"
    blocked.write_text("a file where the cache folder should be")
    result = run_cli("query", "deploy ledgerline production", "--root", str(EXAMPLES), "--fast-only",
                     "--format", "block", env=clean_environ(RECALL_KIT_CACHE_DIR=str(blocked)))
    assert result.returncode == 0 and result.stdout.startswith("<recalled-memories>")
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("recall-kit: index cache ") for line in lines)
    assert all("\\x1b[2J" in line for line in lines) and "\x1b" not in result.stderr


def test_arguments_that_are_not_utf8_are_refused_by_add_in_one_line(tmp_path: Path) -> None:
    result = subprocess.run([os.fsencode(str(RECALL_KIT)), b"add", b"--root", os.fsencode(tmp_path), b"--type", b"user",
                             b"--name", b"caf\xe9", b"--description", b"d", b"--body", b"b"],
                            capture_output=True, env=clean_environ(), timeout=60)
    assert result.returncode == 2 and result.stderr == b"recall-kit: not saved: --name is not valid UTF-8\n"
    assert list(tmp_path.iterdir()) == []
