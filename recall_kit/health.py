"""Memory health, as ``recall-kit doctor`` reports it: what is wrong in memory folders that agents
grow by themselves, and the one mechanical repair (the ``MEMORY.md`` index).

::

    from recall_kit.health import HealthPlan, HealthRoot, RecallSet, check_health

    plan = HealthPlan((HealthRoot("/path/to/memory"),), (RecallSet("notes", ("/path/to/memory",)),))
    report = check_health(plan)
    for finding in report.findings:
        print(finding.kind, finding.files[0], finding.message, finding.action)

Checks, each over what the fast stage and the store see: near-duplicates (``DUPLICATE_THRESHOLD``,
chosen on a labelled set), stale references (paths, commands and symbols missing from the folder's
project), index drift (dead links, unlisted memories, memories past what the agent loads), secrets
(learning's scrubber), memories unreachable at the prompt (the gate's explanation), memories never
recalled (the recall trail, given as ``RecalledPrompt``s) and bad files. ``check_health`` only reads;
``plan_repairs`` and ``apply_repair`` mend an index; ``review_near_duplicates`` asks a model for a
merge and writes nothing.

The names load on first use: ``from recall_kit.health import HealthPlan`` loads the plan's types
alone (standard library only, as ``hook status`` needs), ``check_health`` the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from recall_kit._health import check_health as check_health
    from recall_kit._health_index import IndexRepair as IndexRepair
    from recall_kit._health_index import apply_repair as apply_repair
    from recall_kit._health_index import plan_repairs as plan_repairs
    from recall_kit._health_index import seen_lines as seen_lines
    from recall_kit._health_model import MODEL_CHECK_MAX_CALLS as MODEL_CHECK_MAX_CALLS
    from recall_kit._health_model import MergeProposal as MergeProposal
    from recall_kit._health_model import ModelReview as ModelReview
    from recall_kit._health_model import review_near_duplicates as review_near_duplicates
    from recall_kit._health_reach import NEVER_RECALLED_MIN_PROMPTS as NEVER_RECALLED_MIN_PROMPTS
    from recall_kit._health_reach import UNREACHABLE_EXACT_MAX as UNREACHABLE_EXACT_MAX
    from recall_kit._health_similar import DUPLICATE_THRESHOLD as DUPLICATE_THRESHOLD
    from recall_kit._health_similar import HEAD_WEIGHT as HEAD_WEIGHT
    from recall_kit._health_similar import SimilarPair as SimilarPair
    from recall_kit._health_similar import similar_pairs as similar_pairs
    from recall_kit._health_types import CheckedRoot as CheckedRoot
    from recall_kit._health_types import FINDING_KINDS as FINDING_KINDS
    from recall_kit._health_types import Finding as Finding
    from recall_kit._health_types import FindingKind as FindingKind
    from recall_kit._health_types import HealthPlan as HealthPlan
    from recall_kit._health_types import HealthReport as HealthReport
    from recall_kit._health_types import HealthRoot as HealthRoot
    from recall_kit._health_types import IndexReader as IndexReader
    from recall_kit._health_types import KIND_TITLES as KIND_TITLES
    from recall_kit._health_types import RecallSet as RecallSet
    from recall_kit._health_types import RecalledPrompt as RecalledPrompt

_EXPORTS: dict[str, str] = {
    "check_health": "recall_kit._health",
    "IndexRepair": "recall_kit._health_index",
    "apply_repair": "recall_kit._health_index",
    "plan_repairs": "recall_kit._health_index",
    "seen_lines": "recall_kit._health_index",
    "MODEL_CHECK_MAX_CALLS": "recall_kit._health_model",
    "MergeProposal": "recall_kit._health_model",
    "ModelReview": "recall_kit._health_model",
    "review_near_duplicates": "recall_kit._health_model",
    "NEVER_RECALLED_MIN_PROMPTS": "recall_kit._health_reach",
    "UNREACHABLE_EXACT_MAX": "recall_kit._health_reach",
    "DUPLICATE_THRESHOLD": "recall_kit._health_similar",
    "HEAD_WEIGHT": "recall_kit._health_similar",
    "SimilarPair": "recall_kit._health_similar",
    "similar_pairs": "recall_kit._health_similar",
    "CheckedRoot": "recall_kit._health_types",
    "FINDING_KINDS": "recall_kit._health_types",
    "Finding": "recall_kit._health_types",
    "FindingKind": "recall_kit._health_types",
    "HealthPlan": "recall_kit._health_types",
    "HealthReport": "recall_kit._health_types",
    "HealthRoot": "recall_kit._health_types",
    "IndexReader": "recall_kit._health_types",
    "KIND_TITLES": "recall_kit._health_types",
    "RecallSet": "recall_kit._health_types",
    "RecalledPrompt": "recall_kit._health_types",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'recall_kit.health' has no attribute {name!r}")
    from memory_store import fixup_module_metadata

    namespace = globals()
    loaded = [n for n, m in _EXPORTS.items() if m == module]
    for each in loaded:
        namespace[each] = getattr(importlib.import_module(module), each)
    fixup_module_metadata(__name__, namespace, loaded)
    return namespace[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
