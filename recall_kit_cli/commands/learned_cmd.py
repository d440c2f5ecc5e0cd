"""`recall-kit learned` and `learned clear`: what the fast stage learned from the model, per memory, and forgetting it."""

from __future__ import annotations

import time
from typing import Any

import click

from memory_store import LEARNED_PATH, LearnedEntry, MemoryStore, MemoryStoreError
from recall_kit.cache import forget_learning
from recall_kit_cli._format import InputError, error_line
from recall_kit_cli._help import HelpGroup
from recall_kit_cli._output import clean, clean_ref, counted, echo, echo_json, echo_rows, warn
from recall_kit_cli._config_file import open_store, root_option
from recall_kit_cli.commands.manage_cmd import cache_folder, find_doc

_OPT_IN = "learning is opt-in: recall-kit serve --learn, RECALL_KIT_LEARN=1 or learn = true in recall-kit.toml"


@click.group("learned", cls=HelpGroup, invoke_without_command=True)
@root_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object on stdout.")
@click.pass_context
def learned(ctx: click.Context, roots: tuple[str, ...], as_json: bool) -> None:
    """Show what was learned from the model's picks: per memory, its learned
    keys (term, count, last seen) and how many prompts it stays silent for.

    \b
    Example:
      recall-kit learned --root ~/memories
      recall-kit learned clear memories/projects/deploy.md --root ~/memories
    """
    ctx.obj = roots  # `learned --root R clear`: the roots apply to clear too
    if ctx.invoked_subcommand is not None:
        return
    with open_store(roots) as store:
        memories, stale, problems = _learned(store)
        store_roots = store.roots
    if as_json:
        echo_json({
            "roots": [{"scope": label, "path": path} for label, path in store_roots],
            "memories": memories,
            "stale_entries": stale,
            "problems": problems,
        })
        return
    where = ", ".join(f"{clean(label)} ({clean(path)})" for label, path in store_roots)
    if not memories:
        echo_rows([f"nothing learned in {where}", f"({_OPT_IN})"])
    else:
        keys = sum(len(m["keys"]) for m in memories)
        echo_rows([f"{counted(len(memories), 'memory', 'memories')} learned {counted(keys, 'key')}, in {where}"])
    for memory in memories:
        echo_rows([f"  {clean(memory['ref'])}: {counted(len(memory['keys']), 'key')}, "
                   f"{counted(memory['suppressors'], 'suppressor')}"])
        width = max((len(clean(key["term"])) for key in memory["keys"]), default=0)
        echo_rows(f"    {clean(key['term']):<{width}}  {key['count']:>4}  {_when(key['seen'])}" for key in memory["keys"])
    if stale:
        echo_rows([f"{counted(stale, 'entry', 'entries')} of memories not listed now (dropped at the next update once their file is gone; a file that fails to parse keeps its entry)"])
    if problems:
        echo_rows(["problems:", *(f"  {line}" for line in problems)])


@learned.command("clear")
@click.argument("ref", required=False)
@root_option
@click.pass_context
def clear(ctx: click.Context, ref: str | None, roots: tuple[str, ...]) -> None:
    """Forget what was learned: for every memory, or only for REF.

    \b
    Example:
      recall-kit learned clear --root ~/memories
    """
    given = roots or ctx.obj or ()
    with open_store(given) as store:
        try:
            if ref is None:
                forgotten = forget_learning(store, cache_dir=cache_folder(given))
            else:
                doc = find_doc(store.snapshot().docs, ref)
                forgotten = forget_learning(store, doc.scope, [doc.path], cache_dir=cache_folder(given))
        except MemoryStoreError as exc:
            raise InputError(str(exc)) from None
        if forgotten.cache_problem:
            warn(forgotten.cache_problem)  # the index holds learned words too
        removed = forgotten.learned_entries
    if ref is None:
        echo(f"forgot what was learned for {counted(removed, 'memory', 'memories')}")
        return
    echo(f"forgot what was learned for {clean_ref(doc.ref)}" if removed else f"nothing was learned for {clean_ref(doc.ref)}")


def _learned(store: MemoryStore) -> tuple[list[dict[str, Any]], int, list[str]]:
    """(one object per memory that learned something, entries of memories that are gone, the file's problems)."""
    docs = store.snapshot().docs
    memories: list[dict[str, Any]] = []
    stale = 0
    for label, _path in store.roots:
        entries: dict[str, LearnedEntry] = store.learned_entries(label)
        for rel in sorted(entries):
            ref = f"{label}/{rel}"
            if ref not in docs:
                stale += 1
                continue
            entry = entries[rel]
            memories.append({
                "ref": ref,
                "keys": [{"term": k.term, "count": k.count, "seen": k.seen} for k in entry.keys],
                "suppressors": len(entry.suppressors),
            })
    folder = LEARNED_PATH.rpartition("/")[0]
    problems = [
        error_line(err) for err in store.snapshot().errors
        if err.path == folder or err.path.startswith(LEARNED_PATH)
    ]
    return memories, stale, problems


def _when(seen: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seen))
