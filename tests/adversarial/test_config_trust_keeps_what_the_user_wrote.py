"""`recall-kit config trust` edits only its own block of the user's recall-kit.toml: every other byte
(CRLF line endings, blank lines, the final newline or its absence) stays as the user wrote it, a
block whose end line the user deleted is refused rather than guessed at, and a FIFO or a device
given as the project file is refused in one line, never read."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from cli_support import RECALL_KIT, assert_one_line_error, clean_environ
from recall_kit import ConfigError
from recall_kit.settings import trust_config_file, untrust_config_file

BLOCK_START = "# >>> trusted project files: written by `recall-kit config trust` and `recall-kit config untrust`"
BLOCK_END = "# <<< trusted project files"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "cloned" / "recall-kit.toml"
    path.parent.mkdir()
    path.write_text('[selector]\nmodel = "m"\n')
    return path


@pytest.fixture
def user_file(tmp_path: Path) -> Path:
    path = tmp_path / "config" / "recall-kit-user.toml"
    path.parent.mkdir(mode=0o700)
    return path


@pytest.mark.parametrize(
    "text",
    [
        '# mine\r\n[selector]\r\nmodel = "mine"\r\n\r\n\r\n[roots]\r\n',  # CRLF, two blank lines
        '[selector]\nmodel = "mine"\n\n\n',  # blank lines at the end
        '[selector]\nmodel = "mine"',  # no final newline
        '\n\n# only a comment after blank lines\n',
    ],
    ids=["crlf", "trailing-blank-lines", "no-final-newline", "leading-blank-lines"],
)
def test_trust_then_untrust_gives_back_the_users_bytes(project: Path, user_file: Path, text: str) -> None:
    user_file.write_bytes(text.encode())
    env = {"RECALL_KIT_CONFIG": str(user_file)}
    trust_config_file(project, environ=env)
    trusted = user_file.read_bytes()
    assert trusted.startswith(text.encode()) or trusted.startswith((text + ("\r\n" if "\r\n" in text else "\n")).encode())
    if "\r\n" in text:  # the block takes the file's line ending
        assert b"\n" not in trusted.replace(b"\r\n", b"")
    untrust_config_file(project, environ=env)
    assert user_file.read_bytes() == text.encode()


def test_a_block_without_its_end_line_is_refused_and_the_lines_after_it_kept(project: Path, user_file: Path) -> None:
    env = {"RECALL_KIT_CONFIG": str(user_file)}
    user_file.write_text('[selector]\nmodel = "mine"\n')
    trust_config_file(project, environ=env)
    broken = user_file.read_text().replace(BLOCK_END + "\n", "") + '\n# my own notes after the block\n[roots]\n'
    user_file.write_text(broken)
    other = project.parent.parent / "other" / "recall-kit.toml"
    other.parent.mkdir()
    other.write_text("")
    with pytest.raises(ConfigError, match="end line") as raised:
        trust_config_file(other, environ=env)
    assert "\n" not in str(raised.value)
    with pytest.raises(ConfigError, match="end line"):
        untrust_config_file(project, environ=env)
    assert user_file.read_text() == broken


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_config_trust_refuses_a_fifo_or_a_device_in_one_line(tmp_path: Path, user_file: Path, kind: str) -> None:
    if kind == "fifo":
        target = tmp_path / "recall-kit.toml"
        os.mkfifo(target)  # nobody ever writes to it: a blocking read would wait forever
    else:
        target = Path("/dev/zero")  # a read to the end would grow without bound
    result = subprocess.run(
        [str(RECALL_KIT), "config", "trust", str(target)], capture_output=True, text=True, timeout=60,
        env=clean_environ(RECALL_KIT_CONFIG=str(user_file)), cwd=tmp_path,
    )
    assert_one_line_error(result, str(target), "not a regular file")
    assert not user_file.exists()


def test_trusts_and_untrusts_run_at_once_never_lose_each_others_change(tmp_path: Path, user_file: Path) -> None:
    # each reads the user's file, changes its block and replaces the file: without a lock the last writer
    # won, so a trust reported as recorded was lost and an untrust could be undone by another's trust
    projects = []
    for n in range(12):
        path = tmp_path / f"p{n}" / "recall-kit.toml"
        path.parent.mkdir()
        path.write_text(f'roots = ["."]\n# {n}\n')
        projects.append(path)
    env = clean_environ(RECALL_KIT_CONFIG=str(user_file))
    untrusted = projects[:4]
    for path in untrusted:
        trust_config_file(path, environ=env)
    runs = [subprocess.Popen([str(RECALL_KIT), "config", "untrust" if path in untrusted else "trust", str(path.parent)],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for path in projects]
    assert [(run.wait(timeout=120), run.stderr.read() if run.stderr else b"") for run in runs] == [(0, b"")] * 12
    for run in runs:
        if run.stderr:
            run.stderr.close()
    text = user_file.read_text()
    assert [str(path.resolve()) in text for path in projects] == [path not in untrusted for path in projects]
