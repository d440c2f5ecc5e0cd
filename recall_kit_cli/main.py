"""Entry point of `recall-kit`. Each command lives in its own module and stays thin."""

from __future__ import annotations

import sys


def main() -> None:
    """Run `recall-kit`: an agent's hook without loading click or the engine, any other command through click."""
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] and _is_agent(sys.argv[2]) and not {"-h", "--help"} & set(sys.argv[3:]):
        # runs on every prompt and tool call: no click, no other command, no engine
        from recall_kit_cli.integrations.hook import run_hook

        sys.exit(run_hook(sys.argv[2], sys.argv[3:]))
    try:
        from recall_kit_cli._app import main as run_app
    except KeyboardInterrupt:
        sys.exit(130)
    run_app()


def _is_agent(name: str) -> bool:
    from recall_kit_cli.integrations.agents import AGENTS  # the agents' table alone: stdlib, and only for `hook`

    return name in AGENTS
