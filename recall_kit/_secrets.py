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
from typing import TYPE_CHECKING

from recall_kit._errors import ConfigError
from recall_kit._tokenize import as_read

if TYPE_CHECKING:
    import httpx

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
    """``url`` taken apart as httpx parses it (found by hand when it cannot)."""
    import httpx  # only a configured endpoint needs it: learning's scrubbing loads no HTTP client

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return _split_unparsed(url)
    if not parsed.userinfo:
        return UrlParts(url, url, None, ())
    import base64

    bare = str(parsed.copy_with(username=None, password=None))
    # as sent: an error body that echoes the request's Authorization header holds them in base64
    sent = base64.b64encode(f"{parsed.username}:{parsed.password}".encode("utf-8")).decode("ascii")
    return UrlParts(
        request_url=bare,
        shown_url=bare.replace("://", f"://{MASK}@", 1),
        auth=httpx.BasicAuth(parsed.username, parsed.password),
        secrets=tuple(s for s in (parsed.username, parsed.password, sent) if s),
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


# Key shapes: the vendors' prefixes, a JWT, a PEM or PGP block, a credential in a URL, an Authorization
# header's scheme and value, an e-mail address, and the value after a label that names a credential.
# Their spans are blanked before a prompt's words are kept anywhere (docs/learning.md says what goes).
_PASS_WORD = (  # a value that may hold spaces; the word in the languages people type prompts in most
    r"(?:password|passwd|passphrase|passcode|pwd|passwort|kennwort|wachtwoord|contrase[ñn]a|senha|has[łl]o"
    r"|пароль|mot\s+de\s+passe)"
)
# "pw" and "pass" only as a word or a name's end after _ or - (DB_PASS): never "bypass" or "compass"
_SHORT_PASS = r"\b(?:[A-Za-z0-9]+[_\-])?(?:pw|pass)\b"
# A label is a word of its own or the end of a longer name: PGPASSWORD, DB_PASSWORD, GITHUB_TOKEN, STRIPE_KEY.
# The name starts where a run of name characters does, never at a word start inside one: tried from
# every word start of a long run (a-b-c-... in a pasted line, a memory's 256 KiB line), each start read
# the rest of the run again (18 s for 6,000 characters of "a-"; bounded to 64 characters, 16 s for 256 KiB).
_NAME = r"(?<![A-Za-z0-9_\-])[A-Za-z0-9_\-]*?"
_LABEL = (
    rf"(?:{_NAME}(?:{_PASS_WORD}|secret|token|api[_\-]?key|access[_\-]?key|private[_\-]?key|[_\-]key|credentials?"
    rf"|authorization|auth)|{_SHORT_PASS})"
)
_CJK_PASS_WORD = r"(?:密码|密碼|口令|パスワード|暗証番号|비밀번호|암호)"  # no space before what follows it
_QUOTED = r"\"[^\"\n]*\"?|'[^'\n]*'?"
_VALUE = rf"(?:{_QUOTED}|\S+)"
_GAP = r"[^\S\n]"  # a space within the line
_KEY_SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY[A-Z ]*-----.*?(?:-----END [A-Z ]*PRIVATE KEY[A-Z ]*-----|\Z)"
    r"|\b(?:sk|pk|rk)[-_](?:live|test|proj|ant)?[-_]?[A-Za-z0-9_\-]{12,}"
    r"|\b(?:ghp|gho|ghs|ghu|ghr|github_pat)_[A-Za-z0-9_]{16,}"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|\bAIza[0-9A-Za-z_\-]{30,}"
    r"|\beyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]*"
    r"|://[^/\s:@]+:[^/\s@]+@"
    r"|[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b"  # a local part is at most 64
    r"|(?i:\b(?:bearer|basic|digest)\s+)[A-Za-z0-9._~+/\-]{8,}=*"
    # "passphrase: purple monkey dishwasher": after a pass-word and a colon, the rest of the line
    rf"|(?i:(?:{_NAME}{_PASS_WORD}|{_SHORT_PASS})[\"']?\s*[:：](?!=)[^\n]*)"
    # "PGPASSWORD=swordfish", "token: abc", "password => 'abc'": one value; after an Authorization
    # scheme ("Authorization: Bearer abc", "auth=token abc") the scheme and the value
    rf"|(?i:{_LABEL}[\"']?\s*(?::=|=>|=|[:：])\s*(?:(?:bearer|basic|digest|token|bot){_GAP}+)?){_VALUE}"
    # "curl -u user:X": the user and the password
    r"|(?<![\w-])(?:-u|--user)(?:=|[^\S\n]*)[^\s:]*:\S+"
    # "密码是X", "パスワードはX": what follows the word, up to the next space; "密码: X", "密码是 X",
    # "비밀번호: X": after a colon or a space (a few characters of "is" between), the next word too
    rf"|{_CJK_PASS_WORD}(?:\S{{0,8}}?(?:[:：]|{_GAP})[^\S\n]*\S+|\S*)",
    re.S,
)
# Named in prose ("the admin password is X", "the wifi password for the office is X"): the words
# before the verb are kept and the value is blanked. Prose also says "the token is kept in 1Password",
# so what doctor reports as a secret (``sure_only``) leaves out a value that reads as a plain word.
_PROSE_VALUE = re.compile(
    rf"(?P<lead>(?i:{_LABEL}[\"']?(?:{_GAP}+[^\s.,;!?]+){{0,6}}?{_GAP}+(?:is|was|are|were)(?::{_GAP}*|{_GAP}+)))(?P<value>{_VALUE})"
)
_PLAIN_WORD = re.compile(r"[a-z]{1,12}[.,;!?]?|[A-Z][a-z]{1,11}[.,;!?]?")
# After a flag or a command, the value alone is blanked: the words before it are kept.
_VALUE_AFTER = re.compile(
    r"(?P<lead>"
    # "--password X", "--api-key=X"
    rf"(?i:(?<![\w-])--(?:[A-Za-z0-9]+-)*(?:password|passwd|pass|pwd|passphrase|token|secret|key|api-key|auth)"
    rf"(?:=|{_GAP}+))"
    # "docker login -p X", "mysql -u root -pX", a netrc's "login u password X": a few words after the command
    rf"|(?i:\blogin(?:{_GAP}+\S+){{0,6}}?{_GAP}+-p(?:=|{_GAP}*))"
    rf"|(?i:\bmysql(?:{_GAP}+\S+){{0,6}}?{_GAP}+-p)"
    # "sshpass -p X ssh host", "redis-cli -h cache -a X ping", "smbclient -U alice%X": the password alone
    rf"|(?i:\bsshpass{_GAP}+-p(?:=|{_GAP}*))"
    rf"|(?i:\bredis-cli(?:{_GAP}+\S+){{0,6}}?{_GAP}+-a{_GAP}+)"
    rf"|(?i:(?<![\w-])(?:-U|--user){_GAP}*[^\s%]+%)"
    rf"|(?im:^{_GAP}*password{_GAP}+|\blogin{_GAP}+\S+{_GAP}+password{_GAP}+)"
    rf"){_VALUE}"
)
_CARD = re.compile(r"\b\d(?:[ \-]?\d){12,18}\b")  # 13 to 19 digits, spaced or dashed as people write them
_PIECE = re.compile(r"[^\W_]+")  # a token's runs of letters and digits, between its separators
MIN_RANDOM_CHARS = 16  # a token this long with letters and digits mixed, and spread out, looks random
MIN_RANDOM_BITS = 3.2  # Shannon entropy per character; long English words and identifiers stay below it
MIN_MIXED_PIECE = 10  # Xk9mP2vL5qR8tZ3: letters, digits and case changing at least every third character
MIN_LETTER_PIECE = 16  # a letters-only piece this long is a generated token when about half is upper-case,
UPPER_SHARE = (0.35, 0.65)  # (camelCaseWords: under a fifth; random case: a half)
MAX_VOWEL_SHARE = 0.25  # or too few of its letters are vowels (English words: about 0.4),
MAX_CONSONANT_RUN = 5  # or five consonants follow each other ("strengths" has five, not six)
# The tokens looks_random is asked about: a shorter one is never random, whichever of its rules
_CHUNK = re.compile(rf"\S{{{min(MIN_RANDOM_CHARS, MIN_MIXED_PIECE, MIN_LETTER_PIECE)},}}")


def scrub_secrets(text: str, *, sure_only: bool = False) -> str:
    """``text`` with every key-shaped span, card number and random-looking token blanked: what may be kept of it.

    With ``sure_only`` (what doctor reports), a value named only in prose is blanked only when it does
    not read as a plain word: "the password is hunter2" is, "the token is kept in 1Password" is not.

    A secret typed in full width (ＰＡＳＳＷＯＲＤ＝ｘ) is seen as the index reads the text (``as_read``):
    when that reading holds a secret, it is what is returned, blanked.
    """
    scrubbed = _scrubbed(text, sure_only)
    folded = as_read(text)
    if folded is text or folded == text:
        return scrubbed
    folded_scrubbed = _scrubbed(folded, sure_only)
    return scrubbed if folded_scrubbed == folded else folded_scrubbed


def _scrubbed(text: str, sure_only: bool) -> str:
    text = _KEY_SHAPES.sub(" ", text)
    text = _PROSE_VALUE.sub(lambda m: m.group() if sure_only and _PLAIN_WORD.fullmatch(m.group("value"))
                            else m.group("lead") + " ", text)
    text = _VALUE_AFTER.sub(lambda m: m.group("lead") + " ", text)
    text = _CARD.sub(lambda m: " " if _luhn_valid(m.group()) else m.group(), text)
    return _CHUNK.sub(lambda m: " " if looks_random(m.group(), sure_only=sure_only) else m.group(), text)


def looks_random(token: str, *, sure_only: bool = False) -> bool:
    """Whether ``token`` looks like a generated secret: long and high in entropy with letters and digits
    mixed, or with a piece whose characters change class too often, or letters no language writes.

    With ``sure_only`` the long, high-entropy run must be one piece between separators: a path, a host
    and port or a slug (``meterd-v2-usage-api``) mixes many characters without being random.
    """
    core = token.strip("\"'`()[]{}<>,.;:!?")
    pieces = _PIECE.findall(core)
    if any(_random_whole(part) for part in (pieces if sure_only else [core])):
        return True
    return any(_random_piece(piece) for piece in pieces)


def _random_whole(core: str) -> bool:
    if len(core) < MIN_RANDOM_CHARS or not core.isascii():  # a generated token is ASCII; Japanese is not random
        return False
    if not (any(ch.isdigit() for ch in core) and any(ch.isalpha() for ch in core)):
        return False
    return _bits(core) >= MIN_RANDOM_BITS


def _random_piece(piece: str) -> bool:
    if not piece.isascii():  # the letter-share rules are for the Latin alphabet: 在庫サービス has no vowels
        return False
    has_digit = any(ch.isdigit() for ch in piece)
    if has_digit and any(ch.isalpha() for ch in piece):
        return len(piece) >= MIN_MIXED_PIECE and _class_changes(piece) * 3 >= len(piece) - 1
    if has_digit or len(piece) < MIN_LETTER_PIECE:
        return False
    upper = sum(ch.isupper() for ch in piece)
    if UPPER_SHARE[0] <= upper / len(piece) <= UPPER_SHARE[1]:  # rAnDoMcAsE, not camelCaseWords
        return True
    letters = piece.lower()
    vowels = sum(ch in "aeiou" for ch in letters)
    run = longest = 0
    for ch in letters:
        run = 0 if ch in "aeiou" else run + 1
        longest = max(longest, run)
    return vowels < MAX_VOWEL_SHARE * len(letters) or longest > MAX_CONSONANT_RUN


def _class_changes(piece: str) -> int:
    """How often neighbouring characters differ in class: digit, upper-case, lower-case."""
    classes = [0 if ch.isdigit() else 1 if ch.isupper() else 2 for ch in piece]
    return sum(a != b for a, b in zip(classes, classes[1:]))


def _bits(text: str) -> float:
    counts: dict[str, int] = {}
    for ch in text:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _luhn_valid(number: str) -> bool:
    digits = [int(ch) for ch in number if ch.isdigit()]
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(reversed(digits)))
    return total % 10 == 0
