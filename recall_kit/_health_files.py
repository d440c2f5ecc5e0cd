"""The checks of one memory file's text: secrets, and references to a project that no longer has them;
and the files the store skips, as ``recall-kit validate`` reports them."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from types import MappingProxyType

from memory_store import SkippedFile, shown_ref
from recall_kit._health_project import Project
from recall_kit._health_cache import TextChecks
from recall_kit._health_text import Reference, references, secret_columns, shown_line
from recall_kit._health_types import Finding

_RUNNER_FILES = {"make": "Makefile", "just": "justfile", "npm": "package.json"}


# Claude Code writes its session's id into every memory it saves (``originSessionId: <uuid>``); a
# UUID looks random to the scrubber, and that one line is the agent's bookkeeping, not the memory's text.
_SESSION_ID_LINE = re.compile(r"^\s*originSessionId:\s*[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}\s*$")


def text_checks(text: str) -> TextChecks:
    """What doctor reads in one memory file's text: the lines learning's scrubber blanks (but Claude
    Code's session id line), the references it names, and each naming line as doctor may show it."""
    lines = text.split("\n")
    found = tuple((line, column) for line, column in secret_columns(text) if not _SESSION_ID_LINE.match(lines[line - 1]))
    named = tuple(references(text))
    return TextChecks(found, named, {ref.line: shown_line(lines[ref.line - 1]) for ref in named})


def secret_findings(path: str, ref: str, secrets: Iterable[tuple[int, int]]) -> list[Finding]:
    """One finding per (line, column) at which learning's scrubber blanks something (a memory's
    ``TextChecks.secrets``, or an index's ``secret_columns``); never what."""
    return [
        Finding(
            "secret", (path,),
            f"{ref} line {line} holds what looks like a secret at column {column} (a key, token, password, "
            "card number, e-mail address or random-looking string, as learning's scrubber sees it); it is not shown here.",
            "Move the secret out of the memory (a secret manager, an environment variable) and keep only where to find it.",
            refs=(ref,), line=line, detail=MappingProxyType({"column": column}),
        )
        for line, column in secrets
    ]


def stale_findings(path: str, ref: str, checks: TextChecks, project: Project) -> list[Finding]:
    """One finding per path, command or symbol the memory names that ``project`` does not have."""
    findings = []
    for reference in checks.references:
        missing = _missing(reference, project)
        if missing is None:
            continue
        shown = checks.shown.get(reference.line, "")
        findings.append(Finding(
            "stale_reference", (path,),
            f"{ref} line {reference.line} names {missing}: \"{shown}\".",
            "Check the memory against the code and update or remove it (a memory naming a file, command or "
            f"symbol is a claim it existed when it was written): recall-kit show {shlex.quote(shown_ref(ref))}.",
            refs=(ref,), line=reference.line,
            detail=MappingProxyType({"reference": reference.name, "what": reference.kind, "runner": reference.runner,
                                     "text": shown}),
        ))
    return findings


def _missing(reference: Reference, project: Project) -> str | None:
    """What the project lacks of ``reference``, in words; None when it has it or cannot tell."""
    top = project.top
    if reference.kind == "path":
        if project.has_path(reference.name) is False:
            what = "folder" if reference.name.endswith("/") else "file"
            return f"the {what} {reference.name}, which no longer exists in {top}"
        return None
    if reference.kind == "command":
        known = project.has_command(reference.runner, reference.name)
        runs = f"{reference.runner} {'run ' if reference.runner == 'npm' else ''}{reference.name}"
        if known is None:
            return f"`{runs}`, but {top} has no {_RUNNER_FILES[reference.runner]}"
        return None if known else f"`{runs}`, which no {_RUNNER_FILES[reference.runner]} in {top} defines"
    if project.has_identifier(reference.name) is False:
        return f"the symbol {reference.name}, which no file in {top} uses any more"
    return None


def bad_file_findings(errors: Sequence[SkippedFile], root_path: str) -> list[Finding]:
    """What ``recall-kit validate`` reports for the folder, one finding per skipped file."""
    return [
        Finding(
            "bad_file", (f"{root_path}/{err.path}" if err.path != "." else root_path,),
            f"{err.scope}/{err.path} is skipped: {err.reason}.",
            "Fix or remove the file; until then no agent recalls it (recall-kit validate shows the same).",
            refs=(f"{err.scope}/{err.path}",), detail=MappingProxyType({"reason": err.reason}),
        )
        for err in errors
    ]
