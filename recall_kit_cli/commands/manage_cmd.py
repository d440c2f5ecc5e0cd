"""`recall-kit add`, `show` and `rm`: one memory at a time, validated as the store validates."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import click

from memory_store import (
    DEFAULT_MAX_BYTES, MEMORY_TYPES, MemoryDoc, MemoryExistsError, MemoryParseError, MemoryRoot, MemoryStoreError, given_ref, shown_ref,
)
from recall_kit import ConfigError, render_memories
from recall_kit.cache import forget_memory
from recall_kit_cli._format import InputError
from recall_kit_cli._help import HelpCommand
from recall_kit_cli._output import clean, clean_ref, clean_block, echo, echo_json, warn
from recall_kit_cli._config_file import load, open_store, resolve_roots, root_option

_SURROGATES = re.compile("[\ud800-\udfff]")
_EDITOR_HINT = "\n# Write the memory's body above. Lines starting with '#' below the body are kept.\n"


@click.command("add", cls=HelpCommand)
@click.option("--name", required=True, help="Short title (the file name).")
@click.option("--description", required=True, help="When it applies.")
@click.option("--type", "type_", required=True, type=click.Choice(sorted(MEMORY_TYPES)))
@click.option("--project", help="Type project: file it under projects/PROJECT/.")
@click.option("--keyword", "keywords", multiple=True, help="A keyword (repeatable).")
@click.option("--body", help="Default: stdin, or $EDITOR.")
@click.option("--root", "root", metavar="DIR", help="Folder to write into.")
@click.option("--force", is_flag=True, help="Replace one of the same name.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def add(
    name: str, description: str, type_: str, project: str | None, keywords: tuple[str, ...], body: str | None,
    root: str | None, force: bool, as_json: bool,
) -> None:
    """Save a memory as ROOT/TYPE/SLUG.md (a project's as ROOT/projects/PROJECT/SLUG.md, as the examples
    file them), atomically; never over one without --force.

    \b
    Example:
      echo "Run alembic upgrade head." | recall-kit add --type project \\
          --project atlas --name "Migrations" --description "how it migrates"
    """
    if project is not None and type_ != "project":
        raise InputError(f"not saved: --project is for --type project, not {type_}")
    fields = {"--name": name, "--description": description, "--body": body or "", "--keyword": "".join(keywords),
              "--project": project or ""}
    for option, value in fields.items():
        if _SURROGATES.search(value):  # bytes that were not UTF-8 in the argument
            raise InputError(f"not saved: {option} is not valid UTF-8")
    folder = Path(root) if root else Path(resolve_roots(()).paths[0])
    if not folder.is_dir():
        raise InputError(f"memory root {'is not a folder' if folder.exists() else 'does not exist'}: {folder}")
    if body is None:
        body = _read_body()
        if _SURROGATES.search(body):
            raise InputError("not saved: the body is not valid UTF-8")
    try:
        saved = MemoryRoot(folder.resolve()).save(
            name=name, description=description, type=type_, body=body, keywords=keywords, overwrite=force,
            project=project,
        )
    except MemoryExistsError as exc:
        raise InputError(f"not saved: {exc}; pass --force to replace it") from None
    except (MemoryParseError, MemoryStoreError) as exc:
        raise InputError(f"not saved: {exc}") from None
    if as_json:
        echo_json({"ref": saved.ref, "path": str(saved.path), "overwritten": saved.overwritten})
    else:
        echo(f"{'replaced' if saved.overwritten else 'added'} {clean_ref(saved.ref)} ({clean(saved.path)})")


def _read_body() -> str:
    """The body from stdin (at most a memory file's size: what is larger could never be saved), or from $EDITOR."""
    if not sys.stdin.isatty():
        data = sys.stdin.buffer.read(DEFAULT_MAX_BYTES + 1)
        if len(data) > DEFAULT_MAX_BYTES:
            raise InputError(f"not saved: the body on stdin is over the {DEFAULT_MAX_BYTES}-byte limit of a memory file")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError("not saved: the body is not valid UTF-8") from None
    edited = click.edit(_EDITOR_HINT, extension=".md")
    if edited is None:
        raise InputError("not saved: the editor was closed without saving")
    return edited.split(_EDITOR_HINT, 1)[0] if _EDITOR_HINT in edited else edited


def find_doc(docs: Mapping[str, MemoryDoc], ref: str) -> MemoryDoc:
    """The doc a REF names: its ref as `list` shows it (a byte of the file name that is not UTF-8
    written \\xNN), which names one memory alone; else its ref, its path under a root, or a file path,
    as given or read as shown. Two memories named are an error that shows both refs."""
    exact = [doc for doc in docs.values() if shown_ref(doc.ref) == ref]
    if len(exact) == 1:
        return exact[0]
    found = {doc.ref: doc for doc in [*_named(docs, ref), *_named(docs, given_ref(ref))]}
    matches = list(found.values())
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        shown = ", ".join(shown_ref(doc.ref) for doc in matches[:3])
        raise InputError(f"'{ref}' names {len(matches)} memories ({shown}); give one ref as `recall-kit list` shows it")
    raise InputError(f"no memory '{ref}'; `recall-kit list` shows the refs")  # shown cleaned: \xe9, not \udce9


def _named(docs: Mapping[str, MemoryDoc], ref: str) -> list[MemoryDoc]:
    if ref in docs:
        return [docs[ref]]
    wanted = os.path.abspath(ref)
    return [d for d in docs.values() if d.path == ref or str(d.abspath) == wanted]


@click.command("show", cls=HelpCommand)
@click.argument("ref")
@root_option
@click.option("--raw", is_flag=True, help="The file as written, frontmatter included.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
def show(ref: str, roots: tuple[str, ...], raw: bool, as_json: bool) -> None:
    """Show one memory as the agent would see it (or --raw, the file itself).

    \b
    Example:
      recall-kit show memories/user/profile.md --root examples/memories
    """
    with open_store(roots) as store:
        doc = find_doc(store.snapshot().docs, ref)
        try:
            text = store.read_bytes(doc.ref).decode("utf-8", "replace") if raw else ""
        except MemoryStoreError as exc:
            raise InputError(str(exc)) from None
    if as_json:  # exact: the block as the agent receives it
        text = text if raw else render_memories([doc])
        echo_json({"ref": doc.ref, "path": str(doc.abspath), "raw": raw, "text": text})
    else:
        echo(clean_block((text if raw else render_memories([_visible(doc)])).rstrip("\n")))


def _visible(doc: MemoryDoc) -> MemoryDoc:
    """``doc`` with each field a person reads through ``clean``, so a control character in it shows
    as its escape (``\\x1b``), as `list` shows it; the block itself would drop it from a title unseen."""
    return dataclasses.replace(
        doc, scope=clean(doc.scope), path=clean(doc.path), name=clean(doc.name),
        description=clean(doc.description), body=clean_block(doc.body),
    )


@click.command("rm", cls=HelpCommand)
@click.argument("ref")
@root_option
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def rm(ref: str, roots: tuple[str, ...], yes: bool) -> None:
    """Delete one memory file, after confirmation unless --yes.

    \b
    Example:
      recall-kit rm memories/user/old-note.md --root ~/memories --yes
    """
    with open_store(roots) as store:
        doc = find_doc(store.snapshot().docs, ref)
        if not yes:
            if not sys.stdin.isatty():
                raise InputError(f"not removed: pass --yes to remove {shown_ref(doc.ref)} without a terminal")
            if not click.confirm(f"remove {clean_ref(doc.ref)} ({clean(doc.name)})?", default=False):
                raise InputError(f"not removed: {shown_ref(doc.ref)}")
        try:
            forgotten = forget_memory(store, doc.ref, cache_dir=cache_folder(roots))  # learned words and caches too
        except MemoryStoreError as exc:
            raise InputError(str(exc)) from None
        if forgotten.cache_problem:
            warn(forgotten.cache_problem)
    echo(f"removed {clean_ref(doc.ref)}")


def cache_folder(given: tuple[str, ...]) -> str | None:
    """The index cache folder the settings name for ``given`` roots (None: the per-user default)."""
    try:
        folder = load(roots=given).cache_dir.value
    except (ConfigError, InputError, MemoryStoreError) as exc:
        warn(f"index cache not cleared: {exc}")
        return None
    return None if folder is None else str(folder)
