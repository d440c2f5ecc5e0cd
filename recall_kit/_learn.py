"""Learning from refined selections: the model's validated choices, fed back to the fast stage.

A memory the model chose and the fast stage did not deliver gains the prompt's words as learned keys;
one the fast stage delivered and the model left out gains a suppressor for them. Only a real model
answer teaches (no fallback, timeout, abort or rejected reference), and a word is written only once
it came in two different turns (``SeenWords``): what it teaches waits in memory until then. The work
runs on a thread of its own, off the delivery path: ``observe`` only enqueues, and drops the
selection when the queue is full.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_store import MAX_LEARNED_TERM_CHARS, MAX_LEARNED_TERMS, LearningUpdate, MemoryDoc, MemoryStoreError
from recall_kit._query import is_generic, is_number, prompt_words, query_tokens
from recall_kit._secrets import Redactor, looks_random, scrub_secrets
from recall_kit._tokenize import as_read
from recall_kit._seen_words import SeenWords
from recall_kit._telemetry import LearnEvent, Telemetry
from recall_kit.limits import LEARN_CLOSE_WAIT_S, LEARN_MAX_PENDING

if TYPE_CHECKING:
    from memory_store import MemoryStore
    from recall_kit._selector import Selection

_log = logging.getLogger("recall_kit")
_UPDATE_TIMES = 1024  # recent update durations kept for `bench replay`'s cost figure


@dataclass(frozen=True, slots=True)
class PromptWords:
    """What learning may keep of a prompt: its words, never its text."""

    words: frozenset[str]  # every kept word: a suppressor
    keys: tuple[str, ...]  # the specific ones (no everyday words, no bare numbers): learned keys
    dropped: int  # secret-shaped or overlong words left out


def learnable_words(prompt: str, redact: Redactor | None = None) -> PromptWords:
    """The prompt's words as the fast stage reads them, with key-shaped spans, the configured secrets
    and long random-looking tokens blanked first, and overlong words dropped."""
    # both read the text as the tokenizer will (NFKC): ＰＡＳＳＷＯＲＤ＝ｘ typed in full width is password=x
    text = as_read(prompt)
    cleaned = scrub_secrets(redact(text) if redact else text)
    all_words = prompt_words(query_tokens(cleaned))
    kept = [w for w in all_words if len(w) <= MAX_LEARNED_TERM_CHARS and not looks_random(w)][:MAX_LEARNED_TERMS]
    dropped = len(prompt_words(query_tokens(prompt))) - len(kept)
    keys = tuple(w for w in kept if not is_generic(w) and not is_number(w))
    return PromptWords(frozenset(kept), keys, max(0, dropped))


@dataclass(frozen=True, slots=True)
class _Observed:
    prompt: str
    delivered: tuple[MemoryDoc, ...]  # what the fast stage delivered
    chosen: tuple[MemoryDoc, ...]  # what the model chose (validated)


class Learner:
    """Feeds validated model selections back to the store's learned sidecars, on a thread of its own."""

    def __init__(self, store: MemoryStore, telemetry: Telemetry | None = None, redact: Redactor | None = None) -> None:
        self._store = store
        self._telemetry = telemetry or Telemetry()
        self._redact = redact
        self._queue: queue.Queue[_Observed | None] = queue.Queue(LEARN_MAX_PENDING)
        self._idle = threading.Condition()
        self._pending = 0
        self._closed = False
        self._given_up = False  # close() stopped waiting: what is still queued is not learned
        self.dropped = 0  # selections not learned from because the queue was full
        self.update_ms: deque[float] = deque(maxlen=_UPDATE_TIMES)  # recent sidecar updates
        self._seen = SeenWords()  # the learner thread's alone
        self._refused: dict[str, str] = {}  # per root, the last refusal logged: said once, not at every answer
        self._thread = threading.Thread(target=self._run, name="recall-kit-learner", daemon=True)
        self._thread.start()

    def observe(self, prompt: str, delivered: Sequence[MemoryDoc], selection: Selection) -> None:
        """Queue what ``selection`` teaches about ``prompt`` (``delivered``: the fast stage's docs); never blocks."""
        reason = unteachable(selection)
        if reason is not None or self._closed:
            if reason is not None:
                self._telemetry.emit(LearnEvent(
                    outcome="skipped", reason=reason, taught=(), suppressed=(), words=0, dropped=0, duration_ms=0.0
                ))
            return
        observed = _Observed(prompt, tuple(delivered), tuple(selection.docs))
        with self._idle:
            self._pending += 1
        try:
            self._queue.put_nowait(observed)
        except queue.Full:
            self.dropped += 1
            self._done()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Whether every queued selection was learned from (written to the sidecars) within ``timeout``."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float | None = None) -> None:
        """Learn what is queued, then stop the thread; wait at most ``timeout`` seconds for it
        (``LEARN_CLOSE_WAIT_S`` by default). An update still waiting then (another process holds the
        learned file's lock) is given up, with one log line, and what is queued behind it is dropped."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(LEARN_CLOSE_WAIT_S if timeout is None else timeout)
        if self._thread.is_alive():
            self._given_up = True
            with self._idle:
                left = self._pending
            _log.warning(
                "learning: gave up on %d pending update(s) after %g s (another process holds the learned file's lock)",
                left, LEARN_CLOSE_WAIT_S if timeout is None else timeout,
            )

    def _done(self) -> None:
        with self._idle:
            self._pending -= 1
            if self._pending == 0:
                self._idle.notify_all()

    def _run(self) -> None:
        while (observed := self._queue.get()) is not None:
            if self._given_up:
                self._done()
                continue
            try:
                self._learn(observed)
            except Exception as exc:  # learning must never take anything down with it
                _log.warning("learning failed", exc_info=True)
                self._telemetry.emit(LearnEvent(
                    outcome="failed", reason=f"{type(exc).__name__}: {exc}"[:200], taught=(), suppressed=(),
                    words=0, dropped=0, duration_ms=0.0,
                ))
            finally:
                self._done()

    def _learn(self, observed: _Observed) -> None:
        words = learnable_words(observed.prompt, self._redact)
        turn = self._seen.turn(words.words)
        chosen = {doc.ref: doc for doc in observed.chosen}
        delivered = {doc.ref: doc for doc in observed.delivered}
        updates: dict[str, list[LearningUpdate]] = defaultdict(list)
        taught: dict[str, None] = {}
        suppressed: list[str] = []
        waiting = 0
        if words.words:
            for ref, doc in chosen.items():
                self._seen.release((doc.scope, doc.path), turn)  # it was right after all
                ready = tuple(word for word in words.keys if word in turn.earlier)
                if ref not in delivered and words.keys:
                    for word in words.keys:
                        if word not in turn.earlier:  # a word seen once waits for a second turn
                            self._seen.wait_key(turn.digests[word], (doc.scope, doc.path))
                            waiting += 1
                if ref not in delivered and ready:
                    updates[doc.scope].append(LearningUpdate(doc.path, keys=ready, release=words.words))
                    taught[ref] = None
                elif doc.learned is not None:  # a suppressor not yet in effect (taught once) is released too
                    updates[doc.scope].append(LearningUpdate(doc.path, release=words.words))  # it was right after all
            for ref, doc in delivered.items():
                if ref in chosen:
                    continue
                if not turn.all_earlier():
                    self._seen.wait_suppressor((doc.scope, doc.path), turn)
                    waiting += 1
                    continue
                answers = 1 + self._seen.suppressor_due((doc.scope, doc.path), turn)
                updates[doc.scope].extend([LearningUpdate(doc.path, suppress=words.words)] * answers)
                suppressed.append(ref)
            for word, (scope, path) in self._seen.keys_due(turn, words.keys):  # what a word taught when first seen
                updates[scope].append(LearningUpdate(path, keys=(word,)))
                taught[f"{scope}/{path}"] = None
        started = time.perf_counter()
        failed: dict[str, str] = {}  # label -> why its file was not written
        for label, batch in updates.items():
            try:
                self._store.record_learning(label, batch)
            except MemoryStoreError as exc:
                failed[label] = f"{type(exc).__name__}: {exc}"
                if self._refused.get(label) != str(exc):
                    _log.warning("learned sidecar of %s not written: %s", label, exc)
                    self._refused[label] = str(exc)
            else:
                self._refused.pop(label, None)
        duration = (time.perf_counter() - started) * 1000
        if failed:  # what the other roots were taught stands
            self._telemetry.emit(LearnEvent(
                outcome="failed", reason=next(iter(failed.values()))[:200],
                taught=tuple(ref for ref in taught if ref.partition("/")[0] not in failed),
                suppressed=tuple(ref for ref in suppressed if ref.partition("/")[0] not in failed),
                words=len(words.words), dropped=words.dropped, duration_ms=duration, waiting=waiting,
            ))
            return
        if updates:
            self.update_ms.append(duration)
        quiet = "words seen in one turn only: kept in memory until another turn brings them" if waiting else "nothing to teach"
        self._telemetry.emit(LearnEvent(
            outcome="learned" if updates else "skipped", reason=None if updates else quiet,
            taught=tuple(taught), suppressed=tuple(suppressed), words=len(words.words), dropped=words.dropped,
            duration_ms=duration, waiting=waiting,
        ))


def unteachable(selection: Selection) -> str | None:
    """Why ``selection`` teaches nothing (not a validated model answer), or None when it teaches."""
    if selection.fallback is not None:
        return f"the model stage fell back: {selection.fallback.kind}"
    if selection.strategy != "model":
        return "not a model answer"
    if selection.rejected:
        return f"the answer had {len(selection.rejected)} rejected reference(s)"
    return None
