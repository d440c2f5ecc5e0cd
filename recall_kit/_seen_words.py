"""The words of earlier turns, so that learning writes a word only once it came in two different turns.

A deny-list of secret shapes is never complete; a password typed once, in a shape no rule knows, is
still never written. What a word seen once would teach (a learned key, a suppressor) waits here,
in memory, and is written when the word comes again in a later turn, or is forgotten, the least
recently seen first. Nothing here reaches the disk, and no word is kept in clear: each is a BLAKE2b
hash under a key drawn at random when the Learner starts, so the process holds no list of them
either. A restart forgets them all: a word must then come twice again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass

from memory_store import releases
from recall_kit.limits import LEARN_SEEN_WORDS, LEARN_WAITING_KEYS, LEARN_WAITING_SUPPRESSORS

Digest = bytes
MemoryAt = tuple[str, str]  # (the root's label, the memory's path): where an update goes
_DIGEST_BYTES = 16


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn's words as the record of earlier turns sees them."""

    digests: dict[str, Digest]  # each word's hash
    earlier: frozenset[str]  # the words that came in an earlier turn too: these may be written

    def all_earlier(self) -> bool:
        """Whether every word of the turn came in an earlier one."""
        return len(self.earlier) == len(self.digests)


class SeenWords:
    """The hashed words of the latest turns, and what those seen once would teach: each bounded, the
    least recently seen dropped first. Used by one thread (the Learner's)."""

    def __init__(
        self,
        max_words: int = LEARN_SEEN_WORDS,
        max_keys: int = LEARN_WAITING_KEYS,
        max_suppressors: int = LEARN_WAITING_SUPPRESSORS,
    ) -> None:
        self._key = os.urandom(16)
        self._limits = (max_words, max_keys, max_suppressors)
        self._seen: dict[Digest, None] = {}  # in the order last seen, the oldest first
        self._keys: dict[Digest, dict[MemoryAt, None]] = {}  # a word seen once -> the memories it would teach
        self._key_count = 0
        self._suppressors: dict[tuple[MemoryAt, frozenset[Digest]], int] = {}  # -> the answers that taught it

    def turn(self, words: Iterable[str]) -> Turn:
        """A new turn's ``words``: which of them came in an earlier turn; all are remembered from now on."""
        digests = {word: self._digest(word) for word in words}
        earlier = frozenset(word for word, digest in digests.items() if digest in self._seen)
        for digest in digests.values():
            self._seen.pop(digest, None)
            self._seen[digest] = None
        while len(self._seen) > self._limits[0]:
            self._forget_word(next(iter(self._seen)))
        return Turn(digests, earlier)

    def wait_key(self, digest: Digest, memory: MemoryAt) -> None:
        """Keep, until its word comes again, that the word at ``digest`` would be a learned key of ``memory``."""
        memories = self._keys.setdefault(digest, {})
        if memory not in memories:
            memories[memory] = None
            self._key_count += 1
        while self._key_count > self._limits[1]:
            oldest = next(iter(self._keys))
            self._key_count -= len(self._keys.pop(oldest))

    def keys_due(self, turn: Turn, words: Iterable[str]) -> list[tuple[str, MemoryAt]]:
        """The learned keys that waited for those of ``words`` that came again in ``turn``: (word, memory)."""
        due: list[tuple[str, MemoryAt]] = []
        for word in words:
            if word in turn.earlier:
                memories = self._keys.pop(turn.digests[word], {})
                self._key_count -= len(memories)
                due.extend((word, memory) for memory in memories)
        return due

    def wait_suppressor(self, memory: MemoryAt, turn: Turn) -> None:
        """Count one answer that left ``memory`` out for the turn's words, until they have all come again."""
        key = (memory, frozenset(turn.digests.values()))
        self._suppressors[key] = self._suppressors.pop(key, 0) + 1
        while len(self._suppressors) > self._limits[2]:
            del self._suppressors[next(iter(self._suppressors))]

    def suppressor_due(self, memory: MemoryAt, turn: Turn) -> int:
        """How many earlier answers left ``memory`` out for exactly the turn's words (and are no longer waiting)."""
        return self._suppressors.pop((memory, frozenset(turn.digests.values())), 0)

    def release(self, memory: MemoryAt, turn: Turn) -> None:
        """Forget the suppressors waiting for ``memory`` whose words the turn's overlap as a release of a
        written one needs (``memory_store.releases``): the model chose it for them after all."""
        words = frozenset(turn.digests.values())
        for key in [key for key in self._suppressors if key[0] == memory and releases(key[1], words)]:
            del self._suppressors[key]

    def _forget_word(self, digest: Digest) -> None:
        del self._seen[digest]
        self._key_count -= len(self._keys.pop(digest, {}))

    def _digest(self, word: str) -> Digest:
        return hashlib.blake2b(word.encode("utf-8", "surrogatepass"), key=self._key, digest_size=_DIGEST_BYTES).digest()
