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
"""

from memory_store import fixup_module_metadata
from recall_kit._health import check_health
from recall_kit._health_index import IndexRepair, apply_repair, plan_repairs, seen_lines
from recall_kit._health_model import MODEL_CHECK_MAX_CALLS, MergeProposal, ModelReview, review_near_duplicates
from recall_kit._health_reach import NEVER_RECALLED_MIN_PROMPTS, UNREACHABLE_EXACT_MAX
from recall_kit._health_similar import DUPLICATE_THRESHOLD, HEAD_WEIGHT, SimilarPair, similar_pairs
from recall_kit._health_types import (
    FINDING_KINDS,
    KIND_TITLES,
    CheckedRoot,
    Finding,
    FindingKind,
    HealthPlan,
    HealthReport,
    HealthRoot,
    IndexReader,
    RecalledPrompt,
    RecallSet,
)

__all__ = [
    "CheckedRoot",
    "DUPLICATE_THRESHOLD",
    "FINDING_KINDS",
    "Finding",
    "FindingKind",
    "HEAD_WEIGHT",
    "HealthPlan",
    "HealthReport",
    "HealthRoot",
    "IndexReader",
    "IndexRepair",
    "KIND_TITLES",
    "MODEL_CHECK_MAX_CALLS",
    "MergeProposal",
    "ModelReview",
    "NEVER_RECALLED_MIN_PROMPTS",
    "RecallSet",
    "RecalledPrompt",
    "SimilarPair",
    "UNREACHABLE_EXACT_MAX",
    "apply_repair",
    "check_health",
    "plan_repairs",
    "review_near_duplicates",
    "seen_lines",
    "similar_pairs",
]
fixup_module_metadata(__name__, globals(), __all__)
