"""One chat completion from an OpenAI-compatible endpoint, with the fault handling every model caller needs.

Shared by the selector and the enricher: credentials kept out of URLs and text, the response_format
fallback json_schema -> json_object -> text remembered per endpoint, one retry on 429/5xx, a body cap,
and the whole call bounded by one deadline. Every failure is a ``_ChatFailure`` with a one-line,
redacted reason; only CancelledError passes through as itself.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import time
from typing import Any, Callable, Literal, Mapping, Self

import httpx

from memory_store import parse_json
from recall_kit._config import DEFAULT_TIMEOUT_S, SelectorConfig, check_base_url
from recall_kit._settings import load_selector_config
from recall_kit._errors import ConfigError
from recall_kit._kinds import FallbackKind
from recall_kit._model_lane import ModelLane
from recall_kit._secrets import Redactor, clean_api_key, split_url_credentials
from recall_kit._text import one_line
from recall_kit.limits import ERROR_SCAN_BYTES, ERROR_SNIPPET_CHARS, MAX_RESPONSE_BYTES

logger = logging.getLogger("recall_kit.chat")

ResponseMode = Literal["json_schema", "json_object", "text"]
RESPONSE_MODES: tuple[ResponseMode, ...] = ("json_schema", "json_object", "text")
DEFAULT_RETRY_DELAY_S = 0.25  # 429/5xx without Retry-After: one short pause, then the single retry
# How endpoints refuse a response_format: 400 (OpenAI, vLLM), 422 (FastAPI validation), and 500 from
# llama-cpp-python's server, whose error handler turns its 422 into a 500 (measured with 0.3.36).
_FORMAT_REJECTION = frozenset({400, 422})
_FORMAT_REJECTION_IF_NAMED = frozenset({400, 422, 500})

ResponseFormat = Callable[[ResponseMode], "dict[str, Any] | None"]


class _ChatFailure(Exception):
    """The request produced no answer (internal: callers turn it into a Fallback); ``reason`` is one
    redacted line."""

    def __init__(self, reason: str, mode: ResponseMode | None = None, *, kind: FallbackKind) -> None:
        super().__init__(reason)
        self.reason = reason
        self.mode = mode
        self.kind: FallbackKind = kind


def json_schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def _retry_after_s(headers: httpx.Headers) -> float | None:
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _message_content(body: bytes) -> str:
    try:
        content = parse_json(body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _ChatFailure("malformed response body", kind="bad_response") from None
    if not isinstance(content, str):
        raise _ChatFailure("response has no text content", kind="bad_response")
    return content


def _error_snippet(body: bytes, redact: Redactor) -> str:
    """The server's error message as one short line, redacted before it is cut."""
    try:
        error = parse_json(body).get("error", "")
        message = error.get("message", "") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        message = body[:ERROR_SCAN_BYTES].decode("utf-8", "replace")
    if not isinstance(message, str):
        message = json.dumps(message)[:ERROR_SCAN_BYTES]
    return redact(one_line(message[:ERROR_SCAN_BYTES]), ERROR_SNIPPET_CHARS)


class ChatEndpoint:
    """An endpoint and model, its credentials, and one httpx client per event loop."""

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None, timeout: float, owner: str = "ChatEndpoint"
    ) -> None:
        if not base_url or not model:
            raise ConfigError(f"{owner} needs a base URL and a model name")
        if not timeout > 0:
            raise ConfigError(f"timeout must be positive, got {timeout!r}")
        url = split_url_credentials(check_base_url(base_url, owner))
        self._request_url = url.request_url.rstrip("/")
        self._auth = url.auth  # credentials from the URL go out as basic auth, never in a URL
        self.base_url = url.shown_url.rstrip("/")
        self.model = model
        self.timeout = float(timeout)
        self._api_key = clean_api_key(api_key, "api_key")
        self.redact = Redactor((self._api_key, *url.secrets))
        # Connections belong to the loop that opened them: one client per loop, made or being made.
        self._clients: dict[asyncio.AbstractEventLoop, asyncio.Future[httpx.AsyncClient]] = {}
        # The response format this endpoint last answered in, tried first from then on. Each client
        # learns it for itself (one refused request at most): no process-wide record to share or reset.
        self.response_mode: ResponseMode | None = None

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None

    @property
    def endpoint(self) -> tuple[str, str]:
        return (self.base_url, self.model)

    def uses_loop(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether a client was opened (or is being opened) on ``loop``."""
        return loop in self._clients

    async def aclose(self) -> None:
        """Close the connections this endpoint opened on the running loop, and forget the clients of
        loops that have closed since. Each loop's connections are closed on that loop."""
        self._forget_closed_loops()
        building = self._clients.pop(asyncio.get_running_loop(), None)
        if building is None:
            return
        try:
            client = await building
        except Exception:  # it was never made: nothing to close
            return
        await client.aclose()

    def _forget_closed_loops(self) -> None:
        for loop in [loop for loop in self._clients if loop.is_closed()]:
            self._clients.pop(loop, None)

    async def complete(
        self, messages: list[dict[str, str]], response_format: ResponseFormat, *, max_tokens: int
    ) -> tuple[str, ResponseMode]:
        """The model's text and the mode it answered in, within ``timeout``; raises _ChatFailure."""
        try:
            async with asyncio.timeout(self.timeout):
                return await self._complete(messages, response_format, max_tokens)
        except TimeoutError:
            raise _ChatFailure(f"deadline of {self.timeout:g} s exceeded", kind="timeout") from None

    async def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        building = self._clients.get(loop)
        if building is None or (building.done() and building.exception() is not None):
            self._forget_closed_loops()
            # building the client loads the TLS trust store (tens of ms): on a worker thread, once,
            # and kept even when the call that started it is cancelled (the next one needs it)
            building = self._clients[loop] = loop.run_in_executor(None, self._new_client)
        return await asyncio.shield(building)

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), auth=self._auth)

    async def _complete(
        self, messages: list[dict[str, str]], response_format: ResponseFormat, max_tokens: int
    ) -> tuple[str, ResponseMode]:
        remembered = self.response_mode
        modes = RESPONSE_MODES[RESPONSE_MODES.index(remembered):] if remembered else RESPONSE_MODES
        deadline = asyncio.get_running_loop().time() + self.timeout
        retried = False
        index = 0
        while True:
            mode = modes[index]
            payload: dict[str, Any] = {
                "model": self.model, "messages": messages, "temperature": 0, "max_tokens": max_tokens,
            }
            fmt = response_format(mode)
            if fmt is not None:
                payload["response_format"] = fmt
            status, headers, body = await self._post(payload, mode)
            if 200 <= status < 300:
                self.response_mode = mode
                return _message_content(body), mode
            if index + 1 < len(modes) and (
                (status in _FORMAT_REJECTION and mode == "json_schema")
                or (status in _FORMAT_REJECTION_IF_NAMED and b"response_format" in body)
            ):
                logger.debug("endpoint rejected response_format %s (HTTP %d)", mode, status)
                index += 1
                continue
            if (status == 429 or 500 <= status < 600) and not retried:
                delay = _retry_after_s(headers)
                delay = DEFAULT_RETRY_DELAY_S if delay is None else delay
                remaining = deadline - asyncio.get_running_loop().time()
                if delay >= remaining:
                    raise _ChatFailure(
                        f"HTTP {status}; Retry-After {delay:g} s exceeds the remaining deadline", mode, kind="http_error"
                    )
                retried = True
                await asyncio.sleep(delay)
                continue
            detail = "" if status in (401, 403) else f": {_error_snippet(body, self.redact)}"
            raise _ChatFailure(f"HTTP {status}{detail}".rstrip(": "), mode, kind="http_error")

    async def _post(self, payload: dict[str, Any], mode: ResponseMode) -> tuple[int, httpx.Headers, bytes]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            client = await self._client()
            async with client.stream(
                "POST", f"{self._request_url}/chat/completions", json=payload, headers=headers
            ) as response:
                length = response.headers.get("content-length", "")
                if length.isdigit() and int(length) > MAX_RESPONSE_BYTES:
                    raise _ChatFailure("response body over 1 MiB", mode, kind="bad_response")
                body = bytearray()
                oversized = False
                # Streamed so the deadline can cut a drip. Read to the end (bounded by the deadline):
                # leaving the loop early would leave httpx's generators for asyncio to finalise in a task.
                async for chunk in response.aiter_bytes():
                    oversized = oversized or len(body) + len(chunk) > MAX_RESPONSE_BYTES
                    if not oversized:
                        body += chunk
                if oversized:
                    raise _ChatFailure("response body over 1 MiB", mode, kind="bad_response")
                return response.status_code, response.headers, bytes(body)
        except _ChatFailure:
            raise
        except Exception as exc:  # anything the transport raises (a proxy's bad port, a missing SOCKS extra, ...)
            raise _ChatFailure(f"transport error: {self._transport_problem(exc)}", mode, kind="unreachable") from None

    def _transport_problem(self, exc: Exception) -> str:
        """What went wrong in one redacted line: httpx's and the OS's errors by name, others with their
        message; an exception group (anyio's connect) by its first error."""
        while isinstance(exc, ExceptionGroup) and exc.exceptions:
            exc = exc.exceptions[0]
        name = type(exc).__name__
        if isinstance(exc, (httpx.HTTPError, OSError)) or not str(exc):
            return name
        return self.redact(one_line(f"{name}: {exc}"), ERROR_SNIPPET_CHARS)


class ChatModelClient:
    """What the selector and the enricher share: one model endpoint, configured the same way.

    ``unconfigured`` opens the error raised when nothing configures a model."""

    unconfigured = "no model configured"

    def __init__(
        self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = DEFAULT_TIMEOUT_S,
        lane: ModelLane | None = None,
    ) -> None:
        self._chat = ChatEndpoint(base_url, model, api_key=api_key, timeout=timeout, owner=type(self).__name__)
        self.base_url = self._chat.base_url
        self.model = model
        self.timeout = self._chat.timeout
        self.lane = lane  # the process's model calls: a prompt's go first (the daemon's), None: no order kept

    async def aclose(self) -> None:
        """Close the HTTP connections opened on the running loop (see ``ChatEndpoint.aclose``)."""
        await self._chat.aclose()

    def uses_loop(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether this client opened HTTP connections on ``loop``."""
        return self._chat.uses_loop(loop)

    @property
    def response_mode(self) -> ResponseMode | None:
        """The response format the endpoint last answered this client in (tried first); None before any."""
        return self._chat.response_mode

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    @classmethod
    def from_config(cls, config: SelectorConfig, *, lane: ModelLane | None = None) -> Self:
        """A client of ``config``'s endpoint (in ``lane``, when given); ConfigError when it lacks a base
        URL or a model, when its base_url is an untrusted project file's (``refusal``), or when a
        setting is invalid."""
        if config.refusal or config.problems:
            raise ConfigError(config.refusal or next(iter(config.problems.values())))
        if not config.configured:
            raise ConfigError(
                f"{cls.unconfigured} (missing {' and '.join(config.missing())}): set "
                "RECALL_KIT_BASE_URL and RECALL_KIT_MODEL, or [selector] in recall-kit.toml"
            )
        assert config.base_url and config.model
        return cls(config.base_url, config.model, api_key=config.api_key, timeout=config.timeout, lane=lane)

    @classmethod
    def from_env(
        cls,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        config_path: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Self:
        """Settings as ``load_selector_config`` resolves them; ConfigError if they configure none."""
        return cls.from_config(
            load_selector_config(
                base_url=base_url, model=model, api_key=api_key, timeout=timeout,
                config_path=config_path, environ=environ,
            )
        )

    def __repr__(self) -> str:
        key = "'***'" if self._chat.has_api_key else "None"
        return (
            f"{type(self).__name__}(base_url={self.base_url!r}, model={self.model!r}, api_key={key}, "
            f"timeout={self.timeout})"
        )
