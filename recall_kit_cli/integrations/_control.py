"""`recall-kit serve --status` and `--stop`: ask the running daemon, over its socket, how it is or to stop."""

from __future__ import annotations

import os
import time
from typing import Any

from recall_kit_cli.integrations._runtime import RuntimePaths
from recall_kit_cli.integrations.protocol import DaemonError, UnusableSocketPath, UntrustedSocket, listening, request

ASK_TIMEOUT_S = 5.0  # a live daemon answers status in milliseconds; one that takes longer is stuck
STOP_TIMEOUT_S = 10.0  # closing its sessions and stores takes at most SHUTDOWN_GRACE_S (5 s): twice that is stuck


class NoDaemon(DaemonError):
    """No daemon runs for this user: nothing listens on the socket."""


def daemon_status(paths: RuntimePaths) -> dict[str, Any]:
    """The running daemon's status; NoDaemon when none runs, DaemonError when it cannot be asked."""
    return _ask(paths, {"op": "status"})


def stop_daemon(paths: RuntimePaths, timeout_s: float) -> int:
    """Ask the running daemon to stop and wait until its process is gone; its pid.

    NoDaemon when none runs; DaemonError when it does not stop within ``timeout_s``."""
    pid = int(_ask(paths, {"op": "stop"})["pid"])
    if not _wait_for_exit(pid, timeout_s):
        raise DaemonError(f"the daemon (pid {pid}) was asked to stop but still runs after {timeout_s:g} s")
    return pid


def _ask(paths: RuntimePaths, message: dict[str, Any]) -> dict[str, Any]:
    try:
        return request(paths.socket, [message], deadline=time.monotonic() + ASK_TIMEOUT_S)[0]
    except (UntrustedSocket, UnusableSocketPath):
        raise
    except DaemonError:
        if not listening(paths.socket):
            raise NoDaemon(f"no daemon runs for this user (nothing listens on {paths.socket})") from None
        raise


def _wait_for_exit(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` exits within ``timeout_s``, awaited on a pidfd (no polling)."""
    import select

    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True  # gone already
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)  # readable once the process has exited
        return bool(poller.poll(timeout_s * 1000))
    finally:
        os.close(pidfd)


def status_lines(status: dict[str, Any]) -> list[str]:
    """The status as lines for a person (each value still to be cleaned for the terminal by the caller)."""
    selector = status.get("selector") or "none (fast recall only)"
    lines = [
        f"daemon: pid {status.get('pid')}, up {_duration(float(status.get('uptime_s', 0)))}, "
        f"idle timeout {_duration(float(status.get('idle_timeout_s', 0)))}",
        f"socket: {status.get('socket')}",
        f"sessions: {status.get('sessions')} of at most {status.get('max_sessions')} "
        f"({status.get('pending')} pending, {status.get('sessions_dropped')} dropped to make room)",
        f"stores: {len(status.get('stores') or [])} open of at most {status.get('max_stores')} "
        f"({status.get('opening')} opening, {status.get('stores_closed')} closed to make room)",
    ]
    for store in status.get("stores") or []:
        roots = ", ".join(str(root) for root in store.get("roots", []))
        lines.append(f"  {roots}: {store.get('docs')} memories, version {store.get('version')}")
        if store.get("enrichment"):
            lines.append(f"    enrichment: {enrichment_counts(store['enrichment'])}")
    lines.append(f"model: {selector}")
    pace = status.get("model_pace")
    if isinstance(pace, dict):
        p50 = pace.get("answered_p50_ms")
        answers = "no answer yet" if p50 is None else f"answers p50 {p50:g} ms"
        lines.append(f"  initial wait: spent {pace.get('waited')} times ({pace.get('probes')} probes), "
                     f"let go {pace.get('let_go')} times; {answers} over the last {pace.get('samples')} prompts")
    lines += [
        f"enrichment: {enrichment_line(status.get('enrichment'))}",
        f"requests: {status.get('requests')}, connections: {status.get('connections')}, "
        f"refused peers: {status.get('refused_peers')}",
        f"threads: {status.get('threads')}, tasks: {status.get('tasks')}, open files: {status.get('fds')}",
    ]
    return lines


def enrichment_counts(counts: dict[str, Any]) -> str:
    """What background enrichment did and has left, in one line."""
    line = (f"{counts.get('enriched')} enriched, {counts.get('pending')} pending, {counts.get('in_flight')} in flight, "
            f"{counts.get('failed')} failed, {counts.get('calls')} model calls ({counts.get('preempted')} cut short for a prompt)")
    refused = counts.get("refused_roots")
    return line + (f"; sidecar not writable in {', '.join(map(str, refused))}" if refused else "")


def enrichment_line(enrichment: Any) -> str:
    """The daemon's background enrichment: off and why, or its totals."""
    if not isinstance(enrichment, dict):
        return "unknown (an older daemon)"
    if not enrichment.get("on"):
        return f"off: {enrichment.get('why')}"
    return (f"on with {enrichment.get('model')}, at most {enrichment.get('concurrency')} calls at once and "
            f"{enrichment.get('calls_per_minute'):g} a minute: {enrichment_counts(enrichment)}")


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"
