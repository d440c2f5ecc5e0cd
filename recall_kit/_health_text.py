"""What doctor reads in a memory file's lines: what learning's secret scrubber would blank there,
and the file paths, commands and code symbols the memory names.

A secret is whatever ``recall_kit._secrets.scrub_secrets`` (what learning keeps of a prompt) blanks:
one owner decides what a secret is. Doctor says which line and column, never what is there.

A reference is taken only where a memory writes it as code or as a path:
- a path: a token with a '/' whose last part has an extension (``harbor/db/session.py``), anywhere;
  inside backticks also a folder (``harbor/payments/``) or a file name with an extension
  (``pyproject.toml``);
- a command: ``make TARGET``, ``npm run``/``pnpm run``/``yarn run`` SCRIPT, ``just RECIPE`` inside backticks;
- a symbol: a backticked identifier that reads as code (``get_or_set``, ``parseConfig``,
  ``cache.get_or_set(...)``), four characters or more.
URLs, home and absolute paths, placeholders (``<slug>``, ``$VAR``, ``*.py``) and domain-led paths
(``sentry.io/...``) are not references to the project.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from recall_kit._secrets import scrub_secrets

ReferenceKind = Literal["path", "command", "symbol"]

_CODE_SPAN = re.compile(r"`([^`\n]{1,300})`")
_BARE_PATH = re.compile(r"(?<![\w/.~`$@:-])((?:\.?[\w-]+/)+[\w.-]*\.[A-Za-z0-9]{1,8})(?![\w/`])")
_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_PLACEHOLDER = re.compile(r"[<>{}*?\[\]$%|\\]")
_DOMAIN = re.compile(r"^[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|io|dev|org|net|app|co|ai|sh|me|cloud|so|gg|xyz|info|edu|gov|[a-z]{2})$")
_IDENTIFIER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\(.*\))?$")
_CAMEL = re.compile(r"[a-z][A-Z]")
_RUNNERS = {"make": "make", "just": "just", "npm": "npm", "pnpm": "npm", "yarn": "npm"}
MIN_SYMBOL_CHARS = 4


@dataclass(frozen=True, slots=True)
class Reference:
    """Something a memory names in the project: a path, a command (runner and its target) or a symbol."""

    kind: ReferenceKind
    name: str  # the path, the target (a make target, a script) or the identifier
    line: int  # 1-based, in the file
    runner: str = ""  # for a command: "make", "just" or "npm"


def secret_columns(text: str) -> Iterator[tuple[int, int]]:
    """(line, column) of the first character learning's scrubber blanks on each line that has one (1-based),
    leaving out a plain word it blanks only because prose names it after a credential's label."""
    if scrub_secrets(text, sure_only=True) == text:
        return  # every span a line's scrub blanks, the whole text's blanks too: most memories stop here
    for number, line in enumerate(text.split("\n"), 1):
        scrubbed = scrub_secrets(line, sure_only=True)
        if scrubbed != line:
            yield number, _first_difference(line, scrubbed) + 1


def _first_difference(a: str, b: str) -> int:
    for position, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return position
    return min(len(a), len(b))


def shown_line(line: str) -> str:
    """A memory's line as doctor may show it: what the scrubber is sure is a secret is blanked, and it is cut."""
    cleaned = " ".join(scrub_secrets(line, sure_only=True).split())
    return cleaned if len(cleaned) <= 160 else cleaned[:159] + "…"


def references(text: str) -> list[Reference]:
    """Every path, command and symbol the memory text names, in order, each (kind, name) once; never
    one the scrubber is sure blanks a secret in its line (``ghp_…/key.txt``, ``make push-AKIA…``): doctor would print it."""
    found: dict[tuple[str, str, str], Reference] = {}
    in_fence = False
    for number, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        spans = [m.group(1) for m in _CODE_SPAN.finditer(line)]
        if in_fence:
            spans = [line]
        named = [ref for span in spans for ref in _span_references(span, number)]
        prose = _CODE_SPAN.sub(" ", line) if not in_fence else ""
        for match in _BARE_PATH.finditer(prose):
            path = _project_path(match.group(1), quoted=False)
            if path is not None:
                named.append(Reference("path", path, number))
        if not named:
            continue
        shown = scrub_secrets(line, sure_only=True)  # the full scrub blanks ordinary paths: build/out2/a.txt
        for ref in named:
            if ref.name in shown:
                found.setdefault((ref.kind, ref.runner, ref.name), ref)
    return list(found.values())


def _span_references(span: str, line: int) -> Iterator[Reference]:
    words = span.split()
    if not words:
        return
    runner = _RUNNERS.get(words[0])
    if runner is not None and len(words) > 1:
        target = _command_target(words, runner)
        if target is not None:
            yield Reference("command", target, line, runner)
    for word in words:
        path = _project_path(word.strip("\"'(),;"), quoted=True)
        if path is not None:
            yield Reference("path", path, line)
    if len(words) == 1 or _IDENTIFIER.match(span):
        symbol = _symbol(span if _IDENTIFIER.match(span) else words[0])
        if symbol is not None:
            yield Reference("symbol", symbol, line)


def _command_target(words: list[str], runner: str) -> str | None:
    rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if runner == "npm":
        # only `<runner> run SCRIPT`: `pnpm turbo` may run a package's binary, `npm test` is npm's own
        if len(rest) < 2 or rest[0] != "run":
            return None
        rest = rest[1:]
    target = rest[0] if rest else None
    if target is None or _PLACEHOLDER.search(target) or not re.fullmatch(r"[\w:.\-/]+", target):
        return None
    return target


def _project_path(word: str, *, quoted: bool) -> str | None:
    """``word`` as a path inside the project, or None when it is no such reference: a file needs a
    known extension or name (``main.go``, ``Makefile``, ``.nvmrc``); a folder (``src/stores/``) and a
    bare file name count only inside backticks."""
    word = word.split("::", 1)[0].rstrip(".,:;")  # rules/mod.rs::all_rules: the file
    if not word or "://" in word or "@" in word or word.startswith(("~", "/", "$", "-")) or _PLACEHOLDER.search(word):
        return None
    if word.startswith("./"):
        word = word[2:]
    parts = word.rstrip("/").split("/")
    if any(part in ("", "..") for part in parts):
        return None
    if len(parts) > 1 and _DOMAIN.match(parts[0]):
        return None  # sentry.io/organizations/...: a URL without its scheme
    if word.endswith("/"):
        return word if quoted and not _DOMAIN.match(parts[0]) else None
    if not _is_file_name(parts[-1]):
        return None
    return word if len(parts) > 1 or quoted else None


def _is_file_name(name: str) -> bool:
    """A name that reads as a file: a known extension, or a file name projects keep without one."""
    if name in _FILE_NAMES:
        return True
    stem, dot, extension = name.rpartition(".")
    return bool(dot) and bool(stem.strip(".")) and extension.lower() in _EXTENSIONS or name in _DOTFILES


_EXTENSIONS = frozenset("""
    py pyi pyx ts tsx js jsx mjs cjs go rs rb java kt kts swift m mm c h cc cpp hpp cs php scala clj ex exs erl
    hs lua dart vue svelte sql sh bash zsh fish ps1 md mdx rst txt toml yaml yml json jsonc json5 ini cfg conf
    env lock xml html htm css scss sass less proto graphql gql tf tfvars hcl nix gradle properties csv tsv ipynb
    mk cmake bzl sbt cabal gemspec plist snap hujson service timer socket j2 jinja tmpl tpl ejs hbs dockerfile
    patch diff sum mod wasm
""".split())
_FILE_NAMES = frozenset("""
    Makefile makefile GNUmakefile Dockerfile Containerfile Justfile justfile Caddyfile Procfile Gemfile Rakefile
    Vagrantfile Jenkinsfile Brewfile Pipfile Taskfile CODEOWNERS LICENSE README CHANGELOG
""".split())
_DOTFILES = frozenset("""
    .nvmrc .node-version .python-version .ruby-version .tool-versions .env .envrc .gitignore .gitattributes
    .dockerignore .editorconfig .npmrc .yarnrc .prettierrc .eslintrc .babelrc .golangci .pre-commit-config
""".split())


def _symbol(span: str) -> str | None:
    match = _IDENTIFIER.match(span.strip())
    if match is None:
        return None
    dotted, call = match.group(1), match.group(2)
    name = dotted.rsplit(".", 1)[-1]
    if len(name) < MIN_SYMBOL_CHARS:
        return None
    codelike = "_" in name.strip("_") or _CAMEL.search(name) or call is not None or "." in dotted
    if not codelike or name.isupper() and "_" not in name:
        return None  # a plain word (`main`, `develop`), or an acronym (`HTTP`)
    if "." in dotted and _EXTENSION.search(dotted) and call is None:
        return None  # a file name, checked as a path
    return name
