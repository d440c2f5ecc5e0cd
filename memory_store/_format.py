"""Writing a memory: the one place frontmatter is produced, and where a new memory's file goes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_SLUG_CHARS = 60
_NOT_WORD = re.compile(r"[^\w]+", flags=re.UNICODE)


def format_memory(
    *,
    name: str,
    description: str,
    type: str,
    body: str = "",
    keywords: Sequence[str] = (),
    usage_scenarios: Sequence[str] = (),
    extra: Mapping[str, Any] | None = None,
) -> str:
    """A memory file's text: YAML frontmatter (name, description, type, then the optional lists and
    any ``extra`` fields, in that order) between ``---`` lines, then the body.

    Values are quoted by YAML's own rules, so a ``: `` or a ``#`` in a description survives the
    round trip through ``parse_memory``. It does not validate: ``parse_memory`` does.
    """
    fields: dict[str, Any] = {"name": name, "description": description, "type": type}
    if keywords:
        fields["keywords"] = list(keywords)
    if usage_scenarios:
        fields["usage_scenarios"] = list(usage_scenarios)
    for key, value in (extra or {}).items():
        fields.setdefault(key, value)
    import yaml  # only a write needs it: reading a store through the index cache does not

    front = yaml.safe_dump(fields, allow_unicode=True, sort_keys=False, width=1 << 20)
    return f"---\n{front}---\n{body.rstrip()}\n"


def memory_slug(name: str) -> str:
    """The file name stem a new memory called ``name`` gets: lower-case words joined by ``-``."""
    return _words(name) or "memory"


def _words(name: str) -> str:
    words = _NOT_WORD.sub("-", name.lower()).strip("-_")
    return words[:MAX_SLUG_CHARS].rstrip("-_")


TYPE_FOLDERS = {"project": "projects"}  # as the examples file them: user/, feedback/, reference/, projects/<project>/


def new_memory_path(type: str, name: str, project: str | None = None) -> str:
    """Where a new memory goes, relative to its root: ``<type folder>/<slug of name>.md``, a project's
    under ``projects/<slug of project>/`` (ValueError for a project with any other type)."""
    folder = TYPE_FOLDERS.get(type, type)
    if project is not None:
        if type != "project":
            raise ValueError(f"a project folder is for type project, not {type}")
        if not _words(project):  # "", "../..": filed under projects/memory/ before, silently
            raise ValueError(f"the project name {project!r} has no letter or digit to name its folder")
        folder = f"{folder}/{_words(project)}"
    return f"{folder}/{memory_slug(name)}.md"
