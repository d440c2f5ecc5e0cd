"""The seams between the session and its stages, as protocols: what each side may rely on."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

from memory_store import MemoryDoc

if TYPE_CHECKING:
    from recall_kit._heuristic import FastResult
    from recall_kit._selector import Selection


class FastStage(Protocol):
    """The fast stage a session runs first: a FastHeuristic, or anything that ranks like one."""

    def recall(self, query: str, *, exclude: Collection[str] = ()) -> FastResult:
        """Rank the memories for ``query`` (leaving out ``exclude``) and gate the ranking; never blocks on I/O."""
        ...


class Selector(Protocol):
    """The model stage: a ModelSelector, or anything that selects like one (it must never raise)."""

    timeout: float

    async def select(
        self,
        query: str,
        candidates: Sequence[MemoryDoc],
        *,
        preferred: Sequence[MemoryDoc] = (),
        fallback: Sequence[MemoryDoc] = (),
    ) -> Selection:
        """Choose among ``candidates`` for ``query``; on any failure, ``fallback`` with the reason, never an exception."""
        ...

    async def aclose(self) -> None:
        """Close what the selector holds (its HTTP client); called once, on the loop that used it."""
        ...
