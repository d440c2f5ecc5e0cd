"""The recall pipeline one handle's task runs: the heuristic first (published at once), then the model."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable, Sequence

from memory_store import MemoryDoc
from recall_kit._handle import PrefetchHandle, RecallOutcome
from recall_kit._kinds import Fallback

if TYPE_CHECKING:
    from recall_kit._heuristic import FastResult
    from recall_kit._protocols import FastStage, Selector
    from recall_kit._selector import Selection

# What a refined selection is fed to when learning is on: (prompt, the fast stage's docs, the selection).
Learn = Callable[[str, Sequence[MemoryDoc], "Selection"], None]

_log = logging.getLogger("recall_kit")

# Ceiling on the whole model stage, above the selector's own 30 s deadline: a last safety net
# so that a selector which ignored its deadline still cannot keep a handle alive forever.
MODEL_STAGE_SAFETY_S = 60.0


async def run_recall(
    handle: PrefetchHandle,
    heuristic: FastStage,
    selector: Selector | None,
    snapshot_docs: Callable[[], Sequence[MemoryDoc]],
    exclude: frozenset[str],
    on_settled: Callable[[PrefetchHandle], None],
    learn: Learn | None = None,
    skip_certain: bool = False,
) -> None:
    """The recall task: the heuristic first (published at once), then the model if any (whose
    answer, with ``learn``, is also fed back: ``learn`` must not block). With ``skip_certain``, a
    fast answer that is certain (``FastResult.certain``) settles the recall without the model."""
    fast = _run_heuristic(heuristic, handle.query, exclude)
    handle.box.publish(fast)
    gated = tuple(s.doc for s in fast.docs)
    skipped = selector is not None and skip_certain and fast.certain
    if selector is None or skipped:
        outcome = RecallOutcome(
            docs=gated, strategy=fast.strategy, phase="fast", fast_ms=fast.elapsed_ms, model_ms=None,
            model_skipped=skipped,
        )
    else:
        # let a consumer woken by the publish take the fast result before the model stage's
        # synchronous prefix (manifest, HTTP client set-up) occupies the loop
        await asyncio.sleep(0)
        outcome = await _run_selector(handle.query, selector, snapshot_docs, exclude, fast, learn)
    if handle.settle(outcome):
        on_settled(handle)


def _run_heuristic(heuristic: FastStage, query: str, exclude: frozenset[str]) -> FastResult:
    try:
        return heuristic.recall(query, exclude=exclude)
    except Exception:  # a broken index must not break the agent's turn
        _log.warning("fast recall failed; continuing without a fast result", exc_info=True)
        return _empty_fast_result()


async def _run_selector(
    query: str,
    selector: Selector,
    snapshot_docs: Callable[[], Sequence[MemoryDoc]],
    exclude: frozenset[str],
    fast: FastResult,
    learn: Learn | None = None,
) -> RecallOutcome:
    gated = tuple(s.doc for s in fast.docs)
    candidates = [d for d in snapshot_docs() if d.ref not in exclude]
    started = time.perf_counter()

    def fall_back(fallback: Fallback) -> RecallOutcome:
        return RecallOutcome(
            docs=gated,
            strategy="heuristic" if gated else "none",
            phase="refined",
            fast_ms=fast.elapsed_ms,
            model_ms=(time.perf_counter() - started) * 1000,
            fallback=fallback,
        )

    try:
        async with asyncio.timeout(MODEL_STAGE_SAFETY_S):
            selection = await selector.select(
                query, candidates, preferred=[s.doc for s in fast.ranked], fallback=gated
            )
    except TimeoutError:
        return fall_back(Fallback("timeout", "safety_timeout"))
    except Exception:  # the selector promises not to raise; if it does, fall back all the same
        _log.warning("model selection failed; using the fast result", exc_info=True)
        return fall_back(Fallback("selector_error", "selector_error"))
    if learn is not None:
        try:
            learn(query, gated, selection)
        except Exception:  # learning is a side line: it never costs the turn its refinement
            _log.warning("learning from the selection failed", exc_info=True)
    return RecallOutcome(
        docs=tuple(d for d in selection.docs if d.ref not in exclude),
        strategy=selection.strategy,
        phase="refined",
        fast_ms=fast.elapsed_ms,
        model_ms=selection.latency_ms,
        fallback=selection.fallback,
    )


def _empty_fast_result() -> FastResult:
    from recall_kit._heuristic import FastResult  # the heuristic module imports numpy: only on failure

    return FastResult(docs=(), ranked=(), strategy="none", elapsed_ms=0.0, docs_scanned=0)
