"""Memories the fast stage cannot deliver, and memories the recall trail shows were never delivered.

Unreachable: a memory's own name and description, as the prompt, through the real fast stage of
its recall set (``FastHeuristic.rank``, the gate's ``select`` and ``explain``). When the memory is
not among what is delivered, the gate's own explanation says why: it holds the memory back (too few
specific words, too little of the prompt covered), or a twin ranks above it and takes its place.

Never recalled: the rule for "enough prompts" is ``NEVER_RECALLED_MIN_PROMPTS`` prompts recalled
from the memory's folder since the memory was last written. A memory one prompt in a hundred needs
would then have been delivered at least once with a chance of 1 - 0.99^300 = 95%; below that many,
doctor does not judge it.
"""

from __future__ import annotations

import bisect
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from memory_store import MemoryDoc, shown_ref
from recall_kit._gate import GateVerdict
from recall_kit._health_similar import similar_pairs
from recall_kit._health_types import Finding, RecalledPrompt
from recall_kit._heuristic import FastHeuristic
from recall_kit._index import TermPostings
from recall_kit._query import is_generic
from recall_kit._secrets import scrub_secrets
from recall_kit._tokenize import analyze, is_cjk_term
from recall_kit.limits import bounded_prompt

NEVER_RECALLED_MIN_PROMPTS = 300
# Up to this many memories in a recall set, every memory's own head goes through the fast stage
# (about 2 ms each at 1,000 memories, 10 ms at 10,000: bench/bench_doctor.py); a larger set sends
# only the memories a screen finds at risk. On every dataset of bench/datasets, locomo-dev and
# generated stores of 1,000 (with and without planted duplicates), the screen found every memory
# the exhaustive run found, at a thirtieth of its cost (bench/bench_doctor.py, 2026-12-02).
UNREACHABLE_EXACT_MAX = 500
# And at most this many go through it in one run, the newest first: 4,000 memories written from one
# template were all at risk and took 13 s on every run, 20,000 took 270 s. The rest are counted in a note.
UNREACHABLE_MAX_TRIED = 1_000
TWIN_SCREEN = 0.5  # head-only cosine from which another memory may take a memory's place
NEIGHBOUR_SCREEN = 0.3  # whole-memory cosine from which another's body may outrank a memory's head
SUGGESTED_WORDS = 4
_HOLDING_RULES = {"specific_terms", "head_terms", "coverage", "phrase_terms", "phrase_coverage", "tie"}


@dataclass(frozen=True, slots=True)
class ReachResult:
    """The unreachable findings of one recall set, and how many memories went through the fast stage."""

    findings: list[Finding]
    tried: int
    screened: bool
    untried: int = 0  # at risk, but past UNREACHABLE_MAX_TRIED: not judged this run


def own_prompt(doc: MemoryDoc) -> str:
    """The prompt a memory should answer whatever else the store holds: its name and description."""
    return bounded_prompt(f"{doc.name} {doc.description}")


def unreachable(
    heuristic: FastHeuristic, docs: Sequence[MemoryDoc], postings: TermPostings, root_of: Mapping[str, str],
    *, exact_max: int = UNREACHABLE_EXACT_MAX,
) -> ReachResult:
    """The memories of ``docs`` that the fast stage does not deliver for their own name and description.
    ``root_of``: ref -> the absolute path of its file."""
    df = _doc_freqs(postings)
    screened = len(docs) > exact_max
    chosen = _at_risk(docs, postings) if screened else list(docs)
    untried = max(0, len(chosen) - UNREACHABLE_MAX_TRIED)
    if untried:  # the newest first: what the agent wrote lately is what no run has judged yet
        chosen = sorted(chosen, key=lambda d: (-d.mtime, d.ref))[:UNREACHABLE_MAX_TRIED]
    findings = []
    for doc in chosen:
        prompt = own_prompt(doc)
        ranked, evidence, _ = heuristic.rank(prompt)
        delivered = heuristic.gate.select(ranked, evidence)
        if any(scored.doc.ref == doc.ref for scored in delivered):
            continue
        verdicts = heuristic.gate.explain(ranked, evidence)
        mine = next((v for v in verdicts if v.scored.doc.ref == doc.ref), None)
        findings.append(_finding(doc, mine, [s.doc for s in delivered], verdicts, df, root_of))
    return ReachResult(findings, len(chosen), screened, untried)


def _at_risk(docs: Sequence[MemoryDoc], postings: TermPostings) -> list[MemoryDoc]:
    """The memories a screen cannot clear: fewer specific head words than the gate wants, a memory
    whose head says much the same (a twin may rank above it), or whose whole text comes close (its
    body may outrank the head), or one that learned a suppressor (it may hold itself back)."""
    pairs = similar_pairs(postings, TWIN_SCREEN, head_weight=1.0, body_weight=0.0)
    pairs += similar_pairs(postings, NEIGHBOUR_SCREEN)
    twins = {ref for pair in pairs for ref in (pair.first, pair.second)}
    risky = []
    for doc in docs:
        words = {t.term for t in analyze(f"{doc.name} {doc.description}") if not is_generic(t.surface or t.term)}
        suppressed = doc.learned is not None and bool(doc.learned.suppressors)
        if len(words) < 2 or doc.ref in twins or suppressed:  # MIN_SPECIFIC_TERMS: two specific words
            risky.append(doc)
    return risky


def _doc_freqs(postings: TermPostings) -> dict[str, int]:
    counts = np.bincount(postings.term_ids, minlength=len(postings.terms))
    return dict(zip(postings.terms, counts.tolist()))


def _finding(
    doc: MemoryDoc, mine: GateVerdict | None, delivered: list[MemoryDoc], verdicts: Sequence[GateVerdict],
    df: Mapping[str, int], root_of: Mapping[str, str],
) -> Finding:
    head_terms = {t.term for t in analyze(f"{doc.name} {doc.description}\n" + "\n".join(doc.keywords))}
    specific = sorted({t.surface or t.term for t in analyze(scrub_secrets(f"{doc.name} {doc.description}"))
                       if not is_generic(t.surface or t.term)})
    files = (root_of.get(doc.ref, str(doc.abspath)),)
    above = [v.scored.doc for v in verdicts[: mine.rank - 1]] if mine is not None else []
    if mine is None:
        reason = "its name and description match nothing the index holds"
        detail: dict[str, object] = {"cause": "unmatched"}
    elif not above:
        reason = f"the gate holds it back: {mine}"
        detail = {"cause": "gate", "gate": str(mine), "rules": [r.rule for r in mine.reasons]}
    else:
        twins = delivered or above[:1]
        names = ", ".join(d.ref for d in twins)
        plural = len(twins) != 1
        took = (f"{names} {'are' if plural else 'is'} delivered in its place" if delivered
                else f"{names} {'rank' if plural else 'ranks'} above it, and the gate delivers nothing")
        reason = f"{took} (it ranks #{mine.rank}: {mine})"
        detail = {"cause": "twin", "gate": str(mine), "twins": [d.ref for d in twins]}
        delivered = twins
    words = suggested_words(doc, head_terms, df)
    if detail["cause"] == "twin":
        theirs = set().union(*({t.term for t in analyze(f"{d.name} {d.description}\n{d.body}")} for d in delivered))
        own = [w for w in suggested_words(doc, head_terms | theirs, df)] or words
        action = ("Merge it with its twin, or make its description say what sets it apart"
                  + (f", e.g. with {_quoted(own)}." if own else "."))
    else:
        rules = detail.get("rules", ())
        held = set(rules if isinstance(rules, list) else ()) & _HOLDING_RULES
        lacks = (f"its name and description hold {len(specific)} specific word{'s' if len(specific) != 1 else ''}"
                 f"{' (' + _quoted(specific) + ')' if specific else ''}; the gate wants two"
                 if held & {"specific_terms", "head_terms"} or not held else "its description says too little of what it holds")
        action = (f"Say what it is about in its description: {lacks}"
                  + (f"; words from its body a user would type: {_quoted(words)}." if words else "."))
    detail["specific_words"] = specific
    detail["suggested_words"] = words
    return Finding(
        "unreachable", files,
        f"{doc.ref} is never delivered, even for its own name and description as the prompt: {reason}.",
        action, refs=(doc.ref,), detail=MappingProxyType(detail),
    )


def suggested_words(doc: MemoryDoc, exclude: set[str], df: Mapping[str, int]) -> list[str]:
    """Up to SUGGESTED_WORDS words of the memory's body, not in ``exclude``, not everyday words and
    nothing the scrubber blanks, rarest in the store first (ties: first in the body)."""
    seen: dict[str, tuple[int, int, str]] = {}
    for position, token in enumerate(analyze(scrub_secrets(doc.body))):
        if token.surface is None and not is_cjk_term(token.term):
            continue  # a whole identifier's joined term (session_py): its parts come as words of their own
        word = token.surface or token.term
        if token.term in exclude or is_generic(word) or len(word) < 3 or word.isdigit():
            continue
        seen.setdefault(token.term, (df.get(token.term, 1), position, word))
    return [word for _, _, word in sorted(seen.values())[:SUGGESTED_WORDS]]


def _quoted(words: Iterable[str]) -> str:
    return ", ".join(f"'{w}'" for w in words)


def never_recalled(
    docs_by_root: Mapping[str, Sequence[MemoryDoc]], prompts: Sequence[RecalledPrompt], root_of: Mapping[str, str],
) -> tuple[list[Finding], list[str]]:
    """The memories the trail's ``prompts`` never delivered, among those with at least
    NEVER_RECALLED_MIN_PROMPTS prompts of their folder since they were last written; and a note for
    each folder with too few prompts to judge."""
    findings: list[Finding] = []
    notes: list[str] = []
    for root, docs in docs_by_root.items():
        times = sorted(p.time for p in prompts if root in p.roots)
        delivered = {rel for p in prompts if root in p.roots for r, rel in p.delivered if r == root}
        if len(times) < NEVER_RECALLED_MIN_PROMPTS:
            notes.append(
                f"never recalled: not judged in {root}: the trail holds {len(times)} prompts recalling from it, "
                f"fewer than {NEVER_RECALLED_MIN_PROMPTS}"
            )
            continue
        for doc in docs:
            since = len(times) - bisect.bisect_left(times, doc.mtime)
            if doc.path in delivered or since < NEVER_RECALLED_MIN_PROMPTS:
                continue
            findings.append(Finding(
                "never_recalled", (root_of.get(doc.ref, str(doc.abspath)),),
                f"{doc.ref} was delivered for none of the {since} prompts that recalled from its folder since it "
                "was last written.",
                f"If it still matters, give its description the words a user would type; if not, remove it "
                f"(recall-kit rm {shlex.quote(shown_ref(doc.ref))}).",
                refs=(doc.ref,), detail=MappingProxyType({"prompts": since}),
            ))
    return findings, notes
