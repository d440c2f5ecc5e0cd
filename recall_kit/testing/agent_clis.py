"""The real agent CLIs recall-kit is tested and measured against, installed from npm at pinned versions.

``install_agent_clis(folder)`` installs Claude Code and Qwen Code into ``folder`` with npm (once:
an install already there at the pinned versions is reused) and checks that each one runs. Both
run on node 20, though Qwen Code's package asks for node 22. npm's cache and logs go to
``folder/.npm-cache``, never the user's ``~/.npm``.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
from pathlib import Path

from memory_store import RecallKitError

CLAUDE_CODE, QWEN_CODE = "claude-code", "qwen-code"
AGENTS = (CLAUDE_CODE, QWEN_CODE)
AGENT_PACKAGES = {CLAUDE_CODE: ("@anthropic-ai/claude-code", "2.1.197"), QWEN_CODE: ("@qwen-code/qwen-code", "0.24.4")}
BINARIES = {CLAUDE_CODE: "claude", QWEN_CODE: "qwen"}
NPM_INSTALL_TIMEOUT_S = 600


class AgentClisMissing(RecallKitError, RuntimeError):
    """What installing the CLIs needs and this machine lacks (node, npm)."""


class AgentClisBroken(RecallKitError, RuntimeError):
    """npm could not install the CLIs, or an installed CLI does not run."""


def install_agent_clis(folder: Path) -> dict[str, Path]:
    """The pinned CLIs' executables by agent, installed into ``folder`` when they are not there yet.
    AgentClisMissing without node or npm; AgentClisBroken when npm fails or a CLI does not run."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        raise AgentClisMissing(f"{' and '.join(missing)} not found on PATH")
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once install once
        if not all(installed_version(folder, agent) == AGENT_PACKAGES[agent][1] for agent in AGENTS):
            specs = [f"{name}@{version}" for name, version in AGENT_PACKAGES.values()]
            done = subprocess.run(
                ["npm", "install", "--prefix", str(folder), "--cache", str(folder / ".npm-cache"), "--save-exact",
                 "--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error", *specs],
                capture_output=True, text=True, timeout=NPM_INSTALL_TIMEOUT_S,
            )
            if done.returncode != 0:
                tail = " ".join(done.stderr.split())[-500:]
                raise AgentClisBroken(f"npm install {' '.join(specs)} failed: {tail}")
    binaries = {agent: folder / "node_modules" / ".bin" / BINARIES[agent] for agent in AGENTS}
    for agent, binary in binaries.items():
        version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=120)
        if version.returncode != 0 or AGENT_PACKAGES[agent][1] not in version.stdout:
            said = " ".join((version.stdout + version.stderr).split())[-300:]
            raise AgentClisBroken(f"{binary} --version exited {version.returncode}: {said}")
    return binaries


def installed_version(folder: Path, agent: str) -> str | None:
    """The version of ``agent``'s package installed in ``folder``, or None."""
    manifest = folder / "node_modules" / AGENT_PACKAGES[agent][0] / "package.json"
    try:
        return str(json.loads(manifest.read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def project_slug(project: Path) -> str:
    """The agents' per-project folder name: the cwd with every non-alphanumeric character as '-'."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(project))


def agent_memory_folder(agent: str, home: Path, project: Path) -> Path:
    """The agent's own memory folder for ``project``: ~/.claude/projects/<slug>/memory or
    ~/.qwen/projects/<slug>/memory."""
    config = ".claude" if agent == CLAUDE_CODE else ".qwen"
    return home / config / "projects" / project_slug(project) / "memory"
