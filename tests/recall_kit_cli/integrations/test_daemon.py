"""`recall-kit serve`: the JSON-lines protocol on a real Unix socket, one instance per user,
stale-socket recovery, idle exit, SIGTERM, and other users refused."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from integration_support import DEPLOY_PROMPT, RECALL_KIT, Daemon, Env, pid_alive, wait_for


def test_socket_is_private_to_the_user(env: Env, daemon: Daemon) -> None:
    mode = env.socket.stat().st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert stat.S_IMODE(env.socket.parent.stat().st_mode) == 0o700
    assert daemon.ready["socket"] == str(env.socket)


def test_begin_consume_delivers_then_never_repeats(env: Env, daemon: Daemon, memories: Path) -> None:
    begin = {"op": "begin", "session": "a", "roots": [str(memories)], "query": DEPLOY_PROMPT}
    consume = {"op": "consume", "session": "a", "point": "initial"}
    first = env.request(begin, consume)
    assert first[0] == {"ok": True}
    delivery = first[1]["delivery"]
    assert "memories/projects/ledgerline/deploy.md" in delivery["refs"]
    assert "Fly.io" in delivery["text"] and delivery["point"] == "initial"
    again = env.request(begin, consume, {"op": "consume", "session": "a", "point": "tool_result"})
    assert again[1]["delivery"] is None and again[2]["delivery"] is None
    # another session has its own surfaced set
    other = env.request({**begin, "session": "b"}, {**consume, "session": "b"})
    assert other[1]["delivery"]["refs"] == delivery["refs"]


def test_status_counts_sessions_and_close_session_drops_them(env: Env, daemon: Daemon, memories: Path) -> None:
    env.request({"op": "begin", "session": "x", "roots": [str(memories)], "query": DEPLOY_PROMPT})
    status = env.request({"op": "status"})[0]
    assert status["sessions"] == 1 and status["pid"] == daemon.process.pid
    assert status["stores"][0]["roots"] == [str(memories)]
    assert env.request({"op": "close_session", "session": "x"})[0] == {"ok": True, "closed": True}
    assert env.request({"op": "status"})[0]["sessions"] == 0
    assert env.request({"op": "close_session", "session": "x"})[0]["closed"] is False


def test_bad_requests_get_one_line_errors_and_the_connection_survives(env: Env, daemon: Daemon, memories: Path) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(env.socket))
        sock.sendall(
            b"{nope\n"
            b'{"op": "launch"}\n'
            b'{"op": "begin", "session": "s", "roots": ["relative"], "query": "q"}\n'
            + f'{{"op": "begin", "session": "s", "roots": ["{memories}/missing"], "query": "q"}}\n'.encode()
            + b'{"op": "consume", "session": "s", "point": "later"}\n'
            b'{"op": "status"}\n'
        )
        reader = sock.makefile("rb")
        answers = [json.loads(reader.readline()) for _ in range(6)]
    assert [a["ok"] for a in answers] == [False, False, False, False, False, True]
    assert "not JSON" in answers[0]["error"]
    assert "unknown op 'launch'" in answers[1]["error"]
    assert "absolute" in answers[2]["error"]
    assert "does not exist" in answers[3]["error"]
    assert "unknown point" in answers[4]["error"]


def test_watched_store_serves_a_memory_written_after_start(env: Env, daemon: Daemon, memories: Path) -> None:
    env.request({"op": "begin", "session": "w", "roots": [str(memories)], "query": "warm up"})
    version = env.request({"op": "status"})[0]["stores"][0]["version"]
    (memories / "reference" / "zebra.md").write_text(
        "---\nname: Zebra crossing quirks\ndescription: the zebracrossing service needs the quagga flag\n"
        "type: reference\n---\nPass --quagga to zebracrossing.\n"
    )
    wait_for(lambda: env.request({"op": "status"})[0]["stores"][0]["version"] > version, "the store to see the file")
    answers = env.request(
        {"op": "begin", "session": "w", "roots": [str(memories)], "query": "zebracrossing quagga flag"},
        {"op": "consume", "session": "w", "point": "initial"},
    )
    assert answers[1]["delivery"]["refs"] == ["memories/reference/zebra.md"]


def test_a_restarted_daemon_opens_its_roots_from_the_index_cache(env: Env, memories: Path) -> None:
    counts = []
    for n, args in enumerate([(), (), ("--no-cache",)]):
        session = f"c{n}"  # a session of its own each time: one session gets a memory once, restart or not
        begin = {"op": "begin", "session": session, "roots": [str(memories)], "query": DEPLOY_PROMPT}
        consume = {"op": "consume", "session": session, "point": "initial"}
        daemon = Daemon(env, *args)
        try:
            answers = env.request(begin, consume, {"op": "status"})
        finally:
            assert daemon.stop() == 0
        assert "memories/projects/ledgerline/deploy.md" in answers[1]["delivery"]["refs"]
        store = answers[2]["stores"][0]
        counts.append((store["reused_from_cache"], store["docs"]))
    docs = counts[0][1]
    assert docs > 20 and counts == [(0, docs), (docs, docs), (0, docs)]


def test_second_instance_exits_and_leaves_the_first_serving(env: Env, daemon: Daemon) -> None:
    second = env.run("serve")
    assert second.returncode == 0
    assert b"already serves" in second.stderr
    assert env.request({"op": "status"})[0]["pid"] == daemon.process.pid


def test_stale_socket_from_a_dead_daemon_is_recovered(env: Env) -> None:
    env.socket.parent.mkdir(mode=0o700, parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(env.socket))  # bound and closed: a socket file nobody listens on
    stale.close()
    started = Daemon(env)
    try:
        assert env.request({"op": "status"})[0]["pid"] == started.process.pid
    finally:
        assert started.stop() == 0


def test_sigterm_closes_sessions_and_removes_the_socket(env: Env, memories: Path) -> None:
    started = Daemon(env)
    env.request({"op": "begin", "session": "t", "roots": [str(memories)], "query": DEPLOY_PROMPT})
    assert started.stop() == 0
    assert not env.socket.exists()
    # the lock is free again: a new daemon starts at once
    again = Daemon(env)
    assert again.stop() == 0


def test_idle_daemon_exits_on_its_own(env: Env) -> None:
    process = subprocess.Popen(
        [RECALL_KIT, "serve", "--idle-timeout", "0.3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.vars,
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline()  # ready
    assert process.wait(timeout=20) == 0
    assert b"idle for 0.3 s" in process.stderr.read()
    assert not env.socket.exists()
    process.stdout.close()
    process.stderr.close()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another user")
def test_connections_from_other_users_are_refused() -> None:
    base = Path(tempfile.mkdtemp(prefix="recall-kit-peer-"))  # pytest's tmp_path is closed to others
    try:
        other = Env(base)
        started = Daemon(other)
        try:
            # open the folders and the socket so only the peer-credential check stands in the way
            for path in (base, base / "run", other.socket.parent):
                os.chmod(path, 0o755)
            os.chmod(other.socket, 0o666)
            client = (
                "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                "print(s.makefile().readline())"  # the daemon speaks first, to refuse
            )
            result = subprocess.run(
                [_python_for_nobody(), "-c", client, str(other.socket)],
                capture_output=True, text=True, user=65534, timeout=20,
            )
            assert "refused" in result.stdout, result.stderr
            assert other.request({"op": "status"})[0]["refused_peers"] == 1
            assert pid_alive(started.process.pid)
        finally:
            assert started.stop() == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _python_for_nobody() -> str:
    """An interpreter another user may run (the venv may sit under root's home)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        if os.path.exists(candidate) and os.stat(candidate).st_mode & stat.S_IXOTH:
            return candidate
    pytest.fail("no world-executable python3 for the other-user client")


def test_serve_status_shows_the_running_daemon_for_people_and_machines(env: Env, daemon: Daemon, memories: Path) -> None:
    env.request({"op": "begin", "session": "st", "roots": [str(memories)], "query": DEPLOY_PROMPT})
    human = env.run("serve", "--status")
    assert human.returncode == 0, human.stderr
    text = human.stdout.decode()
    assert text.startswith(f"daemon: pid {daemon.process.pid}, up ")
    assert f"socket: {env.socket}" in text and "sessions: 1 of at most " in text
    assert f"  {memories}: " in text and " memories, version " in text
    machine = env.run("serve", "--status", "--json")
    status = json.loads(machine.stdout)
    assert status["pid"] == daemon.process.pid and status["sessions"] == 1
    assert status["stores"][0]["roots"] == [str(memories)]
    assert {"threads", "fds", "max_stores", "max_sessions"} <= status.keys()


def test_serve_stop_stops_the_daemon_and_waits_until_it_is_gone(env: Env, memories: Path) -> None:
    started = Daemon(env)
    env.request({"op": "begin", "session": "sp", "roots": [str(memories)], "query": DEPLOY_PROMPT})
    result = env.run("serve", "--stop")
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode() == f"stopped the daemon (pid {started.process.pid})\n"
    assert started.process.poll() == 0  # gone before --stop returned
    assert not env.socket.exists()
    assert started.stop() == 0


def test_status_and_stop_without_a_daemon_say_so_and_are_not_bad_input(env: Env) -> None:
    said = f"no daemon runs for this user (nothing listens on {env.socket})"
    status = env.run("serve", "--status")
    assert (status.returncode, status.stdout.decode(), status.stderr) == (3, said + "\n", b"")  # "not running"
    as_json = env.run("serve", "--status", "--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout) == {"running": False, "reason": said}
    stop = env.run("serve", "--stop")  # nothing to stop: done
    assert (stop.returncode, stop.stdout.decode(), stop.stderr) == (0, said + ": nothing to stop\n", b"")


def test_a_refusal_to_serve_is_also_in_the_hook_log(env: Env) -> None:
    env.lock.parent.mkdir(mode=0o700, parents=True)
    env.lock.symlink_to(env.base / "elsewhere")
    result = env.run("serve")
    assert result.returncode == 2
    log = env.hook_log.read_text()
    assert "refused to start: refusing to serve:" in log and "daemon.lock is a symlink" in log


def test_hook_uninstall_says_whether_the_daemon_still_runs(env: Env, memories: Path) -> None:
    assert env.run("hook", "install", "claude-code", "--root", str(memories)).returncode == 0
    started = Daemon(env)
    env.request({"op": "begin", "session": "un", "roots": [str(memories)], "query": DEPLOY_PROMPT})
    running = env.run("hook", "uninstall", "claude-code")
    assert running.returncode == 0 and b"the daemon still runs" in running.stdout and b"serve --stop" in running.stdout
    assert env.run("serve", "--stop").returncode == 0 and started.stop() == 0
    gone = env.run("hook", "uninstall", "claude-code")
    assert gone.returncode == 0 and gone.stdout.decode().splitlines()[-1] == "no daemon runs"


def test_a_memory_whose_file_name_is_not_utf8_is_delivered_once_and_kept_exactly(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    root = tmp_path / "undecodable"
    root.mkdir()
    memory = "---\nname: Espresso machine descaling\ndescription: descale the espresso machine with citric acid\ntype: user\n---\nMonthly.\n"
    (Path(os.fsdecode(bytes(root) + b"/caf\xe9.md"))).write_text(memory)  # a Latin-1 file name
    begin = {"op": "begin", "session": "u", "roots": [str(root)], "query": "how do I descale the espresso machine with citric acid"}
    consume = {"op": "consume", "session": "u", "point": "initial"}
    first = env.request(begin, consume)
    assert first[1]["ok"] is True
    ref = first[1]["delivery"]["refs"][0]
    assert os.fsencode(ref).endswith(b"/caf\xe9.md")  # the byte arrives as its \udce9 escape and maps back
    assert "Espresso machine descaling" in first[1]["delivery"]["text"]
    again = env.request(begin, consume)
    assert again[1]["ok"] is True and again[1]["delivery"] is None  # delivered once in the session
    state = Path(env.vars["XDG_STATE_HOME"]) / "recall-kit"
    wait_for(lambda: (state / "surfaced.jsonl").exists(), "the surfaced record")
    lines = [json.loads(line) for line in (state / "surfaced.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [ref] in [line["refs"] for line in lines]  # kept exactly, so a restarted daemon knows it too
