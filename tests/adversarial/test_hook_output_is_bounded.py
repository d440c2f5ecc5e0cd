"""What the hook hands Claude Code is bounded whatever the memories hold (Claude Code caps a hook's
context at HOOK_CONTEXT_MAX_CHARS), and what it is handed is bounded in effect: a prompt of
megabytes still gets the recall its words ask for."""

from __future__ import annotations

import json
from pathlib import Path

from integration_support import DEPLOY_PROMPT, Daemon, Env, daemon, env, memories  # noqa: F401

from recall_kit.limits import HOOK_CONTEXT_MAX_CHARS, PROTOCOL_MAX_LINE_BYTES, RENDER_MAX_CHARS


def _prompt(prompt: str, session: str = "cc-1") -> dict[str, object]:
    return {"session_id": session, "cwd": "/tmp", "hook_event_name": "UserPromptSubmit", "prompt": prompt}


def _context(result: object, env: Env) -> str:
    stdout = getattr(result, "stdout")
    assert stdout, env.hook_log.read_text() if env.hook_log.exists() else "no hook.log"
    context = json.loads(stdout)["hookSpecificOutput"]["additionalContext"]
    assert isinstance(context, str)
    return context


def test_a_memory_with_a_240_kb_description_fits_claude_codes_cap(env: Env, daemon: Daemon, tmp_path: Path) -> None:
    root = tmp_path / "huge"
    (root / "project").mkdir(parents=True)
    description = "zanzibar ferry timetable " * 9_600  # 240,000 characters on one line
    (root / "project" / "ferry.md").write_text(
        f"---\nname: Zanzibar ferry timetable\ndescription: {description}\ntype: project\n---\n"
        + "The ferry leaves at nine. " * 400 + "\n"
    )
    context = _context(env.hook(_prompt("when does the zanzibar ferry leave?"), root), env)
    assert len(context) <= RENDER_MAX_CHARS <= HOOK_CONTEXT_MAX_CHARS
    assert "Title: Zanzibar ferry timetable" in context and "Reference: huge/project/ferry.md" in context
    assert "[... truncated:" in context  # the cut says so
    assert context.rstrip().endswith("</recalled-memories>")  # whole: not cut mid-block by Claude Code


def test_a_prompt_over_a_mebibyte_still_gets_its_recall(env: Env, daemon: Daemon, memories: Path) -> None:
    # the output of a failed deploy pasted below the question: 2.4 MB, over the protocol's 1 MiB line
    log = "".join(
        f"2026-12-01T10:{i % 60:02d}:{i % 60:02d}Z app[{i % 9:x}e8] ord [info] fly deploy ledgerline: "
        f"release command alembic upgrade head, machine {i % 5} healthy\n"
        for i in range(20_000)
    )
    prompt = f"{DEPLOY_PROMPT} this is what fly printed last time:\n{log}"
    assert len(prompt.encode()) > 2 * PROTOCOL_MAX_LINE_BYTES
    context = _context(env.hook(_prompt(prompt), memories), env)
    assert "Deploying ledgerline to Fly.io" in context
