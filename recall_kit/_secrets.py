"""Keeping credentials out of everything we print, log or return.

Redaction runs on the whole text before anything is cut, and also removes every run of the text that
matches a fragment of a secret of ``FRAGMENT`` characters or more, so a secret echoed in part (or cut
by someone else) leaks no recognisable piece either.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

from recall_kit._errors import ConfigError

MASK = "***"
FRAGMENT = 8  # a shorter run matching part of a key is too common to mean anything
_SCAN_SLACK = 4096  # characters kept beyond a cut before redaction, so a secret across it is seen whole


class Redactor:
    """Masks the given secrets, and any run of 8 or more characters taken from one, in text."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._fragments = frozenset(
            s[i : i + FRAGMENT] for s in self._secrets if len(s) >= FRAGMENT for i in range(len(s) - FRAGMENT + 1)
        )

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __call__(self, text: str, limit: int | None = None) -> str:
        """``text`` with every secret masked, then cut to ``limit`` characters."""
        if limit is not None:
            text = text[: limit + _SCAN_SLACK]
        if self._secrets:
            for secret in self._secrets:
                text = text.replace(secret, MASK)
            text = self._mask_fragments(text)
        return text if limit is None else text[:limit]

    def _mask_fragments(self, text: str) -> str:
        if not self._fragments or len(text) < FRAGMENT:
            return text
        covered = bytearray(len(text))
        for i in range(len(text) - FRAGMENT + 1):
            if text[i : i + FRAGMENT] in self._fragments:
                covered[i : i + FRAGMENT] = b"\x01" * FRAGMENT
        if not any(covered):
            return text
        out: list[str] = []
        masking = False
        for ch, hidden in zip(text, covered):
            if hidden:
                if not masking:
                    out.append(MASK)
                masking = True
            else:
                out.append(ch)
                masking = False
        return "".join(out)


def clean_api_key(key: str | None, origin: str) -> str | None:
    """Surrounding whitespace is stripped; a key with an invisible, control or non-ASCII character
    left inside (a copy-paste accident) is refused, since it can never authenticate."""
    if key is None:
        return None
    key = key.strip().strip("\u200b\u200c\u200d\u2060\ufeff\u00a0\u202f").strip()
    if not key:
        return None
    for position, ch in enumerate(key, start=1):
        if not (ch.isascii() and ch.isprintable()) or ch.isspace() or unicodedata.category(ch) == "Cf":
            raise ConfigError(
                f"{origin}: the API key has an invisible or non-ASCII character at position {position} "
                f"(U+{ord(ch):04X}); copy it again"
            )
    return key


@dataclass(frozen=True, slots=True)
class UrlParts:
    """A base URL taken apart: what to request, what to show, and the credentials it carried."""

    request_url: str  # without credentials (httpx logs request URLs)
    shown_url: str  # credentials masked
    auth: httpx.BasicAuth | None
    secrets: tuple[str, ...]


def split_url_credentials(url: str) -> UrlParts:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return _split_unparsed(url)
    if not parsed.userinfo:
        return UrlParts(url, url, None, ())
    bare = str(parsed.copy_with(username=None, password=None))
    return UrlParts(
        request_url=bare,
        shown_url=bare.replace("://", f"://{MASK}@", 1),
        auth=httpx.BasicAuth(parsed.username, parsed.password),
        secrets=tuple(s for s in (parsed.username, parsed.password) if s),
    )


def _split_unparsed(url: str) -> UrlParts:
    """A URL httpx cannot parse (it will never be requested): credentials found by hand, to mask them."""
    scheme, separator, rest = url.partition("://")
    authority_end = min([i for i in (rest.find(c) for c in "/?#") if i >= 0] or [len(rest)])
    at = rest.rfind("@", 0, authority_end)
    if not separator or at < 0:
        return UrlParts(url, url, None, ())
    secrets = tuple(s for s in rest[:at].split(":", 1) if s)
    return UrlParts(url, f"{scheme}://{MASK}@{rest[at + 1:]}", None, secrets)


def display_url(url: str | None) -> str | None:
    """``url`` with any credentials in it masked: safe to print, log or put in JSON."""
    return None if url is None else split_url_credentials(url).shown_url


# Key shapes: the vendors' prefixes, a JWT, a PEM block, a credential in a URL, and the value after
# a "password=" or "token:" label. Their spans are blanked before a prompt's words are kept anywhere.
_KEY_SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)"
    r"|\b(?:sk|pk|rk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_\-]{12,}"
    r"|\b(?:ghp|gho|ghs|ghu|ghr|github_pat)_[A-Za-z0-9_]{16,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"
    r"|\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*"
    r"|://[^/\s:@]+:[^/\s@]+@"
    r"|(?i:\b(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|auth)\b\s*[:=]\s*)\S+",
    re.S,
)
_CHUNK = re.compile(r"\S+")
MIN_RANDOM_CHARS = 16  # a token this long with letters and digits mixed, and spread out, looks random
MIN_RANDOM_BITS = 3.2  # Shannon entropy per character; long English words and identifiers stay below it


def scrub_secrets(text: str) -> str:
    """``text`` with every key-shaped span and long random-looking token blanked: what may be kept of it."""
    text = _KEY_SHAPES.sub(" ", text)
    return _CHUNK.sub(lambda m: " " if looks_random(m.group()) else m.group(), text)


def looks_random(token: str) -> bool:
    """Whether ``token`` looks like a generated secret: long, letters and digits mixed, high entropy."""
    core = token.strip("\"'`()[]{}<>,.;:!?")
    if len(core) < MIN_RANDOM_CHARS:
        return False
    has_digit = any(ch.isdigit() for ch in core)
    has_letter = any(ch.isalpha() for ch in core)
    if not (has_digit and has_letter):
        return False
    counts: dict[str, int] = {}
    for ch in core:
        counts[ch] = counts.get(ch, 0) + 1
    bits = -sum(n / len(core) * math.log2(n / len(core)) for n in counts.values())
    return bits >= MIN_RANDOM_BITS
