"""What ``recall-kit doctor`` checks from here: the folders, who reads their index, the project their
references point into, and the recall trail's record of past prompts.

With no ``--root``, the folders are those a prompt in the current folder recalls from, by the hook's
own rules (``agents``: every agent's, each agent's folders one recall set), plus the configured
roots (one set of their own). Each agent folder's ``MEMORY.md`` is judged by that agent's record
(``index_lines``, ``index_chars``); a ``--root`` folder that is one of them too. References resolve
against the git top: of the folder itself when it lies in a work tree (a team folder), else of the
current folder; a user-level folder (about the user, not this project) is not checked for them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memory_store import RecallKitError, UnsafePathError, root_labels
from recall_kit.health import HealthPlan, HealthRoot, IndexReader, RecalledPrompt, RecallSet
from recall_kit_cli.integrations._roots import check_root_set
from recall_kit_cli.integrations._runtime import runtime_paths
from recall_kit_cli.integrations.agents import AGENTS, Agent, folders_at, git_top
from recall_kit_cli.integrations.trail import read_trail

_TRAIL_PROMPTS = 1_000_000  # every prompt the trail holds (its files are bounded: trail.py)


class NothingToCheck(RecallKitError):
    """No folder to check: no agent keeps memories for the current folder and no root is configured."""


@dataclass(frozen=True, slots=True)
class Planned:
    """The plan, and what was left out of it and why (one line each)."""

    plan: HealthPlan
    notes: tuple[str, ...]


def agent_folders(cwd: str, environ: Mapping[str, str]) -> list[tuple[Agent, str, str]]:
    """(agent, kind, path) of every existing memory folder a prompt in ``cwd`` recalls from."""
    return [(agent, folder.kind, folder.path) for agent in AGENTS.values()
            for folder in folders_at(agent, cwd, environ) if os.path.isdir(folder.path)]


def doctor_plan(
    cwd: str, environ: Mapping[str, str], *, given: Sequence[str] = (), configured: Sequence[str] = (),
) -> Planned:
    """The folders to check from ``cwd``: the ``given`` ones (``--root``), else the agents' and the
    ``configured`` roots. NothingToCheck when there are none; RecallKitError, in one line, for a root
    set no store should open (the file system root, a home folder, 50,000 entries)."""
    folders = agent_folders(cwd, environ)
    readers = {os.path.realpath(path): (agent, kind) for agent, kind, path in folders}
    cwd_top = git_top(cwd)
    notes: list[str] = []
    roots: dict[str, HealthRoot] = {}
    sets: list[RecallSet] = []

    def add(path: str, kind: str, agent: Agent | None) -> None:
        path = os.path.abspath(path)
        known = readers.get(os.path.realpath(path))
        if agent is None and known is not None:
            agent, kind = known[0], known[1] if kind in ("--root", "configured") else kind
        reader = IndexReader(agent.title, agent.index_lines, agent.index_chars) if agent is not None else None
        project = None if kind == "user" else (git_top(path) or cwd_top)
        roots.setdefault(path, HealthRoot(path, kind, reader, project))

    home = environ.get("HOME")
    if given:
        for path in given:
            add(path, "--root", None)
        _checked(list(roots), home)
        sets.append(RecallSet("--root", tuple(roots)))
    else:
        for agent in AGENTS.values():
            mine = [path for a, _, path in folders if a is agent]
            if not mine:
                continue
            try:
                _checked(mine, home)
            except RecallKitError as exc:
                notes.append(f"{agent.title}'s folders are not checked: {exc}")
                continue
            for a, kind, path in folders:
                if a is agent:
                    add(path, kind, agent)
            sets.append(RecallSet(agent.title, tuple(os.path.abspath(p) for p in mine)))
        existing = [os.path.abspath(p) for p in configured if os.path.isdir(p)]
        if existing:
            _checked(existing, home)
            for path in existing:
                add(path, "configured", None)
            sets.append(RecallSet("configured roots", tuple(existing)))
    if not roots:
        raise NothingToCheck(
            f"no memory folder to check: no agent keeps memories for {cwd} yet and no roots are configured "
            "(pass --root DIR)"
        )
    return Planned(HealthPlan(tuple(roots.values()), tuple(sets)), tuple(notes))


def _checked(paths: list[str], home: str | None) -> None:
    check_root_set(paths, home=home)


def recall_history(environ: Mapping[str, str]) -> tuple[list[RecalledPrompt] | None, str | None]:
    """The trail's prompts, each with the (folder, path) of every memory delivered for it; None and
    why when there is no trail to read (turned off, or a file that is not the user's own)."""
    if environ.get("RECALL_KIT_TRAIL") == "0":
        return None, "never recalled: not judged (the recall trail is off: RECALL_KIT_TRAIL=0)"
    try:
        prompts = read_trail(runtime_paths(dict(environ)).trail, limit=_TRAIL_PROMPTS)
    except (UnsafePathError, OSError) as exc:
        return None, f"never recalled: not judged (the recall trail cannot be read: {exc})"
    history = []
    for prompt in prompts:
        if prompt.refused is not None or not prompt.roots:
            continue
        try:
            labels = dict(zip(root_labels(*prompt.roots), (os.path.abspath(r) for r in prompt.roots)))
        except RecallKitError:
            continue
        delivered = set()
        for delivery in prompt.deliveries:
            if delivery.get("point") == "discarded":
                continue
            for ref in delivery.get("refs") or ():
                label, _, rel = str(ref).partition("/")
                if label in labels and rel:
                    delivered.add((labels[label], rel))
        history.append(RecalledPrompt(prompt.time, tuple(labels.values()), frozenset(delivered)))
    return history, None


def doctor_summary(cwd: str, environ: Mapping[str, str]) -> str:
    """``doctor``'s counts at its last check of the folders a prompt in ``cwd`` recalls from, as one
    line (``hook status``): read from its record, never checked again here (that costs seconds)."""
    from recall_kit_cli.integrations.doctor_record import summary

    return summary(list(dict.fromkeys(path for _, _, path in agent_folders(cwd, environ))), environ)
