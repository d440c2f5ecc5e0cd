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

    def recall(self, query: str, *, exclude: Collection[str] = ()) -> FastResult: ...


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
    ) -> Selection: ...

    async def aclose(self) -> None: ...
