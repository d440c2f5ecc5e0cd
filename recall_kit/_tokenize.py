"""Text to index terms: NFKC, case-folding, identifiers, CJK bigrams, stop words, a light stemmer.

Documents and queries go through the same ``analyze``; a query additionally keeps each
token's surface word so that typo tolerance can compare what the user actually typed.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

_CJK = (
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"  # han
    "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af"  # hangul
)
_POSSESSIVE = re.compile(r"['’]s\b")
# A word, or an identifier whose parts are joined by _ . or - (snake_case, dotted.names, kebab-case).
_WORD = re.compile(r"[^\W_]+(?:[_.\-]+[^\W_]+)*")
_SEPARATORS = re.compile(r"[_.\-]+")
_CAMEL_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can cannot could couldn did didn do does doesn doing don down during each
    few for from further had hadn has hasn have haven having he her here hers herself him himself his how
    i if in into is isn it its itself just let me more most my myself no nor not now of off on once only
    or other ought our ours ourselves out over own same shan she should shouldn so some such than that
    the their theirs them themselves then there these they this those through to too under until up very
    was wasn we were weren what when where which while who whom why will with won would wouldn you your
    yours yourself yourselves ll re ve e_g i_e etc also via per
    """.split()
)


@dataclass(frozen=True, slots=True)
class Token:
    """One index term, with the folded surface word it came from (None for CJK and whole identifiers)."""

    term: str
    surface: str | None


# A word's tokens depend on the word alone, and a store's vocabulary is far smaller than its token
# stream, so each whitespace-separated chunk ("deploy", "`uv`,") is analysed once and remembered.
# No word spans whitespace, so a text's tokens are its chunks' tokens in order; str.split is 4x
# faster than the word regex (bench/bench_index_build.py: 2,000 memories, 594k chunks, 34k distinct).
CHUNK_CACHE_SIZE = 100_000  # entries per cache (chunks, words); past it a cache starts over (tens of MB)
# A longer chunk or word is analysed every time, never kept: its entry grows with its parts (a 1,024-character
# identifier of two-letter parts holds 50 KB of terms), and it rarely comes again (0.007% of the datasets' chunks).
CHUNK_CACHE_MAX_CHARS = 64
# terms, each term's surface word (None for CJK and whole identifiers), and the surface words alone;
# Tokens are made only for queries (analyze), so a document's analysis builds no objects per term.
_Analysed = tuple[tuple[str, ...], tuple[str | None, ...], tuple[str, ...]]
_chunk_cache: dict[str, _Analysed] = {}
_word_cache: dict[str, _Analysed] = {}
_TERMS, _TERM_SURFACES, _SURFACES = itemgetter(0), itemgetter(1), itemgetter(2)
_EMPTY: _Analysed = ((), (), ())


@functools.cache
def _cjk_runs() -> re.Pattern[str]:
    # Compiling its character class walks every code point of its ranges (3 to 5 ms at load 1): only
    # text that is not ASCII needs it, so it is compiled when some first comes.
    return re.compile(f"[{_CJK}]+")


def analyze(text: str) -> list[Token]:
    """Tokens of ``text`` in order; the same analysis serves documents and queries."""
    entries = _analysed(split_chunks(text))
    terms = chain.from_iterable(map(_TERMS, entries))
    return list(map(Token, terms, chain.from_iterable(map(_TERM_SURFACES, entries))))


def analyze_terms(text: str) -> tuple[list[str], list[str]]:
    """``analyze``'s terms in order, and the surface words among them: what a document is indexed by."""
    entries = _analysed(split_chunks(text))
    terms = list(chain.from_iterable(map(_TERMS, entries)))
    return terms, list(chain.from_iterable(map(_SURFACES, entries)))


def as_read(text: str) -> str:
    """``text`` as the tokenizer reads it (NFKC: ＰＡＳＳＷＯＲＤ typed in full width is PASSWORD), for
    whatever must judge the words the index will hold (the secret scrubber before learning)."""
    # ASCII is already NFKC; isascii() is a flag check, normalize() a scan
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def split_chunks(text: str) -> list[str]:
    """``text``'s whitespace-separated chunks, normalised: each is analysed independently of the rest."""
    text = as_read(text)
    if "'" in text or "’" in text:
        text = _POSSESSIVE.sub("", text)
    return text.split()


def analysed_chunks(chunks: list[str]) -> list[_Analysed]:
    """Each chunk's (terms, their surface words or None, surface words), from the cache or analysed now."""
    return _analysed(chunks)


def _analysed(chunks: list[str]) -> list[_Analysed]:
    # Map and set operations run in C: a text's chunks are looked up without a Python-level loop.
    cache = _chunk_cache
    try:
        return list(map(cache.__getitem__, chunks))
    except KeyError:  # some chunk is new: analyse every new one, then look them all up again
        missing = set(chunks).difference(cache)
        if len(cache) + len(missing) > CHUNK_CACHE_SIZE:
            cache.clear()
            missing = set(chunks)
            if len(missing) > CHUNK_CACHE_SIZE:  # one text larger than the cache: analyse it uncached
                return [_analyse_chunk(chunk) for chunk in chunks]
        long = False
        for chunk in missing:
            if len(chunk) > CHUNK_CACHE_MAX_CHARS:
                long = True
            else:
                cache[chunk] = _analyse_chunk(chunk)
        if long:
            return [cache[chunk] if chunk in cache else _analyse_chunk(chunk) for chunk in chunks]
    return list(map(cache.__getitem__, chunks))


def _analyse_chunk(chunk: str) -> _Analysed:
    if chunk.isalpha() and chunk.isascii():  # the usual case, a bare word: no need to find it
        return _word_entry(chunk)
    words = _WORD.findall(chunk)
    if len(words) == 1:  # one word with punctuation around it
        return _word_entry(words[0])
    if not words:
        return _EMPTY
    entries = [_word_entry(word) for word in words]
    return (
        tuple(chain.from_iterable(map(_TERMS, entries))),
        tuple(chain.from_iterable(map(_TERM_SURFACES, entries))),
        tuple(chain.from_iterable(map(_SURFACES, entries))),
    )


def _word_entry(word: str) -> _Analysed:
    # "deploy", "deploy." and "`deploy`" are three chunks but one word: analyse it once.
    entry = _word_cache.get(word)
    if entry is None:
        tokens: list[Token] = []
        _analyze_word(word, tokens)
        surfaces = tuple(token.surface for token in tokens)
        entry = tuple(token.term for token in tokens), surfaces, tuple(filter(None, surfaces))
        if len(word) > CHUNK_CACHE_MAX_CHARS:
            return entry
        if len(_word_cache) >= CHUNK_CACHE_SIZE:
            _word_cache.clear()
        _word_cache[word] = entry
    return entry


def _analyze_plain(text: str) -> list[Token]:
    # The analysis without the chunk cache, word by word over the whole text: what analyze must equal.
    tokens: list[Token] = []
    for word in _WORD.findall(_POSSESSIVE.sub("", as_read(text))):
        _analyze_word(word, tokens)
    return tokens


def _analyze_word(word: str, tokens: list[Token]) -> None:
    if not word.isascii() and _cjk_runs().search(word):
        _analyze_mixed(word, tokens)
    else:
        _analyze_identifier(word, tokens)


def tokenize(text: str) -> list[str]:
    """Index terms of ``text`` in order."""
    return [token.term for token in analyze(text)]


def is_cjk_term(term: str) -> bool:
    """True for a CJK character bigram."""
    return not term.isascii() and bool(_cjk_runs().match(term))


def stem(word: str) -> str:
    """A light English suffix stemmer: plurals, -ing/-ed, a few derivations, final -e.

    Both sides of a match go through it, so it only has to be consistent, not linguistic.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    w = word
    if w.endswith("s"):
        if w.endswith("sses"):
            w = w[:-2]
        elif w.endswith("ies") and len(w) > 4:
            w = w[:-3] + "y"
        elif not w.endswith(("ss", "us", "is")):
            w = w[:-1]
    elif w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    if w.endswith(("ing", "ed")):
        root = w[:-3] if w.endswith("ing") else w[:-2]
        if len(root) >= 3 and not _VOWELS.isdisjoint(root):
            w = root
            if w[-1] == w[-2] and w[-1] not in "lsz":  # running -> run, but install -> install
                w = w[:-1]
    if w.endswith(_DERIVATION_SUFFIXES):
        for suffix, replacement in _DERIVATIONS:
            if w.endswith(suffix) and len(w) - len(suffix) >= 4:
                w = w[: -len(suffix)] + replacement
                break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


_DERIVATIONS = (
    ("ization", "ize"),
    ("ational", ""),
    ("ation", ""),
    ("ate", ""),
    ("ness", ""),
    ("ments", ""),
    ("ment", ""),
)
_DERIVATION_SUFFIXES = tuple(suffix for suffix, _ in _DERIVATIONS)
_VOWELS = frozenset("aeiouy")


def _analyze_mixed(word: str, tokens: list[Token]) -> None:
    # Split a word that mixes scripts ("Postgres数据库") into CJK runs and the rest.
    position = 0
    for run in _cjk_runs().finditer(word):
        for rest in _WORD.finditer(word[position : run.start()]):
            _analyze_identifier(rest.group(), tokens)
        _analyze_cjk(run.group(), tokens)
        position = run.end()
    for rest in _WORD.finditer(word[position:]):
        _analyze_identifier(rest.group(), tokens)


def _analyze_cjk(run: str, tokens: list[Token]) -> None:
    # Character bigrams; a lone character carries too little meaning to match on.
    for i in range(len(run) - 1):
        tokens.append(Token(run[i : i + 2], None))


def _analyze_identifier(word: str, tokens: list[Token]) -> None:
    if word.isascii() and word.isalpha() and (word.islower() or word.istitle()):
        part = word.lower()  # one part: what the separator and camel-case split below would give
        if len(part) >= 2 and part not in STOP_WORDS:
            tokens.append(Token(stem(part), part))
        return
    parts: list[str] = []
    for piece in _SEPARATORS.split(word):
        if piece.isascii():
            parts.extend(_CAMEL_PART.findall(piece) or [piece])
        elif piece:
            parts.append(piece)
    folded = [part.casefold() for part in parts]
    if len(folded) > 1:
        whole = _SEPARATORS.sub("_", word.casefold())
        if whole not in STOP_WORDS:
            tokens.append(Token(whole, None))
    for part in folded:
        if len(part) < 2 or part in STOP_WORDS:
            continue
        tokens.append(Token(stem(part), part))
