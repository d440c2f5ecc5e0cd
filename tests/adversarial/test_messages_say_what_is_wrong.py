"""Each refusal names what is actually wrong, in one line: a file that is not a folder, a symlink in
the way, bytes that are not UTF-8 (and where they are), never a codec's or a race's words."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

import pytest
from cli_support import EXAMPLES, RECALL_KIT, assert_one_line_error, clean_environ, run_recall_kit
from integration_support import Daemon, Env, daemon, env  # noqa: F401  (fixtures)

MEMORY = "---\nname: {name}\ndescription: a note\ntype: user\n---\nbody\n"
NOT_UTF8 = "caf\udce9"  # the byte 0xE9 alone, as Python keeps it in an argument or a file name


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    folder = tmp_path / "cwd"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("command", [
    ("add", "--type", "user", "--name", "n", "--description", "d", "--body", "b"),
    ("list",), ("query", "anything"), ("validate",), ("watch",),
], ids=lambda c: c[0])
def test_a_file_given_as_root_is_said_to_be_no_folder(cwd: Path, command: tuple[str, ...]) -> None:
    (cwd / "notes.md").write_text("not a folder")
    result = run_recall_kit(*command, "--root", str(cwd / "notes.md"), cwd=cwd)
    assert_one_line_error(result, "not a folder")
    assert "does not exist" not in result.stderr


@pytest.mark.parametrize("force", [False, True], ids=["new", "force"])
def test_adding_over_a_dangling_symlink_says_a_symlink_is_in_the_way(cwd: Path, tmp_path: Path, force: bool) -> None:
    root = tmp_path / "memories"
    (root / "user").mkdir(parents=True)
    target = tmp_path / "elsewhere" / "planted.md"
    (root / "user" / "planted.md").symlink_to(target)
    args = ("add", "--root", str(root), "--type", "user", "--name", "Planted", "--description", "d", "--body", "b")

    result = run_recall_kit(*args, *(["--force"] if force else []), cwd=cwd)

    assert_one_line_error(result, "symlink", "nothing is written through one")
    assert "appeared meanwhile" not in result.stderr
    assert not target.exists() and not target.parent.exists()  # never followed


def test_a_sidecar_line_that_is_not_utf8_is_named_with_its_line_and_byte(cwd: Path, tmp_path: Path) -> None:
    root = tmp_path / "memories"
    (root / "user").mkdir(parents=True)
    (root / "user" / "note.md").write_text(MEMORY.format(name="note"))
    (root / ".recall-kit").mkdir()
    # json.loads(bytes) takes b'{\x00' for UTF-16 and says "'utf-16-le' codec can't decode"
    (root / ".recall-kit" / "enrichment.jsonl").write_bytes(b"\n{\x00\"\x00\xe9\n")

    result = run_recall_kit("validate", "--root", str(root), cwd=cwd)

    assert result.returncode == 1
    assert "enrichment.jsonl:2: invalid UTF-8 at byte 4 of the line" in result.stdout
    assert "codec" not in result.stdout + result.stderr


def test_a_config_file_that_is_not_utf8_is_one_line_naming_the_file(cwd: Path) -> None:
    (cwd / "recall-kit.toml").write_bytes(b'roots = ["caf\xe9"]\n')
    for command in (("list",), ("query", "anything", "--root", str(EXAMPLES))):
        result = run_recall_kit(*command, cwd=cwd)
        assert_one_line_error(result, "recall-kit.toml", "not UTF-8", "offset 13")
        assert "Traceback" not in result.stderr and "codec" not in result.stderr
    shown = run_recall_kit("config", cwd=cwd)  # config shows every setting and flags the file
    assert shown.returncode == 0 and "codec" not in shown.stdout + shown.stderr
    assert "invalid" in shown.stdout and "recall-kit.toml: not UTF-8 (invalid byte at offset 13)" in shown.stdout


@pytest.mark.parametrize("text", [
    "roots = " + "[" * 600 + "]" * 600 + "\n",  # tomllib recurses once a level: RecursionError
    "x = " + "{a = " * 400 + "1" + "}" * 400 + "\n",
], ids=["array-600-deep", "table-400-deep"])
def test_a_project_file_nested_too_deep_is_one_line_in_every_command(cwd: Path, text: str) -> None:
    (cwd / "recall-kit.toml").write_text(text)
    for command in (("list",), ("query", "anything", "--root", str(EXAMPLES)), ("validate",)):
        result = run_recall_kit(*command, cwd=cwd)
        assert_one_line_error(result, "recall-kit.toml: not valid TOML (nested too deeply)")
    shown = run_recall_kit("config", cwd=cwd)
    assert shown.returncode == 0 and "Traceback" not in shown.stderr and "nested too deeply" in shown.stdout


def test_a_root_holding_nul_is_one_line_from_a_file_and_from_a_daemon_client(cwd: Path, env: Env, daemon: Daemon) -> None:  # noqa: F811
    (cwd / "recall-kit.toml").write_text('roots = ["notes\\u0000x"]\n')
    for command in (("list",), ("query", "anything")):
        result = run_recall_kit(*command, cwd=cwd)
        assert_one_line_error(result, "holds a NUL character")
    answer = env.request({"op": "begin", "session": "s", "roots": ["/tmp/a\u0000b"], "query": "deploy"})[0]
    assert answer["ok"] is False and "holds a NUL character" in answer["error"]
    assert env.request({"op": "status"})[0]["ok"] is True  # the daemon goes on


def test_a_settings_file_that_is_not_utf8_is_refused_untouched(env: Env, tmp_path: Path) -> None:
    settings = Path(env.vars["HOME"]) / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{"model": "caf\xe9"}\n')

    result = env.run("hook", "install", "claude-code", "--root", str(EXAMPLES))

    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert b"not UTF-8" in result.stderr and b"offset 14" in result.stderr and b"codec" not in result.stderr
    assert settings.read_bytes() == b'{"model": "caf\xe9"}\n'


def test_bytes_that_are_not_utf8_in_arguments_names_and_files_say_so(cwd: Path, tmp_path: Path) -> None:
    root = tmp_path / NOT_UTF8  # a root whose own name is not UTF-8 works
    (root / "user").mkdir(parents=True)
    (root / "user" / "ok.md").write_text(MEMORY.format(name="ok"))
    (root / "user" / "bad.md").write_bytes(MEMORY.format(name="bad").encode().replace(b"body", b"b\xffdy"))

    listed = run_recall_kit("list", "--root", str(root), cwd=cwd)
    assert listed.returncode == 0 and "caf\\xe9/user/ok.md" in listed.stdout
    assert "caf\\xe9/user/bad.md: invalid UTF-8 at byte" in listed.stdout

    named = run_recall_kit("add", "--root", str(root), "--type", "user", "--name", NOT_UTF8,
                           "--description", "d", "--body", "b", cwd=cwd)
    assert_one_line_error(named, "--name is not valid UTF-8")
    missing = run_recall_kit("show", NOT_UTF8, "--root", str(root), cwd=cwd)
    assert_one_line_error(missing, "no memory 'caf\\xe9'")
    assert "udce9" not in missing.stderr


def test_a_body_on_stdin_that_is_not_utf8_is_refused(cwd: Path, tmp_path: Path) -> None:
    root = tmp_path / "memories"
    root.mkdir()
    result = subprocess.run(
        [str(RECALL_KIT), "add", "--root", str(root), "--type", "user", "--name", "n", "--description", "d"],
        input=b"caf\xe9\n", capture_output=True, env=clean_environ(), cwd=cwd, timeout=60,
    )
    assert result.returncode == 2 and result.stderr.decode().strip().endswith("the body is not valid UTF-8")
    assert os.listdir(root) == []


def test_a_queries_file_that_is_not_utf8_is_one_line_naming_its_line(cwd: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "dataset"
    (dataset / "memories" / "user").mkdir(parents=True)
    (dataset / "memories" / "user" / "note.md").write_text(MEMORY.format(name="note"))
    (dataset / "queries.jsonl").write_bytes(b'{"id": "q1", "query": "note", "relevant": []}\n{"query": "caf\xe9"}\n')

    result = run_recall_kit("bench", "delivery", str(dataset), "--fast-only", cwd=cwd)

    assert_one_line_error(result, "queries.jsonl:2: not UTF-8", "offset 14")
    assert "codec" not in result.stderr


def test_a_daemon_request_that_is_not_utf8_is_answered_so(env: Env, daemon: Daemon) -> None:  # noqa: F811
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(env.socket))
        # json.loads(bytes) takes b'{\x00' for UTF-16 and says "'utf-16-le' codec can't decode"
        sock.sendall(b'{\x00"\x00\xe9\n{"op": "status"}\n')
        reader = sock.makefile("rb")
        answers = [json.loads(reader.readline()) for _ in range(2)]
    assert answers[0] == {"ok": False, "error": "not UTF-8: invalid byte at offset 4 of the request"}
    assert answers[1]["ok"] is True  # the connection survives


def test_input_nested_too_deeply_is_one_line_from_the_hook_and_the_daemon(env: Env, daemon: Daemon) -> None:  # noqa: F811
    nested = "[" * 100_000 + "]" * 100_000
    result = env.run("hook", "claude-code", input=nested)
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert env.hook_log.read_text().splitlines()[-1].endswith("hook input is not JSON (nested too deeply)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(env.socket))
        sock.sendall(nested.encode() + b'\n{"op": "status"}\n')
        reader = sock.makefile("rb")
        answers = [json.loads(reader.readline()) for _ in range(2)]
    assert answers[0] == {"ok": False, "error": "not JSON: nested too deeply"}
    assert answers[1]["ok"] is True  # the connection survives


def test_a_symlink_planted_between_the_check_and_the_link_is_named_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memory_store._root as files_module
    from memory_store import MemoryPathError, MemoryRoot

    root = tmp_path / "memories"
    (root / "user").mkdir(parents=True)
    target = tmp_path / "elsewhere" / "planted.md"
    real_write = files_module.write_in_folder

    def plant_then_write(folder_fd: int, name: str, data: bytes, **kwargs: object) -> None:
        os.symlink(target, name, dir_fd=folder_fd)  # another process wins the race to the name
        real_write(folder_fd, name, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files_module, "write_in_folder", plant_then_write)
    with pytest.raises(MemoryPathError) as refused:
        MemoryRoot(root).save(name="Planted", description="d", type="user")

    assert str(refused.value) == (
        "refused memories/user/planted.md: it is a symlink (it appeared meanwhile), and nothing is written through one"
    )
    assert (root / "user" / "planted.md").is_symlink() and not target.exists()


def test_a_name_of_sixty_four_byte_characters_is_saved_by_add(cwd: Path, tmp_path: Path) -> None:
    root = tmp_path / "memories"
    root.mkdir()
    name = "\U0001d49c" * 60  # 240 bytes: the longest slug; the temp file beside it must not make it too long
    result = run_recall_kit("add", "--root", str(root), "--type", "user", "--name", name, "--description", "d",
                            "--body", "b", cwd=cwd)
    assert result.returncode == 0, result.stderr
    assert os.listdir(root / "user") == [f"{name}.md"]


@pytest.mark.parametrize("value", ["nan", "1e300", "-5", "inf"])
def test_a_debounce_window_that_cannot_work_is_one_line_from_watch_and_serve(cwd: Path, env: Env, value: str) -> None:  # noqa: F811
    # nan never applied an edit; 1e300 stopped the watcher with a traceback
    watched = run_recall_kit("watch", "--root", str(EXAMPLES), "--debounce-ms", value, cwd=cwd)
    assert_one_line_error(watched, f"--debounce-ms: debounce_ms must be from 0 to 60,000 milliseconds, got {float(value)!r}")
    served = env.run("serve", "--fast-only", "--debounce-ms", value)
    assert (served.returncode, served.stdout) == (2, b"")
    assert served.stderr.decode().splitlines() == [
        f"recall-kit: --debounce-ms: debounce_ms must be from 0 to 60,000 milliseconds, got {float(value)!r}"]
    assert not env.socket.exists()
