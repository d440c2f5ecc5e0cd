"""Whatever its clients ask, the daemon's work is bounded: it opens only folders of memories, keeps
at most DAEMON_MAX_STORES root sets and DAEMON_MAX_SESSIONS sessions (least recently used first
out) and DAEMON_MAX_CONNECTIONS connections (the one waiting longest for a request first out), and
SIGTERM ends it even while a root set's open is stuck."""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from integration_support import DEPLOY_PROMPT, Daemon, Env, daemon, env, memories, wait_for  # noqa: F401

from recall_kit._cache_file import roots_key
from recall_kit.limits import (
    DAEMON_MAX_CONNECTIONS,
    DAEMON_MAX_ROOT_ENTRIES,
    DAEMON_MAX_ROOTS,
    DAEMON_MAX_SESSIONS,
    DAEMON_MAX_STORES,
)

MEMORY = "---\nname: Root set {n}\ndescription: notes of project number{n}\ntype: project\n---\nproject{n} deploys with make ship{n}.\n"


def _begin(session: str, roots: list[str], query: str = DEPLOY_PROMPT) -> dict[str, Any]:
    return {"op": "begin", "session": session, "roots": roots, "query": query}


def _ask(env: Env, *messages: dict[str, Any], timeout: float = 30) -> list[dict[str, Any]]:
    """``env.request`` with a bound on the whole exchange (the daemon may take its time, never forever)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(env.socket))
        sock.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        reader = sock.makefile("rb")
        return [json.loads(reader.readline()) for _ in messages]


def _status(env: Env) -> dict[str, Any]:
    return _ask(env, {"op": "status"})[0]


def _inotify_instances(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return count


# --- roots ------------------------------------------------------------------------------------


def test_roots_that_are_not_folders_of_memories_are_refused_before_anything_is_walked(
    env: Env, daemon: Daemon, tmp_path: Path
) -> None:
    a_file = tmp_path / "notes.md"
    a_file.write_text("---\nname: n\ndescription: d\ntype: user\n---\nbody\n")
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for n in range(DAEMON_MAX_ROOT_ENTRIES + 1):
        os.close(os.open(crowded / f"f{n}", os.O_CREAT | os.O_WRONLY))
    many = [str(tmp_path / f"r{n}") for n in range(DAEMON_MAX_ROOTS + 1)]
    for root in many:
        os.mkdir(root)
    cases = {
        "/": "is the file system root",
        env.vars["HOME"]: "is the home folder",
        str(Path(env.vars["HOME"]).parent): "holds the home folder",
        str(a_file): "is not a folder",
        str(crowded): f"more than {DAEMON_MAX_ROOT_ENTRIES:,} files and folders",
    }
    for root, reason in cases.items():
        started = time.monotonic()
        answer = _ask(env, _begin("s", [root]), timeout=20)[0]
        assert answer["ok"] is False and reason in answer["error"], (root, answer)
        assert time.monotonic() - started < 10, root  # refused, not walked
    answer = _ask(env, _begin("s", many))[0]
    assert answer["ok"] is False and f"at most {DAEMON_MAX_ROOTS}" in answer["error"]
    status = _status(env)
    assert status["stores"] == [] and status["sessions"] == 0


def test_a_folder_of_memories_with_a_big_git_history_is_still_served(env: Env, daemon: Daemon, memories: Path) -> None:
    hidden = memories / ".git" / "objects"
    hidden.mkdir(parents=True)
    for n in range(DAEMON_MAX_ROOT_ENTRIES + 1):  # hidden entries are skipped by the store, and by the count
        os.close(os.open(hidden / f"o{n}", os.O_CREAT | os.O_WRONLY))
    answers = _ask(env, _begin("g", [str(memories)]), {"op": "consume", "session": "g", "point": "initial"})
    assert answers[0] == {"ok": True}
    assert "memories/projects/ledgerline/deploy.md" in answers[1]["delivery"]["refs"]


def _inotify_watches(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            count += Path(f"/proc/{pid}/fdinfo/{fd}").read_text().count("inotify wd:")
        except OSError:
            pass
    return count


def test_a_root_retargeted_to_a_huge_tree_after_it_was_accepted_is_neither_read_nor_watched(
    env: Env, daemon: Daemon, tmp_path: Path
) -> None:
    small = tmp_path / "small"
    for n in range(27):
        (small / f"p{n}").mkdir(parents=True)
        (small / f"p{n}" / "note.md").write_text(MEMORY.format(n=n))
    big = tmp_path / "big"
    for n in range(1_240):  # 1,240 folders of 50 empty files: 63,240 entries
        os.makedirs(big / f"d{n}")
        for m in range(50):
            os.close(os.open(big / f"d{n}" / f"f{m}.txt", os.O_CREAT | os.O_WRONLY, 0o600))
    link = tmp_path / "mem"
    link.symlink_to(small, target_is_directory=True)
    assert _ask(env, _begin("r", [str(link)]))[0] == {"ok": True}
    status = _status(env)
    assert [store["docs"] for store in status["stores"]] == [27]
    watches = _inotify_watches(status["pid"])
    fresh = link.with_name("mem.new")
    fresh.symlink_to(big, target_is_directory=True)
    os.replace(fresh, link)  # accepted at 27 memories, now a tree of 63,240 entries
    wait_for(lambda: [store["docs"] for store in _status(env)["stores"]] == [0], "the retargeted root to be dropped")
    assert _inotify_watches(status["pid"]) - watches < 10


# --- stores -----------------------------------------------------------------------------------


def test_open_root_sets_stay_bounded_least_recently_used_closed_first(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    roots = []
    for n in range(DAEMON_MAX_STORES + 8):
        root = tmp_path / f"project{n}"
        (root / "project").mkdir(parents=True)
        (root / "project" / "notes.md").write_text(MEMORY.format(n=n))
        roots.append(str(root))
    pid = daemon.process.pid
    full: dict[str, Any] = {}
    for n, root in enumerate(roots):
        assert _ask(env, _begin(f"s{n}", [root], f"how does project{n} deploy"))[0] == {"ok": True}
        if n == DAEMON_MAX_STORES - 1:  # every store open: root set 0 used again, so 1 is the least recently used
            _ask(env, _begin("s0", [roots[0]], "project0 again"))
            full = _status(env)
    status = _status(env)
    assert len(status["stores"]) == DAEMON_MAX_STORES
    assert status["stores_closed"] == 8
    assert _inotify_instances(pid) <= DAEMON_MAX_STORES
    # closing a store gives back its threads and descriptors: no growth past the full set's
    assert status["threads"] <= full["threads"] + 2, (full["threads"], status["threads"])
    assert status["fds"] <= full["fds"] + 4, (full["fds"], status["fds"])
    open_roots = {store["roots"][0] for store in status["stores"]}
    assert roots[0] in open_roots and roots[1] not in open_roots  # the least recently used went first
    assert status["sessions"] == DAEMON_MAX_STORES  # the closed root sets' sessions went with them
    assert _ask(env, {"op": "close_session", "session": "s1"})[0]["closed"] is False
    # a closed root set opens again when asked, and serves
    answers = _ask(env, _begin("again", [roots[1]], "how does project1 deploy"), {"op": "consume", "session": "again"})
    assert answers[1]["delivery"]["refs"] == [f"{Path(roots[1]).name}/project/notes.md"]


def test_a_refused_root_set_closes_no_open_store_nor_its_sessions(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    for n in range(DAEMON_MAX_STORES):
        root = tmp_path / f"project{n}"
        (root / "project").mkdir(parents=True)
        (root / "project" / "notes.md").write_text(MEMORY.format(n=n))
        assert _ask(env, _begin(f"s{n}", [str(root)], f"how does project{n} deploy"))[0] == {"ok": True}
    for refused in ("/", env.vars["HOME"], str(tmp_path / "project0" / "project" / "notes.md")):
        assert _ask(env, _begin("bad", [refused]))[0]["ok"] is False
    status = _status(env)
    assert (len(status["stores"]), status["stores_closed"]) == (DAEMON_MAX_STORES, 0)
    assert (status["sessions"], status["sessions_dropped"]) == (DAEMON_MAX_STORES, 0)


# --- sessions ---------------------------------------------------------------------------------


def test_live_sessions_stay_bounded_least_recently_used_dropped_first(env: Env, daemon: Daemon, memories: Path) -> None:
    roots = [str(memories)]
    extra = 50
    batch = 250
    total = DAEMON_MAX_SESSIONS + extra
    for start in range(0, total, batch):
        answers = _ask(env, *(_begin(f"s{n}", roots, "tea") for n in range(start, min(total, start + batch))), timeout=120)
        assert all(a == {"ok": True} for a in answers), answers[:3]
        if start == 0:
            _ask(env, {"op": "finish", "session": "s0"})  # s0 used again: it outlives s1..s50
    status = _status(env)
    assert status["sessions"] == DAEMON_MAX_SESSIONS
    assert status["sessions_dropped"] == extra
    closed = _ask(env, *({"op": "close_session", "session": f"s{n}"} for n in (0, 1, extra, extra + 1, total - 1)))
    assert [c["closed"] for c in closed] == [True, False, False, True, True]


# --- connections ------------------------------------------------------------------------------

# `recall-kit serve` with a connection's idle bound cut to half a second (the real one is a minute).
SERVE_WITH_A_SHORT_CONNECTION_IDLE = r"""
import sys
import recall_kit_cli.integrations.daemon as daemon

daemon.DAEMON_CONNECTION_IDLE_S = 0.5
sys.argv = ["recall-kit", "serve", "--fast-only", *sys.argv[1:]]
from recall_kit_cli.main import main
main()
"""


def _stalled_clients(env: Env, count: int) -> list[socket.socket]:
    """``count`` connections that each send half a request and then nothing (each connect retried
    while the listen backlog is full; a daemon that stops accepting fails the wait, never hangs it)."""
    clients: list[socket.socket] = []

    def connected() -> bool:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.setblocking(False)
        try:
            client.connect(str(env.socket))
        except BlockingIOError:  # the backlog is full until the daemon accepts
            client.close()
            return False
        client.setblocking(True)
        client.sendall(b'{"op": "status"')
        clients.append(client)
        return True

    try:
        for _ in range(count):
            wait_for(connected, f"the daemon to accept connection {len(clients) + 1} of {count}")
    except BaseException:
        for client in clients:
            client.close()
        raise
    return clients


def test_clients_that_connect_and_stall_never_use_up_the_daemons_descriptors(env: Env, memories: Path) -> None:
    descriptors = 1024  # a common soft limit: four times the bound, room for the daemon's own files and accept batches
    flood = descriptors + 100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < flood + 256:
        pytest.skip(f"this process may open only {hard} files, fewer than the {flood} connections of the flood")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, flood + 256), hard))

    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, hard))

    process = subprocess.Popen([sys.executable, "-m", "recall_kit_cli", "serve", "--fast-only"], env=env.vars,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, preexec_fn=low_limit)
    clients: list[socket.socket] = []
    try:
        assert process.stdout is not None and process.stdout.readline()  # listening
        clients = _stalled_clients(env, flood)
        prompt = {"session_id": "s-1", "cwd": "/", "hook_event_name": "UserPromptSubmit", "prompt": DEPLOY_PROMPT}
        assert b"Fly.io" in env.hook(prompt, memories).stdout
        status = _status(env)
        assert status["connections"] <= DAEMON_MAX_CONNECTIONS + 1
        assert status["connections_closed"] >= flood - DAEMON_MAX_CONNECTIONS
    finally:
        for client in clients:
            client.close()
        _sigterm_ends_it(process)
        process.stdout.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_client_stalled_mid_request_is_closed_and_keeps_no_slot(env: Env) -> None:
    process = subprocess.Popen([sys.executable, "-c", SERVE_WITH_A_SHORT_CONNECTION_IDLE], env=env.vars,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert process.stdout is not None and process.stdout.readline()  # listening
        (stalled,) = _stalled_clients(env, 1)
        stalled.settimeout(30)
        assert stalled.recv(1) == b""  # closed by the daemon, with nothing said
        stalled.close()
        assert _status(env)["connections"] == 1  # this one
    finally:
        _sigterm_ends_it(process)
        process.stdout.close()



def test_a_client_that_never_reads_its_answers_is_closed_and_the_daemon_still_exits_when_idle(env: Env) -> None:
    process = subprocess.Popen([sys.executable, "-c", SERVE_WITH_A_SHORT_CONNECTION_IDLE, "--idle-timeout", "1"],
                               env=env.vars, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        assert process.stdout is not None and process.stdout.readline()  # listening
        client.connect(str(env.socket))
        client.setblocking(False)
        requests = b'{"op": "status"}\n' * 1000
        try:
            while True:  # until the daemon, blocked on answers nobody reads, reads no more of them
                client.send(requests)
        except BlockingIOError:
            pass
        assert process.wait(timeout=60) == 0  # the idle exit, the client still connected and never reading
    finally:
        client.close()
        if process.poll() is None:
            _sigterm_ends_it(process)
        process.stdout.close()

# --- SIGTERM ----------------------------------------------------------------------------------

# `recall-kit serve` whose root-set open is a test double that never returns: what a FIFO or a hung
# network mount does to a real open, below the daemon's real open boundary.
SERVE_WITH_AN_OPEN_THAT_NEVER_RETURNS = r"""
import sys, threading
from pathlib import Path
import recall_kit_cli.integrations.daemon as daemon

marker = Path(sys.argv[1])

def open_that_never_returns(*args, **kwargs):
    marker.write_text("opening")
    threading.Event().wait()

daemon.open_recaller = open_that_never_returns
sys.argv = ["recall-kit", "serve"]
from recall_kit_cli.main import main
main()
"""


def _sigterm_ends_it(process: subprocess.Popen[bytes], bound_s: float = 10.0) -> float:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=bound_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"the daemon ignored SIGTERM for {bound_s} s")
    return time.monotonic() - started


def test_sigterm_ends_the_daemon_while_a_root_set_open_is_stuck(env: Env, memories: Path, tmp_path: Path) -> None:
    marker = tmp_path / "opening"
    process = subprocess.Popen(
        [sys.executable, "-c", SERVE_WITH_AN_OPEN_THAT_NEVER_RETURNS, str(marker)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env.vars,
    )
    try:
        assert process.stdout is not None and process.stdout.readline()  # listening
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(env.socket))
        client.sendall(json.dumps(_begin("stuck", [str(memories)])).encode() + b"\n")
        wait_for(marker.exists, "the daemon to be inside the open")
        took = _sigterm_ends_it(process)
        client.close()
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=10)
    assert took < 10
    assert not env.socket.exists()  # it shut down, not just died


def _blocked_opening_a_fifo(pid: int) -> bool:
    """Whether a thread of ``pid`` waits in the kernel for a FIFO's other end (an open that never returns)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "wchan").read_text() == "wait_for_partner":
                return True
        except OSError:
            pass
    return False


def test_sigterm_ends_the_daemon_while_it_opens_a_fifo_at_the_index_cache_path(env: Env, memories: Path) -> None:
    cache = Path(env.vars["XDG_CACHE_HOME"]) / "recall-kit"
    cache.mkdir(parents=True, mode=0o700)
    os.mkfifo(cache / f"index-{roots_key([str(memories)])}.bin")
    started = Daemon(env)
    try:
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.connect(str(env.socket))
        client.sendall(json.dumps(_begin("fifo", [str(memories)])).encode() + b"\n")
        client.setblocking(False)

        def answered() -> bool:
            try:
                return bool(client.recv(1, socket.MSG_PEEK))
            except BlockingIOError:
                return False

        # stuck opening the FIFO, or (once the cache refuses FIFOs) answered: SIGTERM ends it either way
        wait_for(lambda: _blocked_opening_a_fifo(started.process.pid) or answered(), "the daemon to open the FIFO or answer")
        took = _sigterm_ends_it(started.process)
        client.close()
    finally:
        if started.process.poll() is None:
            started.process.kill()
        started.process.communicate(timeout=10)
    assert took < 10
