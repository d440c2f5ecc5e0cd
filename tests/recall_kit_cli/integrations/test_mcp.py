"""`recall-kit mcp` driven by the official SDK's own client over stdio."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import anyio
import pytest
from integration_support import DEPLOY_PROMPT, RECALL_KIT, Env
from mcp_support import MISSING_REASON

pytest.importorskip("mcp", reason=MISSING_REASON)
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from doctor_support import tree_state
from memory_store import parse_memory


def _drive(
    env: Env, roots: list[Path], body: Callable[[ClientSession], Awaitable[None]], extra: Sequence[str] = ()
) -> None:
    args = ["mcp", "--fast-only", *extra]
    for root in roots:
        args += ["--root", str(root)]
    params = StdioServerParameters(command=RECALL_KIT, args=args, env=env.vars)

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await body(session)

    anyio.run(main)


async def _call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), result.content[0].text if result.content else ""


def test_tools_search_read_and_recall_once(env: Env, memories: Path) -> None:
    async def body(session: ClientSession) -> None:
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == {"search_memories", "read_memory", "recall", "doctor", "remember"}
        result = await session.call_tool("search_memories", {"query": "deploy ledgerline", "limit": 3})
        hits = result.structured_content["result"]
        assert len(hits) == 3 and hits[0]["ref"] == "memories/projects/ledgerline/deploy.md"
        assert hits[0]["name"] == "Deploying ledgerline to Fly.io" and hits[0]["score"] >= hits[1]["score"]
        error, text = await _call(session, "read_memory", ref=hits[0]["ref"])
        assert not error and text == (memories / "projects/ledgerline/deploy.md").read_text()
        error, first = await _call(session, "recall", prompt=DEPLOY_PROMPT)
        assert not error and "Deploying ledgerline to Fly.io" in first
        error, second = await _call(session, "recall", prompt=DEPLOY_PROMPT)
        assert not error and second == ""  # delivered once per session

    _drive(env, [memories], body)


def test_read_memory_refuses_everything_outside_the_roots(env: Env, memories: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\nname: s\ndescription: s\ntype: user\n---\nsecret\n")
    (memories / "reference" / "escape.md").symlink_to(secret)

    async def body(session: ClientSession) -> None:
        for ref in (
            "memories/../secret.md",
            "memories/reference/../../secret.md",
            str(secret),
            "/memories/user/x.md",
            "other/x.md",
            "memories/reference/escape.md",
            "memories/.hidden.md",
            "memories/projects",
        ):
            error, text = await _call(session, "read_memory", ref=ref)
            assert error and "secret" not in text.split(":")[-1], (ref, text)

    _drive(env, [memories], body)


def test_remember_validates_writes_and_never_overwrites_unasked(env: Env, memories: Path) -> None:
    async def body(session: ClientSession) -> None:
        args = {"name": "Staging DB host", "description": "staging postgres is db-stg-2", "type": "reference",
                "body": "Use db-stg-2.internal:5432.", "keywords": ["postgres", "staging"]}
        error, text = await _call(session, "remember", **args)
        assert not error, text
        saved = json.loads(text)
        assert saved["ref"] == "memories/reference/staging-db-host.md" and saved["overwritten"] is False
        path = memories / "reference" / "staging-db-host.md"
        doc = parse_memory(path.read_bytes())
        assert (doc.name, doc.type, doc.keywords) == ("Staging DB host", "reference", ("postgres", "staging"))
        error, text = await _call(session, "remember", **{**args, "body": "changed"})
        assert error and "already exists" in text
        assert "db-stg-2.internal" in path.read_text()
        error, text = await _call(session, "remember", **{**args, "body": "changed", "overwrite": True})
        assert not error and json.loads(text)["overwritten"] is True and "changed" in path.read_text()
        error, text = await _call(session, "remember", **{**args, "type": "gossip"})
        assert error and "unknown type" in text
        error, text = await _call(session, "remember", **{**args, "name": "  "})
        assert error and "missing 'name'" in text
        assert not list(memories.rglob(".*.new"))

    _drive(env, [memories], body)


def test_remember_into_a_type_folder_that_is_a_symlink_out_of_the_root_is_refused(
    env: Env, memories: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (memories / "reference").rename(outside)
    (memories / "reference").symlink_to(outside, target_is_directory=True)
    before = sorted(p.name for p in outside.iterdir())

    async def body(session: ClientSession) -> None:
        error, text = await _call(session, "remember", name="Leak", description="d", type="reference", body="b")
        assert error and "not saved" in text and "symlink" in text and "\n" not in text
        error, text = await _call(session, "read_memory", ref=f"memories/reference/{before[0]}")
        assert error and "refused" in text

    _drive(env, [memories], body)
    assert sorted(p.name for p in outside.iterdir()) == before


def test_memories_are_listed_and_readable_as_resources(env: Env, memories: Path) -> None:
    async def body(session: ClientSession) -> None:
        resources = (await session.list_resources()).resources
        by_name = {r.name: r for r in resources}
        assert len(resources) == len([p for p in memories.rglob("*.md") if p.name != "MEMORY.md"])
        deploy = by_name["memories/projects/ledgerline/deploy.md"]
        assert deploy.title == "Deploying ledgerline to Fly.io"
        contents = (await session.read_resource(str(deploy.uri))).contents
        assert contents[0].text == (memories / "projects/ledgerline/deploy.md").read_text()
        with pytest.raises(Exception, match="refused"):
            await session.read_resource("memory://memories/..%2F..%2Fetc/passwd.md")

    _drive(env, [memories], body)


@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
def test_the_server_opens_its_roots_through_the_index_cache_unless_told_not_to(
    env: Env, memories: Path, use_cache: bool
) -> None:
    async def body(session: ClientSession) -> None:
        result = await session.call_tool("search_memories", {"query": "deploy ledgerline", "limit": 1})
        assert result.structured_content["result"][0]["ref"] == "memories/projects/ledgerline/deploy.md"

    cache = Path(env.vars["XDG_CACHE_HOME"]) / "recall-kit"
    extra = [] if use_cache else ["--no-cache"]
    _drive(env, [memories], body, extra)
    written = [path.stat().st_ino for path in cache.glob("index-*.bin")]
    assert len(written) == (1 if use_cache else 0)
    _drive(env, [memories], body, extra)
    # a second start with nothing changed reuses the file as it is: it is not written again
    assert [path.stat().st_ino for path in cache.glob("index-*.bin")] == written


def test_doctor_gives_the_folders_findings_and_changes_nothing(env: Env, memories: Path) -> None:
    (memories / "MEMORY.md").write_text("# Index\n- [Gone](gone.md) — deleted\n")
    before = tree_state(memories)

    async def body(session: ClientSession) -> None:
        tool = next(t for t in (await session.list_tools()).tools if t.name == "doctor")
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        error, text = await _call(session, "doctor")
        assert not error, text
        report = json.loads(text)
        assert list(report)[0] == "counts" and report["counts"]["index_drift"] >= 1
        dead = [f for f in report["findings"] if f["detail"].get("problem") == "dead_link"]
        assert [(f["line"], f["fixable"]) for f in dead] == [(2, True)] and dead[0]["files"] == [str(memories / "MEMORY.md")]
        assert [r["path"] for r in report["roots"]] == [str(memories)]

    _drive(env, [memories], body)
    assert tree_state(memories) == before  # read-only: not even a backup or a sidecar folder


def test_a_file_name_that_is_not_utf8_is_searched_read_and_listed(env: Env, tmp_path: Path) -> None:
    root = tmp_path / "latin"
    root.mkdir()
    text = "---\nname: Espresso machine descaling\ndescription: descale the espresso machine with citric acid\ntype: user\n---\nMonthly.\n"
    Path(os.fsdecode(bytes(root) + b"/caf\xe9.md")).write_text(text)

    async def body(session: ClientSession) -> None:
        result = await session.call_tool("search_memories", {"query": "descale the espresso machine", "limit": 3})
        assert not result.is_error
        ref = result.structured_content["result"][0]["ref"]
        assert ref == "latin/caf\\xe9.md"  # the byte as the CLI shows it
        error, read = await _call(session, "read_memory", ref=ref)  # ... and taken back in that form
        assert not error and read == text
        resources = (await session.list_resources()).resources
        assert [(r.name, str(r.uri)) for r in resources] == [(ref, "memory://latin/caf%E9.md")]
        contents = (await session.read_resource(str(resources[0].uri))).contents
        assert contents[0].text == text
        error, found = await _call(session, "recall", prompt="how do I descale the espresso machine with citric acid")
        assert not error and "Espresso machine descaling" in found
        result = await session.call_tool("doctor", {})
        assert not result.is_error
        assert "caf\\\\xe9.md" in json.dumps(result.structured_content)  # named as the CLI shows it, \\xe9

    (root / "MEMORY.md").write_text("# Index\n")  # doctor's index check then names the file too
    _drive(env, [root], body)


def test_a_name_spelled_as_another_names_byte_is_listed_and_read_as_its_own(env: Env, tmp_path: Path) -> None:
    root = tmp_path / "latin"
    root.mkdir()
    texts = {name: f"---\nname: Cafe {name}\ndescription: the cafe on the corner\ntype: user\n---\n{name}\n"
             for name in ("byte", "backslash")}
    Path(os.fsdecode(bytes(root) + b"/caf\xe9.md")).write_text(texts["byte"])
    (root / "caf\\xe9.md").write_text(texts["backslash"])  # a backslash, x, e, 9: the byte's shown form, as a name

    async def body(session: ClientSession) -> None:
        result = await session.call_tool("search_memories", {"query": "the cafe on the corner", "limit": 3})
        refs = {hit["name"]: hit["ref"] for hit in result.structured_content["result"]}
        assert refs == {"Cafe byte": "latin/caf\\xe9.md", "Cafe backslash": "latin/caf\\\\xe9.md"}
        for name in ("byte", "backslash"):
            error, read = await _call(session, "read_memory", ref=refs[f"Cafe {name}"])
            assert not error and read == texts[name]

    _drive(env, [root], body)
