"""``check_health``: every check of ``recall_kit.health`` over a plan's folders, read-only.

Each recall set is opened once through the index cache (``open_indexed``), as a prompt's fast stage
sees it: near-duplicates and reachability are judged there. Each folder's own files (its memories'
text, its ``MEMORY.md`` files, what the store skips) are read once, through ``MemoryRoot``.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from types import MappingProxyType

from memory_store import MemoryDoc, MemoryRoot, MemoryStoreError, SkippedFile, root_labels
from recall_kit._health_cache import TextCache
from recall_kit._health_files import bad_file_findings, secret_findings, stale_findings, text_checks
from recall_kit._health_index import index_findings
from recall_kit._health_project import Project
from recall_kit._health_reach import UNREACHABLE_EXACT_MAX, never_recalled, unreachable
from recall_kit._health_similar import DUPLICATE_THRESHOLD, SimilarPair, groups_of, similar_pairs
from recall_kit._health_text import secret_columns
from recall_kit._health_types import (
    FINDING_KINDS,
    CheckedRoot,
    Finding,
    HealthPlan,
    HealthReport,
    HealthRoot,
    RecalledPrompt,
    RecallSet,
)
from recall_kit._open import open_indexed


def check_health(
    plan: HealthPlan,
    *,
    history: Sequence[RecalledPrompt] | None = None,
    use_cache: bool = True,
    cache_dir: str | os.PathLike[str] | None = None,
    exact_max: int = UNREACHABLE_EXACT_MAX,
) -> HealthReport:
    """Every finding in ``plan``'s folders. ``history``: the recall trail's prompts (None: never
    recalled is not judged). Reads only; MemoryStoreError when a folder cannot be opened."""
    elapsed: defaultdict[str, float] = defaultdict(float)
    findings: list[Finding] = []
    notes: list[str] = []
    by_path = {root.path: root for root in plan.roots}
    sets = list(plan.sets) + [
        RecallSet(root.path, (root.path,)) for root in plan.roots if not any(root.path in s.roots for s in plan.sets)
    ]
    checked: dict[str, CheckedRoot] = {}
    docs_by_root: dict[str, list[MemoryDoc]] = {}
    root_files: dict[str, str] = {}
    projects: dict[str, Project] = {}
    index_texts: dict[str, bytes] = {}
    texts = TextCache(cache_dir, use=use_cache)
    for recall_set in sets:
        started = time.perf_counter()
        opened = open_indexed(list(recall_set.roots), use_cache=use_cache, cache_dir=cache_dir)
        elapsed["open"] += time.perf_counter() - started
        label_root = dict(zip(root_labels(*recall_set.roots), recall_set.roots))
        docs = sorted(opened.snapshot.docs.values(), key=lambda d: d.ref)
        for doc in docs:
            root_files[doc.ref] = os.path.join(label_root[doc.scope], *doc.path.split("/"))
        for label, path in label_root.items():
            if path in checked:
                continue
            root = by_path.get(path, HealthRoot(path))
            mine = [doc for doc in docs if doc.scope == label]
            errors = [err for err in opened.snapshot.errors if err.scope == label]
            docs_by_root[path] = mine
            project = projects.setdefault(root.project, Project(root.project)) if root.project else None
            found, indexes = _folder_findings(root, label, mine, errors, project, elapsed, index_texts, texts)
            findings += found
            checked[path] = CheckedRoot(path, root.kind, len(mine), indexes, root.reader.title if root.reader else None,
                                        root.project)
        started = time.perf_counter()
        postings = opened.heuristic.postings()
        findings += _duplicate_findings(similar_pairs(postings, DUPLICATE_THRESHOLD), root_files)
        elapsed["near_duplicate"] += time.perf_counter() - started
        started = time.perf_counter()
        reach = unreachable(opened.heuristic, docs, postings, root_files, exact_max=exact_max)
        findings += reach.findings
        if reach.screened:
            notes.append(
                f"unreachable: {recall_set.title} holds {len(docs):,} memories, over {exact_max:,}; the fast stage "
                f"was run for the {reach.tried:,} a screen found at risk (few specific words, a head twin)"
                + (f", the newest; {reach.untried:,} older ones at risk were not judged" if reach.untried else "")
            )
        elapsed["unreachable"] += time.perf_counter() - started
    texts.save()
    started = time.perf_counter()
    if history is None:
        notes.append("never recalled: not judged (no recall trail)")
    else:
        recalled, trail_notes = never_recalled(docs_by_root, history, root_files)
        findings += recalled
        notes += trail_notes
    elapsed["never_recalled"] += time.perf_counter() - started
    for project in projects.values():
        if not project.complete or not project.text_complete:
            notes.append(f"stale references: {project.top} is larger than doctor reads; symbols and folder-less "
                         "file names it could not see were not judged")
        if project.not_seen:
            unseen = sum(project.not_seen.values())
            why = "; ".join(f"{count:,} {reason}" for reason, count in sorted(project.not_seen.items()))
            notes.append(f"stale references: {unseen:,} {'entry' if unseen == 1 else 'entries'} of {project.top} "
                         f"could not be read ({why}); symbols and commands only they could hold were not judged")
    return HealthReport(
        tuple(_unique_sorted(findings)), tuple(checked.values()), tuple(notes), MappingProxyType(dict(elapsed)),
        MappingProxyType(index_texts),
    )


def _folder_findings(
    root: HealthRoot, label: str, docs: list[MemoryDoc], errors: list[SkippedFile], project: Project | None,
    elapsed: defaultdict[str, float], index_texts: dict[str, bytes], texts: TextCache,
) -> tuple[list[Finding], int]:
    files = MemoryRoot(root.path, label=label)
    findings: list[Finding] = []
    started = time.perf_counter()
    indexes = files.index_files()
    findings += index_findings(root.path, label, indexes, docs, [err.path for err in errors], root.reader)
    for index in indexes:
        if index.data is not None:
            index_texts[f"{root.path}/{index.rel}"] = index.data
            # both agents load the index into every session: a secret there is in every context
            secrets = secret_columns(index.data.decode("utf-8", "replace"))
            findings += secret_findings(f"{root.path}/{index.rel}", f"{label}/{index.rel}", secrets)
    elapsed["index_drift"] += time.perf_counter() - started
    for doc in docs:
        started = time.perf_counter()
        checks = texts.get(doc.content_hash) if doc.content_hash else None
        if checks is None:
            try:
                data = files.read_bytes(doc.path)
            except MemoryStoreError:
                continue  # gone or swapped since the scan: the next run sees what it is now
            checks = text_checks(data.decode("utf-8", "replace"))
            if hashlib.sha256(data).hexdigest() == doc.content_hash:  # the version the store indexed
                texts.put(doc.content_hash, checks)
        elapsed["read_and_scrub"] += time.perf_counter() - started
        path = os.path.join(root.path, *doc.path.split("/"))
        findings += secret_findings(path, doc.ref, checks.secrets)
        if project is not None:
            started = time.perf_counter()
            findings += stale_findings(path, doc.ref, checks, project)
            elapsed["stale_reference"] += time.perf_counter() - started
    findings += bad_file_findings(errors, root.path)
    return findings, len(indexes)


def _duplicate_findings(pairs: list[SimilarPair], root_files: dict[str, str]) -> list[Finding]:
    findings = []
    for group in groups_of(pairs):
        refs = sorted({ref for pair in group for ref in (pair.first, pair.second)})
        best = max(pair.similarity for pair in group)
        listed = ", ".join(refs[:-1]) + f" and {refs[-1]}"
        shown = (f"similarity {best:.2f}" if len(group) == 1 else
                 "similarities " + ", ".join(f"{p.first} ~ {p.second} {p.similarity:.2f}" for p in group))
        findings.append(Finding(
            "near_duplicate", tuple(root_files.get(ref, ref) for ref in refs),
            f"{listed} look like one memory written {'twice' if len(refs) == 2 else f'{len(refs)} times'} ({shown}): "
            "a prompt about it gets the same fact in both of the fast stage's two places.",
            "Merge them into one and remove the rest (recall-kit doctor --model-check proposes a merge); if they state "
            "different facts, make each description say which.",
            refs=tuple(refs),
            detail=MappingProxyType({
                "similarity": round(best, 3), "threshold": DUPLICATE_THRESHOLD,
                "pairs": [{"first": p.first, "second": p.second, "similarity": round(p.similarity, 3)} for p in group],
            }),
        ))
    return findings


def _unique_sorted(findings: list[Finding]) -> list[Finding]:
    """Each finding once (a folder in two recall sets is found twice), by kind, then file and line."""
    seen: dict[tuple[object, ...], Finding] = {}
    for finding in findings:
        # a set's refs name its folders by their labels there: the same group or memory in another set is the same finding
        worded = finding.kind not in ("near_duplicate", "unreachable")
        seen.setdefault((finding.kind, finding.files, finding.line, finding.message if worded else ""), finding)
    order = {kind: n for n, kind in enumerate(FINDING_KINDS)}
    return sorted(seen.values(), key=lambda f: (order[f.kind], f.files, f.line or 0, f.message))
