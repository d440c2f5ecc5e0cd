"""The small closed vocabularies every layer of the engine shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Strategy = Literal["heuristic", "model", "none"]  # who chose the delivered docs; none: nothing chosen
Phase = Literal["fast", "refined"]  # the heuristic's answer, or the settled (model) answer
ConsumePoint = Literal["initial", "tool_result"]  # the agent's two safe points
Placement = Literal["prepend", "append"]  # lead the system reminders / after the tool responses

# Why a pending handle was cancelled (``RecallSession.cancel``), and every way a handle ends undelivered.
CancelReason = Literal["new_query", "abort", "reset", "shutdown", "no_safe_delivery_point"]
DiscardReason = Literal[
    "new_query", "abort", "reset", "shutdown", "no_safe_delivery_point", "no_relevant_results", "already_delivered"
]
CANCEL_REASONS: frozenset[CancelReason] = frozenset(
    {"new_query", "abort", "reset", "shutdown", "no_safe_delivery_point"}
)

# What kind of failure made the model stage fall back to the fast result.
FallbackKind = Literal[
    "unreachable",  # the endpoint could not be reached (connection refused, DNS, TLS, reset)
    "timeout",  # the selector's deadline, or the session's safety net, ran out
    "http_error",  # the endpoint answered with an error status
    "bad_response",  # a body that is not a chat completion, or over the size limit
    "no_candidates",  # nothing to choose from: the model was not asked
    "unusable_answer",  # the model answered, but with nothing valid to use
    "selector_error",  # the selector itself failed (a bug: it should never raise)
]


@dataclass(frozen=True, slots=True)
class Fallback:
    """Why the model stage fell back to the fast result: a kind to act on, and one redacted line."""

    kind: FallbackKind
    reason: str

    def __str__(self) -> str:
        return self.reason
