"""Entry point of `recall-kit`. Each command lives in its own module and stays thin."""

from __future__ import annotations

import sys


def main() -> None:
    """Run `recall-kit`: the Claude Code hook without loading click or the engine, any other command through click."""
    if sys.argv[1:3] == ["hook", "claude-code"] and not {"-h", "--help"} & set(sys.argv[3:]):
        # runs on every prompt and tool call: no click, no other command, no engine
        from recall_kit_cli.integrations.hook import run_claude_code

        sys.exit(run_claude_code(sys.argv[3:]))
    try:
        from recall_kit_cli._app import main as run_app
    except KeyboardInterrupt:
        sys.exit(130)
    run_app()
