"""How many refinements may go on after their turn, for learning only, over one model stage."""

from __future__ import annotations

import threading

from recall_kit.limits import LEARN_MAX_AFTER_TURN


class AfterTurnSlots:
    """Slots for refinements that go on after their turn ended, for learning only: at most ``limit``
    at once over every session that uses this model stage (``ModelSelector.after_turn``; a daemon's
    one selector serves every root set, so that is the whole process there). Thread-safe."""

    def __init__(self, limit: int = LEARN_MAX_AFTER_TURN) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        return self._used

    def take(self) -> bool:
        with self._lock:
            if self._used >= self.limit:
                return False
            self._used += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self._used -= 1


NO_SLOTS = AfterTurnSlots(0)  # what a session holds none of: never taken from
