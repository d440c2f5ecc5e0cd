"""The real agent CLIs, Claude Code and Qwen Code, installed from npm at pinned versions and run
offline (`-p`) against a ScriptedAgentServer, with recall-kit's hook in a throwaway HOME.

The CLIs are installed once into ``.agent-clis/`` at the repository's root (kept out of git), and
an install already there at the pinned versions is reused. Without node or npm the tests skip with
the reason; with ``RECALL_KIT_REQUIRE_AGENT_CLIS=1`` (what `.ci/run` sets) they fail instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from integration_support import REPO, Env
from recall_kit.testing import (
    AGENTS,
    CLAUDE_CODE,
    QWEN_CODE,
    AgentRequest,
    ScriptedAgentServer,
    install_agent_clis,
)

CLI_CACHE = Path(os.environ.get("RECALL_KIT_AGENT_CLIS_DIR") or REPO / ".agent-clis")
REQUIRED = os.environ.get("RECALL_KIT_REQUIRE_AGENT_CLIS") == "1"
QWEN_MODEL = "scripted-agent"
# a recalled block as each agent hands it to its model: Qwen Code escapes "<" and ">" in hook context
_BLOCK = re.compile(r"(?:<|&lt;)recalled-memories(?:>|&gt;)(.*?)(?:<|&lt;)/recalled-memories(?:>|&gt;)", re.S)
_REF = re.compile(r"^Reference: (\S+)$", re.M)


def agent_clis() -> dict[str, Path]:
    """The pinned CLIs by agent, installed into CLI_CACHE once (recall_kit.testing.install_agent_clis)."""
    return install_agent_clis(CLI_CACHE)


def settings_file(agent: str, home: Path) -> Path:
    """The agent's user settings file."""
    return home / (".claude" if agent == CLAUDE_CODE else ".qwen") / "settings.json"


def prepare_home(agent: str, home: Path) -> None:
    """What the agent needs in a fresh HOME to run offline: Qwen Code's auth type and model (written
    the way Qwen Code itself rewrites the file, so its own rewrite changes nothing)."""
    if agent == QWEN_CODE:
        path = settings_file(agent, home)
        path.parent.mkdir(parents=True, exist_ok=True)
        settings = {"security": {"auth": {"selectedType": "openai"}}, "model": {"name": QWEN_MODEL}, "$version": 4}
        path.write_text(json.dumps(settings, indent=2) + "\n")


# -- the hook: ONE place that installs and uninstalls it ---------------------------------------
def install_hook(agent: str, env: Env) -> Path:
    """`recall-kit hook install AGENT --user` in ``env``'s HOME, with no --root: the hook works out
    the agent's own memory folders at each prompt. Returns the settings file."""
    done = env.run("hook", "install", agent, "--user")
    assert done.returncode == 0, done.stderr
    return settings_file(agent, Path(env.vars["HOME"]))


def uninstall_hook(agent: str, env: Env) -> Path:
    """`recall-kit hook uninstall AGENT --user`: removes what ``install_hook`` added."""
    done = env.run("hook", "uninstall", agent, "--user")
    assert done.returncode == 0, done.stderr
    return settings_file(agent, Path(env.vars["HOME"]))


# -- running an agent -------------------------------------------------------------------------
@dataclass
class AgentRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def result(self) -> dict[str, Any]:
        """Claude Code's `--output-format json` result."""
        return dict(json.loads(self.stdout))


def agent_env(agent: str, env: Env, server: ScriptedAgentServer) -> dict[str, str]:
    """``env``'s variables plus what points the agent at ``server``, offline."""
    if agent == CLAUDE_CODE:
        extra = {"ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "scripted-key",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
    else:
        extra = {"OPENAI_BASE_URL": server.openai_base_url, "OPENAI_API_KEY": "scripted-key",
                 "OPENAI_MODEL": QWEN_MODEL}
    return {**env.vars, **extra}


def run_agent(
    agent: str, binary: Path, env: Env, project: Path, server: ScriptedAgentServer, prompt: str,
    *, timeout: float = 90, resume: str | None = None, extra: Sequence[str] = (),
) -> AgentRun:
    """One `-p` turn of ``agent`` in ``project`` (``extra``: more arguments for the CLI); Claude Code's
    answer as `--output-format json`."""
    args = [str(binary), "-p", prompt, *extra]
    if agent == CLAUDE_CODE:
        args += ["--output-format", "json"] + (["--resume", resume] if resume else [])
    started = time.monotonic()
    done = subprocess.run(args, cwd=project, env=agent_env(agent, env, server), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return AgentRun(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def git_project(path: Path) -> Path:
    """A `git init` project folder with one file to read; its real path (the agents' slug uses it)."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "notes.txt").write_text("the pool size is 20\n")
    (path / "more.txt").write_text("the timeout is 30 s\n")
    return path.resolve()


# -- what the model received --------------------------------------------------------------------
def recalled_blocks(request: AgentRequest) -> list[tuple[int, str]]:
    """(index of the part, block text) for every recalled-memories block in ``request``."""
    return [(index, match.group(1)) for index, part in enumerate(request.parts)
            for match in _BLOCK.finditer(part.text)]


def refs_in(block: str) -> list[str]:
    """The refs a recalled block delivers."""
    return _REF.findall(block)


def tool_result_index(request: AgentRequest) -> int:
    """The index of the request's last tool result part; -1 when it holds none."""
    results = [index for index, part in enumerate(request.parts) if part.kind == "tool_result"]
    return results[-1] if results else -1
