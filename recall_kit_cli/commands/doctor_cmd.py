"""`recall-kit doctor`: what is wrong in the memory folders a prompt here recalls from, and the one
repair that is safe to make (the MEMORY.md index), only with --fix, a diff first and a backup.

Exit status: 0 nothing found, 1 findings (left after --fix), 2 bad input (one line on stderr).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

import click

from memory_store import MemoryStoreError, RecallKitError, shown_ref
from recall_kit.health import (
    FINDING_KINDS,
    KIND_TITLES,
    Finding,
    HealthReport,
    IndexRepair,
    MODEL_CHECK_MAX_CALLS,
    ModelReview,
    apply_repair,
    check_health,
    plan_repairs,
    review_near_duplicates,
)
from recall_kit_cli._config_file import load, model_off_reason, root_option
from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, echo, echo_json, warn
from recall_kit_cli.integrations.doctor_plan import doctor_plan, recall_history
from recall_kit_cli.integrations.doctor_record import record


@click.command("doctor", cls=HelpCommand)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.option("--fix", is_flag=True, help="Mend MEMORY.md: remove dead links, add missing entries (diff first, backup).")
@click.option("--yes", is_flag=True, help="With --fix: write without asking.")
@click.option("--model-check", is_flag=True,
              help=f"Ask the configured model whether near-duplicates conflict, and for a merge (at most {MODEL_CHECK_MAX_CALLS} calls; never written).")
@click.pass_context
def doctor(ctx: click.Context, roots: tuple[str, ...], as_json: bool, fix: bool, yes: bool, model_check: bool) -> None:
    """Check memory folders: duplicates, stale references, index drift, secrets, unreachable, unused, bad files.

    Without --root: the folders a prompt here recalls from (every agent's) and the configured roots.
    Nothing changes without --fix, which mends only MEMORY.md's dead links and missing entries.

    \b
    Examples:
      recall-kit doctor      recall-kit doctor --fix      recall-kit doctor --json
    """
    if yes and not fix:
        raise InputError("--yes goes with --fix (it answers the question --fix asks)")
    settings = load(roots=roots or None)
    selector = settings.selector
    if model_check:
        off = model_off_reason(selector)
        if off is not None:
            raise InputError(f"--model-check needs the selector model: {off}")
    given = settings.roots.value if roots else ()
    configured = () if roots or settings.roots.value is None else settings.roots.value
    try:
        planned = doctor_plan(os.getcwd(), os.environ, given=given or (), configured=configured)
        history, trail_note = recall_history(os.environ)
    except RecallKitError as exc:
        raise InputError(str(exc)) from None

    def checked() -> HealthReport:
        """A check of the planned folders, kept for `stats` and `hook status`."""
        try:
            report = check_health(planned.plan, history=history, cache_dir=settings.cache_dir.value)
        except RecallKitError as exc:
            raise InputError(str(exc)) from None
        try:
            record(report, os.environ)
        except (RecallKitError, OSError) as exc:
            warn(f"doctor's record for `stats` not kept: {clean(exc)}")
        return report

    report = checked()
    notes = [*planned.notes, *([trail_note] if trail_note else []), *report.notes]
    review = _model_review(report, selector) if model_check else None
    repairs = plan_repairs(report) if fix else []
    if as_json:
        payload: dict[str, Any] = report.to_json()
        payload["notes"] = notes
        if review is not None:
            payload["model_check"] = _review_json(review)
        left = report
        if fix:
            payload["fix"] = [_repair_json(r, *(_write(r) if yes else (None, "not written: --json writes only with --yes")))
                              for r in repairs]
            if any(written["written"] for written in payload["fix"]):
                left = checked()  # what it wrote is judged as any index is
            payload["left"] = {"counts": left.counts(), "findings": [f.to_json() for f in left.findings]}
        echo_json(payload)
    else:
        _print_report(report, notes)
        if review is not None:
            _print_review(review)
        left = _fix(report, repairs, yes, checked) if fix else report
    if left.findings:
        ctx.exit(1)


# --- the report as text ----------------------------------------------------------------------------


def _print_report(report: HealthReport, notes: list[str]) -> None:
    counts = report.counts()
    memories = sum(root.memories for root in report.roots)
    total = sum(counts.values())
    head = f"doctor: {total} finding{'s' if total != 1 else ''} in {memories} memories, {len(report.roots)} folder{'s' if len(report.roots) != 1 else ''}"
    echo(head, "  " + " · ".join(f"{KIND_TITLES[kind]} {counts[kind]}" for kind in FINDING_KINDS))
    for kind in FINDING_KINDS:
        mine = [f for f in report.findings if f.kind == kind]
        if not mine:
            continue
        echo("", f"{KIND_TITLES[kind]} ({len(mine)})")
        for finding in mine:
            echo(*_finding_lines(finding))
    echo("", "folders:")
    for root in report.roots:
        reader = f", its index read as {root.reader} reads it" if root.reader else ""
        project = f", references against {root.project}" if root.project else ""
        echo(clean(f"  {root.kind} {root.path}: {root.memories} memories, {root.index_files} MEMORY.md{reader}{project}"))
    if notes:
        echo("", "not checked:" if any("not judged" in n or "not checked" in n for n in notes) else "notes:")
        echo(*(clean(f"  {note}") for note in notes))


def _finding_lines(finding: Finding) -> list[str]:
    where = finding.files[0] + (f":{finding.line}" if finding.line else "")
    lines = [clean(f"  {where}"), clean(f"    {finding.message}"), clean(f"    → {finding.action}")]
    return lines


def _model_review(report: HealthReport, selector: Any) -> ModelReview:
    try:
        return review_near_duplicates(report, selector)
    except RecallKitError as exc:
        raise InputError(f"--model-check: {exc}") from None


def _print_review(review: ModelReview) -> None:
    asked = f"{review.calls} model call{'s' if review.calls != 1 else ''} to {review.model}"
    rest = f"; {review.not_asked} more group(s) not asked (at most {MODEL_CHECK_MAX_CALLS} calls)" if review.not_asked else ""
    echo("", f"model check ({clean(asked)}{rest}; nothing is written):")
    for proposal in review.proposals:
        echo(clean(f"  {', '.join(proposal.refs)}"))
        if proposal.failure is not None:
            echo(clean(f"    no proposal: {proposal.failure}"))
            continue
        verdict = "they conflict" if proposal.conflict else "no conflict"
        echo(clean(f"    {verdict}: {proposal.explanation}"))
        echo(*(clean(f"    {line}") for line in proposal.diff))
        if len(proposal.refs) > 1:
            echo(clean(f"    then remove the rest: {'; '.join('recall-kit rm ' + shlex.quote(shown_ref(ref)) for ref in proposal.refs[1:])}"))


def _review_json(review: ModelReview) -> dict[str, Any]:
    return {
        "model": review.model, "calls": review.calls, "not_asked": review.not_asked, "max_calls": MODEL_CHECK_MAX_CALLS,
        "proposals": [
            {"refs": list(p.refs), "files": list(p.files), "conflict": p.conflict, "explanation": p.explanation,
             "merged": p.merged, "diff": list(p.diff), "failure": p.failure}
            for p in review.proposals
        ],
    }


# --- the repair -----------------------------------------------------------------------------------


def _fix(report: HealthReport, repairs: list[IndexRepair], yes: bool, checked: Callable[[], HealthReport]) -> HealthReport:
    """Show each repair's diff, ask (or take --yes), write, then check again: the findings left,
    those in what it wrote among them."""
    fixable = sum(1 for f in report.findings if f.fixable)
    if not repairs:
        echo("", f"--fix: nothing to mend ({fixable} fixable findings; only MEMORY.md's dead links and missing entries are mended)")
        return report
    echo("", f"--fix would change {len(repairs)} index file{'s' if len(repairs) != 1 else ''}:")
    for repair in repairs:
        echo(*(clean(line) for line in repair.diff()))
    if not yes:
        if not sys.stdin.isatty():
            echo("nothing written: not asked on a terminal (pass --yes to write without asking)")
            return report
        if not click.confirm(f"Write {'these changes' if len(repairs) > 1 else 'this change'}?", default=False):
            echo("nothing written")
            return report
    written = False
    for repair in repairs:
        backup, error = _write(repair)
        if error is not None:
            echo(f"recall-kit: not mended: {clean(error)}", err=True)  # a refusal: as docs/security.md shows it
        else:
            written = True
            echo(clean(f"mended {repair.path} (the old one is kept as {backup})"))
    left = checked() if written else report
    before = {_identity(f) for f in report.findings}
    new = [f for f in left.findings if _identity(f) not in before]
    if new:
        echo("", f"found on checking again ({len(new)}):")
        for finding in new:
            echo(*_finding_lines(finding))
    echo(f"{len(left.findings)} finding{'s' if len(left.findings) != 1 else ''} left")
    return left


def _identity(finding: Finding) -> tuple[object, ...]:
    return finding.kind, finding.files, finding.line, finding.message


def _write(repair: IndexRepair) -> tuple[str | None, str | None]:
    """(backup path, None) once written; (None, why not) when the store refused."""
    try:
        return str(apply_repair(repair)), None
    except MemoryStoreError as exc:
        return None, str(exc)


def _repair_json(repair: IndexRepair, backup: str | None, error: str | None) -> dict[str, Any]:
    return {
        "path": repair.path, "removed_lines": list(repair.removed_lines), "added": list(repair.added),
        "diff": repair.diff(), "written": backup is not None, "backup": backup, "error": error,
    }
