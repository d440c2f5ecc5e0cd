"""Conventions a client or a shell relies on: the MCP server says what it is and what each tool does,
and pages its resources; usage is printed as lines; a closed pipe is a normal end, never status 1."""

from __future__ import annotations

import base64
import os
import subprocess
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

import anyio
import pytest
from cli_support import EXAMPLES, REPO, RECALL_KIT, assert_one_line_error, clean_environ, run_recall_kit
from mcp_support import needs_mcp
from store_helpers import memory, wait_until, write

from memory_store import MemoryStore, MemoryStoreError

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

DEPLOY_REF = "memories/projects/ledgerline/deploy.md"


def _mcp_session(root: Path, body: Callable[[ClientSession], Awaitable[None]], *, info: list[object]) -> None:
    """Run ``body`` in a real stdio MCP session with `recall-kit mcp --root ROOT`."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(RECALL_KIT), args=["mcp", "--fast-only", "--root", str(root)], env=clean_environ()
    )

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    info.append((await session.initialize()).server_info)
                    await body(session)

    anyio.run(main)


def _many_memories(root: Path, count: int) -> list[str]:
    folder = root / "reference"
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"note-{i:04d}.md").write_text(
            f"---\nname: Note {i}\ndescription: reference note number {i}\ntype: reference\n---\nbody {i}\n"
        )
    return [f"{root.name}/reference/note-{i:04d}.md" for i in range(count)]


# --- MCP --------------------------------------------------------------------------------------------


@needs_mcp
def test_the_mcp_server_names_its_version_and_what_each_tool_does(tmp_path: Path) -> None:
    info: list[object] = []
    annotations = {}

    async def body(session: ClientSession) -> None:
        for tool in (await session.list_tools()).tools:
            annotations[tool.name] = tool.annotations

    _mcp_session(EXAMPLES, body, info=info)

    assert getattr(info[0], "version") == version("recall-kit") != ""
    for name in ("search_memories", "read_memory", "recall"):
        assert annotations[name] is not None and annotations[name].read_only_hint is True, name
    remember = annotations["remember"]
    assert remember is not None
    assert (remember.read_only_hint, remember.destructive_hint, remember.idempotent_hint) == (False, False, True)


@needs_mcp
def test_resources_are_listed_a_page_at_a_time_with_a_cursor(tmp_path: Path) -> None:
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, PaginatedRequestParams

    from recall_kit_cli.integrations.mcp_server import RESOURCE_PAGE_SIZE

    root = tmp_path / "notes"
    refs = _many_memories(root, RESOURCE_PAGE_SIZE * 2 + 7)
    pages: list[list[str]] = []
    refused: list[str] = []

    async def body(session: ClientSession) -> None:
        cursor = None
        while True:
            result = await session.list_resources(params=PaginatedRequestParams(cursor=cursor))
            pages.append([resource.name for resource in result.resources])
            cursor = result.next_cursor
            if cursor is None:
                break
        made.append(first_next)
        for forged in ("not a cursor of ours", base64.urlsafe_b64encode(refs[10].encode()).decode(),
                       first_next.rpartition(".")[0] + "." + base64.urlsafe_b64encode(b"\0" * 16).decode(),
                       base64.urlsafe_b64encode(refs[10].encode()).decode() + "." + first_next.rpartition(".")[2]):
            try:
                await session.list_resources(params=PaginatedRequestParams(cursor=forged))
            except MCPError as exc:  # the SDK raises the server's error, with its code
                refused.append((exc.error.code, exc.error.message))

    first_next = ""
    made: list[str] = []

    async def first_page(session: ClientSession) -> None:
        nonlocal first_next
        first_next = (await session.list_resources()).next_cursor or ""

    _mcp_session(root, first_page, info=[])
    _mcp_session(root, body, info=[])

    assert [len(page) for page in pages] == [RESOURCE_PAGE_SIZE, RESOURCE_PAGE_SIZE, 7]
    assert [name for page in pages for name in page] == sorted(refs)
    # a cursor it did not make: nonsense, a ref that round-trips through base64, a tag of zeros, another
    # ref under a real tag, and (made) a real cursor of another server process
    assert len(refused) == 4 and all(code == INVALID_PARAMS and "cursor" in message for code, message in refused)

    stale: list[tuple[int, str]] = []

    async def other_process(session: ClientSession) -> None:
        try:
            await session.list_resources(params=PaginatedRequestParams(cursor=made[0]))
        except MCPError as exc:
            stale.append((exc.error.code, exc.error.message))

    _mcp_session(root, other_process, info=[])
    assert stale and stale[0][0] == INVALID_PARAMS


# --- usage ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", [(), ("hook",), ("bench",)], ids=lambda c: " ".join(c) or "recall-kit")
def test_a_group_without_its_subcommand_prints_its_usage_as_lines(tmp_path: Path, command: tuple[str, ...]) -> None:
    result = subprocess.run(
        [str(RECALL_KIT), *command], capture_output=True, text=True, env=clean_environ(), cwd=tmp_path, timeout=60
    )
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Usage: recall-kit") and "Commands:" in lines
    assert "\\n" not in result.stderr


# --- a closed pipe ----------------------------------------------------------------------------------


def _into_a_closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """`recall-kit ARGS` writing to a pipe whose reader has already gone."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [str(RECALL_KIT), *args], stdout=write_end, stderr=subprocess.PIPE, env=clean_environ(), cwd=cwd, timeout=60
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [
    ("query", "how do I deploy ledgerline to production?", "--root", str(EXAMPLES)),
    ("query", "how do I deploy ledgerline to production?", "--root", str(EXAMPLES), "--format", "json"),
    ("list", "--root", str(EXAMPLES)),
    ("list", "--json", "--root", str(EXAMPLES)),
    ("watch", "--json", "--root", str(EXAMPLES)),
    ("show", DEPLOY_REF, "--root", str(EXAMPLES)),
    ("--help",),
], ids=lambda a: " ".join(x for x in a if not x.startswith("/"))[:40])
def test_a_reader_that_closed_the_pipe_ends_the_command_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    result = _into_a_closed_pipe(*args, cwd=tmp_path)
    assert result.returncode == 0 and result.stderr == b"", result.stderr


@pytest.mark.parametrize("args, reader", [(["list"], "head -1"), (["list", "--json"], "head -c 100")], ids=str)
def test_head_after_a_long_output_leaves_status_0(tmp_path: Path, args: list[str], reader: str) -> None:
    root = tmp_path / "notes"
    _many_memories(root, 1500)  # 116 KB listed, more than a pipe holds: the writer meets the closed end
    pipeline = subprocess.run(
        ["bash", "-c", f'"$0" "$@" --root {root} | {reader} >/dev/null; exit "${{PIPESTATUS[0]}}"', str(RECALL_KIT),
         *args],
        capture_output=True, env=clean_environ(), cwd=tmp_path, timeout=120,
    )
    assert pipeline.returncode == 0 and pipeline.stderr == b"", pipeline.stderr


def test_the_readme_says_what_watching_a_missing_root_does(tmp_path: Path) -> None:
    readme = " ".join((REPO / "README.md").read_text().split())
    assert "A root that does not exist yet is picked up only with `MemoryStore.open(..., allow_missing=True)`; " \
        "the CLI refuses a missing root." in readme
    missing = tmp_path / "not-yet"

    refused = run_recall_kit("watch", "--root", str(missing), cwd=tmp_path)
    assert_one_line_error(refused, "memory root does not exist", str(missing))
    with pytest.raises(MemoryStoreError, match="memory root does not exist"):
        MemoryStore.open(missing, watch=True)

    with MemoryStore.open(missing, watch=True, allow_missing=True) as store:
        write(missing / "first.md", memory(name="First"))
        wait_until(store, lambda s: [doc.name for doc in s.docs.values()] == ["First"] and not s.errors)
