"""Start-up cost, this tree beside an older checkout in the same run: what each entry point imports
(``python -X importtime``), the wall time of `recall-kit --help` and of a cached `query` as a ratio
to ``python -c 'import click'``, and the Claude Code hook over a warm daemon.

    git worktree add --detach /tmp/old COMMIT
    .venv/bin/python bench/import_time.py --baseline /tmp/old [--runs 9] [--hook-runs 200]
    .venv/bin/python bench/import_time.py --frozen-sizes 300,1000,3000   # where FROZEN_MAX_POSTINGS comes from

Both sides run on this interpreter and its packages; the baseline's own code comes first on
PYTHONPATH. Every process is timed alternately, one side then the other, with compiled bytecode
(both trees are compiled first; PYTHONDONTWRITEBYTECODE is dropped), in a private HOME, config,
cache and runtime folder per side. Figures are medians; ratios are of medians; the load average is
printed before and after.
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

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("memory_store", "recall_kit", "recall_kit_bench", "recall_kit_cli")
RECALL_KIT = str(Path(sys.executable).with_name("recall-kit"))
PROMPT = "how do I deploy ledgerline to production?"
IMPORT_CASES = {
    "import memory_store": "import memory_store",
    "import recall_kit": "import recall_kit",
    "from recall_kit import ConfigError": "from recall_kit import ConfigError",
    "import recall_kit.settings": "import recall_kit.settings",
    "recall-kit --help": "import sys; sys.argv = ['recall-kit', '--help']; from recall_kit_cli.main import main; main()",
    "recall-kit query (cache warm)": (
        f"import sys; sys.argv = ['recall-kit', 'query', {PROMPT!r}, '--root', {str(REPO / 'examples' / 'memories')!r}]; "
        "from recall_kit_cli.main import main; main()"
    ),
}
HEAVY = ("numpy", "httpx", "yaml", "watchdog", "rapidfuzz")


def side_env(home: Path, code: Path | None) -> dict[str, str]:
    """A private HOME, config, cache and runtime folder; ``code`` first on PYTHONPATH (None: this tree)."""
    for sub in ("config", "cache", "state", "run"):
        (home / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    env = {
        "PATH": os.environ["PATH"], "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_CACHE_HOME": str(home / "cache"), "XDG_STATE_HOME": str(home / "state"), "XDG_RUNTIME_DIR": str(home / "run"),
        "RECALL_KIT_CACHE_DIR": str(home / "cache" / "recall-kit"),
    }
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def imported(code: str, env: dict[str, str]) -> tuple[float, int, list[str]]:
    """Summed top-level import time (ms), modules imported, and which of HEAVY were among them."""
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env, cwd="/"
    ).stderr
    total, names = 0, []
    for line in err.splitlines():
        if not line.startswith("import time:") or line.count("|") < 2:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue
        names.append(name.strip())
        if not name[1:].startswith(" "):  # a top-level import
            total += int(cumulative)
    return total / 1000, len(names), sorted({n.split(".")[0] for n in names} & set(HEAVY))


def wall_ms(args: list[str], env: dict[str, str], stdin: bytes | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(args, input=stdin, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - started) * 1000


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def compare(baseline: Path, runs: int, hook_runs: int, base: Path) -> dict[str, object]:
    sides = {"before": side_env(base / "before", baseline), "after": side_env(base / "after", None)}
    for tree in (baseline, REPO):
        subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=tree, check=True, stdout=subprocess.DEVNULL)
    memories = str(REPO / "examples" / "memories")
    result: dict[str, object] = {"load_before": load()}
    imports: dict[str, dict[str, str]] = {}
    for label, code in IMPORT_CASES.items():
        for env in sides.values():
            imported(code, env)  # untimed: bytecode and the index cache warm
        row = {}
        for side, env in sides.items():
            found = [imported(code, env) for _ in range(runs)]
            heavy = ", ".join(found[0][2]) or "none of them"
            row[side] = f"{statistics.median(f[0] for f in found):.0f} ms, {found[0][1]} modules ({heavy})"
        imports[label] = row
    result["imports"] = imports
    commands = {
        "python -c 'import click'": [sys.executable, "-c", "import click"],
        "recall-kit --help": [RECALL_KIT, "--help"],
        "recall-kit query (cache warm)": [RECALL_KIT, "query", PROMPT, "--root", memories],
    }
    times: dict[tuple[str, str], list[float]] = {(c, s): [] for c in commands for s in sides}
    for args in commands.values():
        for env in sides.values():
            wall_ms(args, env)  # untimed: fills each side's index cache
    for _ in range(runs):
        for command, args in commands.items():
            for side, env in sides.items():
                times[command, side].append(wall_ms(args, env))
    click_ms = {side: statistics.median(times["python -c 'import click'", side]) for side in sides}
    result["wall"] = {
        command: {side: f"{statistics.median(times[command, side]):.1f} ms = {statistics.median(times[command, side]) / click_ms[side]:.2f}x click"
                  for side in sides}
        for command in commands
    }
    if hook_runs:
        result["hook"] = hook(sides, hook_runs, memories)
    result["load_after"] = load()
    return result


def hook(sides: dict[str, dict[str, str]], runs: int, memories: str) -> dict[str, object]:
    """bench/bench_hook.py's warm calls (a prompt, then a tool result, alternately), both sides interleaved."""
    prompts = ["how do I deploy ledgerline to production?", "which database migrations need approval?",
               "how do we release tidepool?", "what are the code review rules?"]
    args = [RECALL_KIT, "hook", "claude-code", "--root", memories]
    warm: dict[str, list[float]] = {side: [] for side in sides}
    try:
        for side, env in sides.items():  # starts each side's daemon and fills its index
            for _ in range(3):
                wall_ms(args, env, json.dumps({"session_id": "w", "hook_event_name": "UserPromptSubmit", "prompt": prompts[0]}).encode())
        for i in range(runs):
            event = {"session_id": f"s{i % 20}", "hook_event_name": "UserPromptSubmit", "prompt": prompts[i % len(prompts)]}
            if i % 2:
                event = {"session_id": f"s{i % 20}", "hook_event_name": "PostToolUse", "tool_name": "Bash", "tool_response": {}}
            for side, env in sides.items():
                warm[side].append(wall_ms(args, env, json.dumps(event).encode()))
    finally:
        for env in sides.values():
            _stop_daemon(Path(env["XDG_RUNTIME_DIR"]))
    return {side: f"p50 {pct(v, 0.5):.1f} ms, p99 {pct(v, 0.99):.1f} ms ({len(v)} calls)" for side, v in warm.items()}


def _stop_daemon(run: Path) -> None:
    try:
        os.kill(int((run / "recall-kit" / "daemon.lock").read_text().strip()), signal.SIGTERM)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        pass


def frozen_sizes(sizes: list[int], runs: int, base: Path) -> dict[str, object]:
    """A cached one-shot query on generated stores, its index read by FrozenIndex or by FieldIndex
    (the threshold forced each way in the child), alternately: what FROZEN_MAX_POSTINGS comes from."""
    sys.path.insert(0, str(REPO / "bench"))
    from generated_store import write_store

    env = side_env(base / "sizes", None)
    prompt = "how do we deploy the payment service to production"
    result: dict[str, object] = {"load_before": load()}
    for size in sizes:
        store = base / f"store-{size}"
        write_store(store, size)
        ways = {}
        for way, limit in (("FrozenIndex", 10**12), ("FieldIndex", -1)):
            ways[way] = (
                "import sys; import recall_kit._open as o; "
                f"o.FROZEN_MAX_POSTINGS = {limit}; sys.argv = ['recall-kit', 'query', {prompt!r}, '--root', {str(store)!r}, "
                "'--fast-only']; from recall_kit_cli.main import main; main()"
            )
        wall_ms([sys.executable, "-c", ways["FieldIndex"]], env)  # untimed: writes the cache
        postings = subprocess.run(
            [sys.executable, "-c", "import sys, marshal; from recall_kit._cache_file import load; from pathlib import Path; "
             f"c = load(next(Path({env['RECALL_KIT_CACHE_DIR']!r}).glob('index-*.bin'))); "
             "from recall_kit._frozen_index import FrozenIndex; "
             "a = {k: c.sections[o:o + n] for k, (o, n) in c.table['arrays'].items()}; "
             "print(FrozenIndex.postings_in({**c.table['index'], **a}))"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()
        times: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(runs):
            for way, code in ways.items():
                times[way].append(wall_ms([sys.executable, "-c", code], env))
        shutil.rmtree(Path(env["RECALL_KIT_CACHE_DIR"]), ignore_errors=True)
        result[f"{size} memories, {postings} postings"] = {way: f"{statistics.median(v):.1f} ms" for way, v in times.items()}
    result["load_after"] = load()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="an older checkout of the repo (a git worktree)")
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--hook-runs", type=int, default=200, help="warm hook calls per side (0: none)")
    parser.add_argument("--frozen-sizes", help="instead: comma-separated store sizes for the FrozenIndex threshold")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    base = Path(tempfile.mkdtemp(prefix="recall-kit-startup-"))
    try:
        if args.frozen_sizes:
            result = frozen_sizes([int(s) for s in args.frozen_sizes.split(",")], args.runs, base)
        elif args.baseline:
            result = compare(Path(args.baseline).resolve(), args.runs, args.hook_runs, base)
        else:
            parser.error("--baseline or --frozen-sizes")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
