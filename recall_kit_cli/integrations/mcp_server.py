"""`recall-kit mcp`: the memories for any MCP client over stdio (official ``mcp`` SDK).

Tools: ``search_memories``, ``read_memory``, ``recall``, ``doctor``, ``remember``, each annotated with
what it does to the memories (search, read, recall and doctor only read); every memory is also a resource
(``memory://<ref>``), listed ``RESOURCE_PAGE_SIZE`` at a time. One stdio connection is one MCP
session, so one RecallSession.

A file name that is not UTF-8 (Python holds its bytes as surrogate escapes, which JSON cannot carry)
is shown as the CLI shows it, each such byte as ``\\xNN`` (``shown_ref``), and taken back in that
form by ``read_memory`` (``given_ref``); its resource URI percent-encodes the byte itself.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import hmac
import os
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import mcp.types as mcp_types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.shared.exceptions import MCPError

from memory_store import (
    MemoryExistsError, MemoryParseError, MemoryStore, MemoryStoreError, RecallKitError, given_ref, shown_ref,
)
from recall_kit import RecallSession, SelectorConfig, open_recaller
from recall_kit.limits import bounded_prompt

URI_SCHEME = "memory://"
MAX_SEARCH_LIMIT = 50
RESOURCE_PAGE_SIZE = 100  # resources per resources/list answer: a client pages through a large store
READ_ONLY = mcp_types.ToolAnnotations(read_only_hint=True, open_world_hint=False)
# remember adds a file and replaces one only when asked (overwrite=true); the same call twice leaves
# the same file, so it is idempotent, and never destructive by the spec's meaning (it deletes nothing)
WRITES_ONE_MEMORY = mcp_types.ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class MemoryService:
    """What the tools do, on one watched store; the MCP layer only adapts arguments and errors."""

    def __init__(
        self,
        roots: list[str],
        selector_config: SelectorConfig | None = None,
        *,
        use_cache: bool = True,
        cache_dir: Path | None = None,
        learn: bool = False,
    ) -> None:
        # from the index cache, as `recall-kit query`; the Recaller closes the store, index and selector
        self.recaller = open_recaller(
            roots, watch=True, use_cache=use_cache, cache_dir=cache_dir, selector=selector_config, learn=learn
        )
        store = self.recaller.store
        assert isinstance(store, MemoryStore)  # watched, by open_recaller
        self.store, self.heuristic = store, self.recaller.heuristic
        self._session: RecallSession | None = None

    async def aclose(self) -> None:
        """Close the session, if one began, then the Recaller (its store, index and selector)."""
        if self._session is not None:
            await self._session.close()
        await self.recaller.aclose()

    # --- tools ----------------------------------------------------------------------------

    def search(self, query: str, limit: int) -> list[dict[str, Any]]:
        """The ``limit`` best-ranked memories for ``query``: ref, name, description, type and score.
        ValueError when ``limit`` is not between 1 and MAX_SEARCH_LIMIT."""
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}, got {limit}")
        ranked, _evidence, _scanned = self.heuristic.rank(bounded_prompt(query))
        return [
            {
                "ref": shown_ref(s.doc.ref),
                "name": s.doc.name,
                "description": s.doc.description,
                "type": s.doc.type,
                "score": round(s.score, 4),
            }
            for s in ranked[:limit]
        ]

    def read(self, ref: str) -> str:
        """The text of the memory file ``ref``, read through the store: MemoryStoreError when it refuses
        the ref, ValueError when the file is not UTF-8."""
        data = self.store.read_bytes(self.given(ref))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{ref!r} is not UTF-8 text") from None

    def resolve(self, ref: str) -> Path:
        """The file a ref names, once the store knows it for a memory file inside its root."""
        return self.store.resolve(self.given(ref))

    def given(self, ref: str) -> str:
        """The store's ref for ``ref`` as a client gives it back: read as ``shown_ref`` wrote it (each
        ``\\xNN`` as the byte it stands for) when the store holds that, else as it is."""
        wanted = given_ref(ref)
        return wanted if wanted in self.store.snapshot().docs else ref

    async def recall(self, prompt: str) -> str:
        """Begin recall for ``prompt`` in the service's session; the initial point's delivery, rendered ("" for none)."""
        if self._session is None:
            self._session = self.recaller.session()
        self._session.begin(prompt)
        delivery = await self._session.consume("initial")
        return delivery.text if delivery is not None else ""

    def doctor(self) -> dict[str, Any]:
        """``recall-kit doctor --json`` of the server's roots (read-only: nothing is mended or recorded)."""
        import os

        from recall_kit.health import check_health
        from recall_kit_cli.integrations.doctor_plan import doctor_plan, recall_history

        planned = doctor_plan(os.getcwd(), os.environ, given=[path for _, path in self.store.roots])
        history, trail_note = recall_history(os.environ)
        report = check_health(planned.plan, history=history)
        payload = report.to_json()
        payload["notes"] = [*planned.notes, *([trail_note] if trail_note else []), *report.notes]
        shown: dict[str, Any] = _shown_everywhere(payload)
        return shown

    def remember(
        self,
        name: str,
        description: str,
        type: str,
        body: str,
        keywords: list[str] | None,
        overwrite: bool,
        root: str | None,
    ) -> dict[str, Any]:
        """Save a memory in ``root``, else the first, via ``MemoryRoot.save``; its ref, path and ``overwritten``."""
        files = self.store.root(root or self.store.roots[0][0])  # the first root by default
        saved = files.save(
            name=name, description=description, type=type, body=body, keywords=keywords or (), overwrite=overwrite
        )
        return {"ref": saved.ref, "path": str(saved.path), "overwritten": saved.overwritten}


def ref_uri(ref: str) -> str:
    """The resource URI of a memory: ``memory://`` and its ref, each segment URL-encoded (an undecodable
    byte as itself: ``caf%E9.md``)."""
    return URI_SCHEME + "/".join(quote(part, safe="", errors="surrogateescape") for part in ref.split("/"))


def _shown_everywhere(value: Any) -> Any:
    # every string of a JSON payload through shown_ref (doctor's report names files by path and ref)
    if isinstance(value, str):
        return shown_ref(value)
    if isinstance(value, dict):
        return {shown_ref(key): _shown_everywhere(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown_everywhere(item) for item in value]
    return value


class PageCursors:
    """The opaque cursors of resource pages: the ref a page starts after, signed with a key this server
    drew at random, so a cursor it did not make (any base64 that round-trips, or one of another server
    process) is refused as INVALID_PARAMS, as the spec asks. A page starts after a ref, not at an
    offset, so a memory added or removed between two pages never makes another one be skipped or listed twice."""

    TAG_BYTES = 16

    def __init__(self) -> None:
        self._key = os.urandom(32)

    def after(self, ref: str) -> str:
        """The cursor of the page after ``ref``."""
        raw = ref.encode("utf-8", "surrogateescape")
        return _b64(raw) + "." + _b64(self._tag(raw))

    def ref(self, cursor: str) -> str:
        """The ref ``cursor`` resumes after; MCPError (INVALID_PARAMS) for a cursor this server did not make."""
        body, _, tag = cursor.rpartition(".")
        try:
            raw = base64.urlsafe_b64decode(body.encode("ascii"))
            given = base64.urlsafe_b64decode(tag.encode("ascii"))
        except (ValueError, binascii.Error):
            raw = given = b""
        if not hmac.compare_digest(given, self._tag(raw)) or self.after(raw.decode("utf-8", "surrogateescape")) != cursor:
            raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"invalid cursor {cursor[:40]!r}: not one this server made")
        return raw.decode("utf-8", "surrogateescape")

    def _tag(self, raw: bytes) -> bytes:
        return hmac.new(self._key, raw, hashlib.sha256).digest()[: self.TAG_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii")


class RecallMCPServer(MCPServer):
    """MCPServer whose resources are the store's current memories, listed and read on demand."""

    def __init__(self, service: MemoryService) -> None:
        super().__init__("recall-kit", instructions=_INSTRUCTIONS, log_level="WARNING", version=version("recall-kit"))
        self.service = service
        self.cursors = PageCursors()
        self._register_tools()

    async def list_resources(self) -> list[mcp_types.Resource]:
        """Every memory of the current snapshot as a resource, by ref."""
        resources, _next = self.resource_page(None, limit=None)
        return resources

    def resource_page(
        self, cursor: str | None, limit: int | None = RESOURCE_PAGE_SIZE
    ) -> tuple[list[mcp_types.Resource], str | None]:
        """Up to ``limit`` resources in ref order, after the one ``cursor`` names, and the next page's cursor."""
        docs = self.service.store.snapshot().docs
        refs = sorted(docs)
        start = 0 if cursor is None else bisect.bisect_right(refs, self.cursors.ref(cursor))
        end = len(refs) if limit is None else start + limit
        page = refs[start:end]
        resources = [
            mcp_types.Resource(
                uri=ref_uri(ref), name=shown_ref(ref), title=docs[ref].name, description=docs[ref].description,
                mime_type="text/markdown",
            )
            for ref in page
        ]
        return resources, self.cursors.after(page[-1]) if page and end < len(refs) else None

    async def _handle_list_resources(
        self, ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListResourcesResult:
        # MCPServer's own handler lists everything at once; it is the one seam the SDK gives for a cursor
        resources, next_cursor = self.resource_page(params.cursor if params is not None else None)
        return mcp_types.ListResourcesResult(resources=resources, next_cursor=next_cursor)

    async def read_resource(self, uri: Any, context: Any = None) -> Any:
        text = str(uri)
        if not text.startswith(URI_SCHEME):
            return await super().read_resource(uri, context)
        ref = "/".join(unquote(part, errors="surrogateescape") for part in text[len(URI_SCHEME) :].split("/"))
        try:
            content = self.service.read(ref)
        except (MemoryStoreError, ValueError) as exc:
            raise ResourceNotFoundError(str(exc)) from None
        return [ReadResourceContents(content=content, mime_type="text/markdown")]

    def _register_tools(self) -> None:
        service = self.service

        @self.tool(annotations=READ_ONLY)
        def search_memories(query: str, limit: int = 10) -> list[dict[str, Any]]:
            """Rank the memories for a query: refs, names, descriptions, types and scores, best first."""
            try:
                return service.search(query, limit)
            except ValueError as exc:
                raise ToolError(str(exc)) from None

        @self.tool(annotations=READ_ONLY)
        def read_memory(ref: str) -> str:
            """The full text of one memory file, by its ref (<root>/<path>.md, as search_memories gives)."""
            try:
                return service.read(ref)
            except (MemoryStoreError, ValueError) as exc:
                raise ToolError(str(exc)) from None

        @self.tool(annotations=READ_ONLY)
        async def recall(prompt: str) -> str:
            """The memories relevant to a prompt, rendered; a memory is handed over once per session."""
            return await service.recall(prompt)

        @self.tool(annotations=READ_ONLY)
        async def doctor() -> dict[str, Any]:
            """What is wrong in the memory folders, as `recall-kit doctor --json` reports it: near-duplicates,
            stale references, index drift, secrets (never shown), memories unreachable at the prompt or never
            recalled, bad files; each with its files and what to do. Reads only."""
            import anyio

            try:
                return await anyio.to_thread.run_sync(service.doctor)
            except RecallKitError as exc:
                raise ToolError(f"doctor: {exc}") from None

        @self.tool(annotations=WRITES_ONE_MEMORY)
        def remember(
            name: str,
            description: str,
            type: str,
            body: str,
            keywords: list[str] | None = None,
            overwrite: bool = False,
            root: str | None = None,
        ) -> dict[str, Any]:
            """Save a memory as <root>/<type>/<slug of name>.md (type: user, feedback, project or
            reference); refuses to replace an existing file unless overwrite is true."""
            try:
                return service.remember(name, description, type, body, keywords, overwrite, root)
            except MemoryExistsError as exc:
                raise ToolError(f"not saved: {exc}; pass overwrite=true to replace it") from None
            except (MemoryParseError, MemoryStoreError) as exc:
                raise ToolError(f"not saved: {exc}") from None


_INSTRUCTIONS = (
    "recall-kit serves markdown memories. Call `recall` with the user's request to get the memories "
    "that apply (each is given once per session), `search_memories` to browse, `read_memory` for a full "
    "file, `doctor` for what is wrong in the memory folders, and `remember` to save a new memory."
)


def serve_stdio(
    roots: list[str],
    *,
    selector_config: SelectorConfig | None = None,
    use_cache: bool = True,
    cache_dir: Path | None = None,
    learn: bool = False,
) -> None:
    """Serve the tools and resources for ``roots`` to one MCP client over stdio, until it disconnects."""
    import anyio

    service = MemoryService(roots, selector_config, use_cache=use_cache, cache_dir=cache_dir, learn=learn)
    server = RecallMCPServer(service)

    async def run() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await service.aclose()

    anyio.run(run)


__all__ = ["MemoryService", "RecallMCPServer", "serve_stdio"]
