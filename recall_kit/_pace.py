"""How soon one model endpoint answers a prompt, from its recent prompts: whether the initial point's
bounded wait can pay.

A ``ModelSelector`` keeps one ``ModelPace`` (the daemon shares its selector, so every root set of a
daemon reads and feeds the same record). Sessions feed it one sample per prompt whose model stage
ran: when the model answered (``answered``), or, when the recall ended unanswered after at least
the session's wait, how long it had gone unanswered (``unanswered``: a lower bound). At the initial
point, with no fast result to hand over, a session asks ``should_wait(bound)``:

- fewer than ``min_samples`` samples that say anything about ``bound``: wait (nothing known yet);
- at least half of them answered within ``bound`` (the recent median is under it): wait;
- else let the initial point go without waiting, except that after ``probe_after`` prompts let go
  with no new sample the next one waits (a probe), so a model that became fast is seen again even
  where turns end before any answer could come.

The model stage runs on every prompt either way, so its answer times keep coming while nothing
waits: a model that becomes fast wins the wait back within a few prompts.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass

# Chosen, not tuned: what they cost is measured by bench/bench_silent_wait.py (the first three
# prompts of a new record wait: a mean of 10.8 ms over 30 silent turns with a 300 ms model) and by
# `bench delivery --model-latency-ms` (where turns bring no sample, a probe every ninth prompt).
PACE_SAMPLES = 8  # the recent prompts kept per endpoint: a model that speeds up wins the wait back in at most 4
PACE_MIN_SAMPLES = 3  # below this the bounded wait is always spent: one slow answer may be a cold start
PACE_PROBE_AFTER = 8  # prompts let go with no new sample, after which one waits again


@dataclass(frozen=True, slots=True)
class PaceStats:
    """What a ``ModelPace`` holds and decided, for status lines and benchmarks."""

    samples: int  # recent samples kept (at most PACE_SAMPLES)
    answered_p50_ms: float | None  # the median of the kept answers' times, None without one
    waited: int  # initial points that waited (probes included)
    let_go: int  # initial points let go without waiting
    probes: int  # of ``waited``: waits spent only to take a new sample

    def as_dict(self) -> dict[str, object]:
        """The stats as a JSON object, one key per field."""
        p50 = None if self.answered_p50_ms is None else round(self.answered_p50_ms, 1)
        return {"samples": self.samples, "answered_p50_ms": p50, "waited": self.waited,
                "let_go": self.let_go, "probes": self.probes}


class ModelPace:
    """A bounded record of one endpoint's recent answer times, and the initial point's rule over it.

    Thread-safe: the sync sessions of one Recaller run on loops of their own and share a selector."""

    def __init__(
        self, *, samples: int = PACE_SAMPLES, min_samples: int = PACE_MIN_SAMPLES, probe_after: int = PACE_PROBE_AFTER
    ) -> None:
        if not 1 <= min_samples <= samples or probe_after < 1:
            raise ValueError(f"ModelPace needs 1 <= min_samples <= samples and probe_after >= 1, got "
                             f"{min_samples}, {samples}, {probe_after}")
        self.min_samples = min_samples
        self.probe_after = probe_after
        self._times: deque[tuple[float, bool]] = deque(maxlen=samples)  # (ms since the prompt, answered)
        self._quiet = 0  # prompts let go since the last sample
        self._waited = self._let_go = self._probes = 0
        self._lock = threading.Lock()

    def answered(self, ms: float) -> None:
        """The model answered (or failed with an answer of its own) ``ms`` after the prompt began."""
        self._add(ms, True)

    def unanswered(self, ms: float) -> None:
        """The recall ended ``ms`` after the prompt began with the model still silent: it takes longer."""
        self._add(ms, False)

    def should_wait(self, bound_ms: float) -> bool:
        """Whether the initial point, with nothing to hand over yet, should wait up to ``bound_ms``."""
        with self._lock:
            # an unanswered sample under the bound says nothing about it (a shorter wait missed)
            known = [(ms, ok) for ms, ok in self._times if ok or ms > bound_ms]
            in_time = sum(1 for ms, ok in known if ok and ms <= bound_ms)
            if len(known) < self.min_samples or 2 * in_time >= len(known):
                self._waited += 1
                return True
            if self._quiet >= self.probe_after:
                self._quiet = 0
                self._waited += 1
                self._probes += 1
                return True
            self._quiet += 1
            self._let_go += 1
            return False

    def stats(self) -> PaceStats:
        """What is kept and what was decided so far."""
        with self._lock:
            answers = [ms for ms, ok in self._times if ok]
            return PaceStats(
                samples=len(self._times),
                answered_p50_ms=statistics.median(answers) if answers else None,
                waited=self._waited, let_go=self._let_go, probes=self._probes,
            )

    def _add(self, ms: float, answered: bool) -> None:
        with self._lock:
            self._times.append((float(ms), answered))
            self._quiet = 0

    def __repr__(self) -> str:
        stats = self.stats()
        return f"ModelPace(samples={stats.samples}, answered_p50_ms={stats.answered_p50_ms}, let_go={stats.let_go})"
