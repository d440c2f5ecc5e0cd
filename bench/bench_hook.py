"""The Claude Code hook over the warm daemon: wall time from process start to exit (warm and cold),
and 100 concurrent sessions over 10,000 hook calls (duplicate deliveries, task and descriptor growth).

    .venv/bin/python bench/bench_hook.py [--warm-runs 200] [--cold-runs 5] [--calls 10000] [--cold-store 10000]

With --cold-store N it also times the first call on a cold daemon over N generated memories, with
the index cache warm (one `recall-kit query` filled it) and emptied before each run, and counts
the calls that delivered a memory within the hook's budget.

Runs in a private HOME/XDG_RUNTIME_DIR under a temp folder; prints medians and p99 as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from recall_kit_cli.integrations.protocol import request  # noqa: E402

RECALL_KIT = str(Path(sys.executable).parent / "recall-kit")
PROMPTS = [
    "how do I deploy ledgerline to production?",
    "which database migrations need approval?",
    "how do we release tidepool?",
    "what are the code review rules?",
    "where are the staging credentials documented?",
]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def run_hook(env: dict[str, str], root: Path, event: dict) -> float:
    return timed_hook(env, root, event)[0]


def timed_hook(env: dict[str, str], root: Path, event: dict) -> tuple[float, bytes]:
    started = time.perf_counter()
    done = subprocess.run(
        [RECALL_KIT, "hook", "claude-code", "--root", str(root)],
        input=json.dumps(event).encode(), capture_output=True, env=env, check=True,
    )
    return (time.perf_counter() - started) * 1000, done.stdout


def stop_daemon(run: Path) -> None:
    lock = run / "recall-kit" / "daemon.lock"
    try:
        pid = int(lock.read_text().strip())
        os.kill(pid, signal.SIGTERM)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return
    deadline = time.monotonic() + 10
    while (run / "recall-kit" / "daemon.sock").exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--warm-runs", type=int, default=200)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10_000)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--cold-store", type=int, default=0, help="also: a cold daemon over this many generated memories")
    opts = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="recall-kit-bench-"))
    root = base / "memories"
    shutil.copytree(REPO / "examples" / "memories", root)
    run = base / "run"
    run.mkdir(mode=0o700)
    env = {
        "PATH": os.environ["PATH"], "HOME": str(base), "XDG_RUNTIME_DIR": str(run), "XDG_STATE_HOME": str(base / "state"),
        "XDG_CACHE_HOME": str(base / "cache"),
    }
    socket_path = run / "recall-kit" / "daemon.sock"
    results: dict[str, object] = {"store_docs": sum(1 for p in root.rglob("*.md") if p.name != "MEMORY.md")}
    try:
        cold = []
        for i in range(opts.cold_runs):
            stop_daemon(run)
            cold.append(run_hook(env, root, {"session_id": f"cold{i}", "hook_event_name": "UserPromptSubmit", "prompt": PROMPTS[0]}))
        results["cold_first_call_ms"] = {"median": statistics.median(cold), "max": max(cold)}
        warm = []
        for i in range(opts.warm_runs):
            event = {"session_id": f"warm{i % 20}", "hook_event_name": "UserPromptSubmit", "prompt": PROMPTS[i % len(PROMPTS)]}
            if i % 2:
                event = {"session_id": f"warm{i % 20}", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_response": {}}
            warm.append(run_hook(env, root, event))
        results["warm_hook_ms"] = {"p50": pct(warm, 0.5), "p99": pct(warm, 0.99), "runs": len(warm)}
        bare = [run_hook(env, root, {"session_id": "x", "hook_event_name": "Notification"}) for _ in range(50)]
        results["hook_without_daemon_call_ms"] = {"p50": pct(bare, 0.5)}
        results["concurrent"] = concurrent(socket_path, root, opts.sessions, opts.calls)
        if opts.cold_store:
            results["cold_generated_store"] = cold_generated(env, base, run, opts.cold_store, opts.cold_runs)
    finally:
        stop_daemon(run)
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(results, indent=2))


def concurrent(socket_path: Path, root: Path, sessions: int, calls: int) -> dict[str, object]:
    """Each session loops turns (begin+consume initial, consume tool_result, finish) with the
    messages the hook sends; a ref delivered twice within one session is a duplicate."""
    status = lambda: request(socket_path, [{"op": "status"}], deadline=time.monotonic() + 10)[0]  # noqa: E731
    request(socket_path, [{"op": "begin", "session": "warm", "roots": [str(root)], "query": "warm"}], deadline=time.monotonic() + 30)
    request(socket_path, [{"op": "close_session", "session": "warm"}], deadline=time.monotonic() + 10)
    before = status()
    per_session = calls // sessions
    duplicates = [0] * sessions
    delivered = [0] * sessions
    errors: list[str] = []

    def worker(n: int) -> None:
        sid, seen, done, turn = f"c{n}", set(), 0, 0
        try:
            while done < per_session:
                prompt = PROMPTS[(n + turn) % len(PROMPTS)]
                msgs = [
                    [{"op": "begin", "session": sid, "roots": [str(root)], "query": prompt},
                     {"op": "consume", "session": sid, "point": "initial"}],
                    [{"op": "consume", "session": sid, "point": "tool_result"}],
                    [{"op": "finish", "session": sid}],
                ]
                for batch in msgs:
                    if done >= per_session:
                        break
                    for answer in request(socket_path, batch, deadline=time.monotonic() + 10):
                        for ref in (answer.get("delivery") or {}).get("refs", []):
                            delivered[n] += 1
                            duplicates[n] += ref in seen
                            seen.add(ref)
                    done += 1
                turn += 1
            request(socket_path, [{"op": "close_session", "session": sid}], deadline=time.monotonic() + 10)
        except Exception as exc:  # counted and reported, not hidden
            errors.append(f"{sid}: {exc}")

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(n,)) for n in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    after = status()
    return {
        "sessions": sessions, "hook_calls": per_session * sessions, "seconds": round(elapsed, 2),
        "deliveries": sum(delivered), "duplicates": sum(duplicates), "errors": errors[:5], "error_count": len(errors),
        "tasks_before": before["tasks"], "tasks_after": after["tasks"],
        "fds_before": before["fds"], "fds_after": after["fds"], "sessions_left": after["sessions"],
    }


def cold_generated(env: dict[str, str], base: Path, run: Path, count: int, runs: int) -> dict[str, object]:
    """The first hook call on a cold daemon over ``count`` generated memories, index cache warm and empty."""
    sys.path.insert(0, str(REPO / "bench"))
    from generated_store import write_store

    big = base / "generated"
    write_store(big, count)
    prompt = "how do we deploy the payment service to production"
    subprocess.run([RECALL_KIT, "query", prompt, "--root", str(big), "--fast-only"], env=env, check=True, capture_output=True)
    out: dict[str, object] = {"docs": count}
    for label, keep_cache in (("cache_warm", True), ("cache_empty", False)):
        times, delivered = [], 0
        for i in range(runs):
            stop_daemon(run)
            if not keep_cache:
                shutil.rmtree(base / "cache", ignore_errors=True)
            ms, stdout = timed_hook(env, big, {"session_id": f"{label}{i}", "hook_event_name": "UserPromptSubmit", "prompt": prompt})
            times.append(ms)
            delivered += b"additionalContext" in stdout
        out[label] = {"median_ms": statistics.median(times), "max_ms": max(times), "delivered": f"{delivered}/{runs}"}
    return out


if __name__ == "__main__":
    main()
