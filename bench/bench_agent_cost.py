"""What the hook costs inside Claude Code, in the client's own figures: `time_to_request_ms` from
`claude -p --output-format json` (its time from start to its first model request), with the hook
and without, alternating, in one run.

    .venv/bin/python bench/bench_agent_cost.py [--runs 7] [--warmup 2] [--model-latency-ms 300]
        [--cases silent,"silent + model"] [--baseline DIR]

With ``--baseline DIR`` (a checkout: ``git worktree add --detach DIR REV``) every case also runs on
that tree's code (first on PYTHONPATH for the daemon and the hook), right before this tree's, with a
daemon of its own: the two sides of each case are one run. ``RECALL_KIT_AGENT_CLIS_DIR`` names a
folder the CLIs are installed in already (as the tests take it).

Claude Code 2.1.197 (installed from npm into .agent-clis/ when it is not there) runs offline
against a scripted model on loopback, in a `git init` project, with examples/memories as its
memory folder (~/.claude/projects/<project>/memory/). One HOME has recall-kit's hook, installed
by `recall-kit hook install claude-code --user` (the hook finds the memory folder itself); the other has none. Three
cases, each with its own daemon, started and warmed before any timed run:

- hit: a prompt the fast stage answers (no model configured);
- silent: a prompt the fast stage stays silent on, no model configured (`serve --fast-only`);
- silent + model: the same prompt with a model configured: a scripted OpenAI-compatible
  selector that answers after --model-latency-ms, as a real model would, later than the 100 ms
  the initial point waits.

A control case runs the silent prompt with a hook that does nothing (`true`) in place of ours:
what Claude Code's running of any hook costs. Each case also times the hook alone (`recall-kit hook claude-code`, process start to exit, on a
new session each call) for its p50 and p99. Prints medians of the warm runs, their spread, the
differences (of the medians, and the median of each round's difference), how many runs delivered
a memory and the load average, as JSON.
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
import time
from pathlib import Path
from typing import Any

from recall_kit.testing import (
    CLAUDE_CODE,
    Reply,
    ScriptedAgentServer,
    ScriptedChatServer,
    agent_memory_folder,
    install_agent_clis,
)
from recall_kit_cli.integrations.protocol import request

REPO = Path(__file__).resolve().parents[1]
RECALL_KIT = str(Path(sys.executable).parent / "recall-kit")
HIT_PROMPT = "how do I deploy ledgerline to production?"
SILENT_PROMPT = "thanks, that works now"
CASES = (("hit", HIT_PROMPT, False), ("silent", SILENT_PROMPT, False), ("silent + model", SILENT_PROMPT, True))
CONTROL = "control: a UserPromptSubmit hook that does nothing (`true`)"
HOOK_CALLS = 40


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Setup:
    """Two HOMEs (with the hook, without it) over one project, one runtime folder for the daemons."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.run_dir = base / "run"
        self.run_dir.mkdir(mode=0o700)
        self.project = base / "project"
        self.project.mkdir()
        subprocess.run(["git", "init", "-q", str(self.project)], check=True)
        self.project = self.project.resolve()
        self.homes = {"hook": base / "home-hook", "bare": base / "home-bare", "noop": base / "home-noop"}
        for home in self.homes.values():
            home.mkdir()
            shutil.copytree(REPO / "examples" / "memories", agent_memory_folder(CLAUDE_CODE, home, self.project))
        self.memory = agent_memory_folder(CLAUDE_CODE, self.homes["hook"], self.project)
        self.code: Path | None = None  # a tree whose code the daemon and the hook run (None: this one)

    def env(self, arm: str, **extra: str) -> dict[str, str]:
        code = {"PYTHONPATH": str(self.code)} if self.code is not None else {}
        return {
            "PATH": os.environ["PATH"], "HOME": str(self.homes[arm]), "LANG": "C.UTF-8",
            "XDG_RUNTIME_DIR": str(self.run_dir), "XDG_STATE_HOME": str(self.base / "state"),
            "XDG_CACHE_HOME": str(self.base / "cache"), **code, **extra,
        }

    def install_hook(self) -> None:
        subprocess.run([RECALL_KIT, "hook", "install", "claude-code", "--user"],
                       env=self.env("hook"), check=True, capture_output=True)
        noop = self.homes["noop"] / ".claude" / "settings.json"
        noop.parent.mkdir(parents=True, exist_ok=True)
        hook = {"type": "command", "command": "true", "timeout": 5}
        noop.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [hook]}]}}) + "\n")


class Daemon:
    """`recall-kit serve` for one case, ready once it printed its ready line, warm once it opened the memories."""

    def __init__(self, setup: Setup, selector_url: str | None) -> None:
        extra = {"RECALL_KIT_BASE_URL": selector_url, "RECALL_KIT_MODEL": "scripted"} if selector_url else {}
        args = [] if selector_url else ["--fast-only"]
        self.process = subprocess.Popen([RECALL_KIT, "serve", *args], env=setup.env("hook", **extra),
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.process.stdout is not None
        ready = json.loads(self.process.stdout.readline() or b"null")
        if not ready:
            raise SystemExit("bench: the daemon did not start")
        socket_path = Path(ready["socket"])
        begin = {"op": "begin", "session": "warm-up", "roots": [str(setup.memory)], "query": "warm up"}
        request(socket_path, [begin, {"op": "close_session", "session": "warm-up"}], deadline=time.monotonic() + 60)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def claude_run(claude: Path, setup: Setup, arm: str, server: ScriptedAgentServer, prompt: str) -> dict[str, Any]:
    env = setup.env(arm, ANTHROPIC_BASE_URL=server.base_url, ANTHROPIC_API_KEY="scripted-key",
                    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1")
    done = subprocess.run([str(claude), "-p", prompt, "--output-format", "json"], cwd=setup.project, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"bench: claude exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return dict(json.loads(done.stdout))


def hook_alone(setup: Setup, prompt: str, calls: int) -> dict[str, float]:
    """The hook's own wall time, process start to exit, on a new session per call."""
    times = []
    for i in range(calls):
        event = {"session_id": f"hook-alone-{time.monotonic_ns()}-{i}", "hook_event_name": "UserPromptSubmit",
                 "prompt": prompt, "cwd": str(setup.project)}
        started = time.perf_counter()
        subprocess.run([RECALL_KIT, "hook", "claude-code"], env=setup.env("hook"),
                       input=json.dumps(event).encode(), capture_output=True, check=True)
        times.append((time.perf_counter() - started) * 1000)
    return {"p50": round(pct(times, 0.5), 1), "p99": round(pct(times, 0.99), 1)}


def measure(claude: Path, setup: Setup, prompt: str, runs: int, warmup: int, hooked: str = "hook") -> dict[str, Any]:
    """Alternate the two arms (bare first on even rounds, ``hooked`` first on odd ones); keep the warm rounds."""
    times: dict[str, list[float]] = {hooked: [], "bare": []}
    delivered = 0
    with ScriptedAgentServer() as server:
        for round_ in range(warmup + runs):
            for arm in (("bare", hooked) if round_ % 2 == 0 else (hooked, "bare")):
                seen = len(server.main_requests)
                result = claude_run(claude, setup, arm, server, prompt)
                first = server.main_requests[seen]
                if round_ >= warmup:
                    times[arm].append(float(result["time_to_request_ms"]))
                    delivered += arm == hooked and "recalled-memories" in first.text()
    hook, bare = statistics.median(times[hooked]), statistics.median(times["bare"])
    return {
        "without_hook_ms": {"median": bare, "min": min(times["bare"]), "max": max(times["bare"])},
        "with_hook_ms": {"median": hook, "min": min(times[hooked]), "max": max(times[hooked])},
        "difference_ms": round(hook - bare, 1),  # of the medians
        "paired_difference_ms": statistics.median(h - b for h, b in zip(times[hooked], times["bare"])),  # per round
        "delivered": f"{delivered}/{runs}",
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="warm rounds per case (each: one run per arm)")
    parser.add_argument("--warmup", type=int, default=2, help="rounds per case run first and not counted")
    parser.add_argument("--model-latency-ms", type=float, default=300.0)
    parser.add_argument("--cases", help="the cases to run, comma-separated names (default: all, and the control)")
    parser.add_argument("--baseline", type=Path, help="a checkout whose code also runs every case, beside this tree's")
    opts = parser.parse_args()
    wanted = set(opts.cases.split(",")) if opts.cases else None
    unknown = (wanted or set()) - {name for name, _, _ in CASES} - {"control"}
    if unknown:
        raise SystemExit(f"bench: unknown case {sorted(unknown)}; one of {[name for name, _, _ in CASES]} or control")
    sides: dict[str, Path | None] = {"this tree": None}
    if opts.baseline is not None:
        sides = {f"baseline {opts.baseline}": opts.baseline.resolve(), **sides}
    claude = install_agent_clis(Path(os.environ.get("RECALL_KIT_AGENT_CLIS_DIR") or REPO / ".agent-clis"))[CLAUDE_CODE]
    base = Path(tempfile.mkdtemp(prefix="recall-kit-agent-cost-"))
    results: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()], "cases": {}}
    started = time.monotonic()
    try:
        setup = Setup(base)
        setup.install_hook()
        for name, prompt, with_model in CASES:
            if wanted is not None and name not in wanted:
                continue
            for side, code in sides.items():
                setup.code = code
                with ScriptedChatServer(default=Reply.empty().after(opts.model_latency_ms)) as selector:
                    daemon = Daemon(setup, selector.base_url if with_model else None)
                    try:
                        case = measure(claude, setup, prompt, opts.runs, opts.warmup)
                        case["hook_alone_ms"] = hook_alone(setup, prompt, HOOK_CALLS)
                        case["load"] = [round(x, 2) for x in os.getloadavg()]
                    finally:
                        daemon.stop()
                label = name if len(sides) == 1 else f"{name} ({side})"
                results["cases"][label] = {"prompt": prompt, "model": with_model, **case}
        setup.code = None
        if wanted is None or "control" in wanted:
            results["cases"][CONTROL] = {"prompt": SILENT_PROMPT, **measure(claude, setup, SILENT_PROMPT, opts.runs,
                                                                            opts.warmup, hooked="noop")}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    results["seconds"] = round(time.monotonic() - started, 1)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
