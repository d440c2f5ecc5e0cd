"""Start-up cost: what `import memory_store`, `import recall_kit` and the CLI's start import, by
`python -X importtime`, beside an older checkout of the repo measured in the same run.

    git worktree add --detach /tmp/old <commit>
    python bench/import_time.py --baseline /tmp/old [--runs 7]

Each figure is the median over ``--runs`` fresh interpreters of the summed top-level import time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {
    "import memory_store": ("import memory_store", "import memory_store"),
    "import recall_kit": ("import recall_kit", "import recall_kit"),
    # before the commands were added explicitly, importing the commands package registered them
    "CLI start, every command registered": (
        "from recall_kit_cli.main import _register; _register()",
        "import recall_kit_cli._app",
    ),
}


def import_ms(code: str, env: dict[str, str], cwd: Path) -> tuple[float, int]:
    # run outside any checkout: `python -c` puts the working folder first on sys.path
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=env, cwd=cwd
    ).stderr
    total, modules = 0, 0
    for line in err.splitlines():
        if not line.startswith("import time:") or line.count("|") < 2:
            continue
        _, cumulative, name = line.split("|", 2)
        if not cumulative.strip().isdigit():
            continue
        modules += 1
        if not name[1:].startswith(" "):  # a top-level import
            total += int(cumulative)
    return total / 1000, modules


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="an older checkout of the repo")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    shim = Path(tempfile.mkdtemp())
    (shim / "recall_kit_cli").symlink_to(Path(args.baseline).resolve() / "cli")  # its CLI's import name
    old_env = dict(os.environ, PYTHONPATH=f"{shim}{os.pathsep}{Path(args.baseline).resolve()}")
    new_env = dict(os.environ)
    print(f"{'':40} {'before':>16} {'after':>16}")
    for label, (old_code, new_code) in CASES.items():
        old = [import_ms(old_code, old_env, shim) for _ in range(args.runs)]
        new = [import_ms(new_code, new_env, shim) for _ in range(args.runs)]
        before = f"{statistics.median(o[0] for o in old):.0f} ms ({old[0][1]} mod)"
        after = f"{statistics.median(n[0] for n in new):.0f} ms ({new[0][1]} mod)"
        print(f"{label:40} {before:>16} {after:>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
