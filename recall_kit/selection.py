"""The model selector's steps without HTTP, for measuring or replaying what one selection costs.

``ModelSelector.select`` does these around its one request: ``build_manifest`` lists the candidates,
``selection_messages`` asks the model, ``response_format`` names the JSON to answer in (per
``ResponseMode``), ``answer_text`` reads the model's text out of a chat-completions body, and
``parse_answer`` then ``validate_selection`` check it against the manifest. ``clear_line_cache``
forgets the manifest's rendered lines, so the next manifest is built cold.
"""

from __future__ import annotations

from typing import Any

from recall_kit._answer import AnswerError, Verdict, parse_answer, validate_selection
from recall_kit._chat import RESPONSE_MODES, _ChatFailure, ResponseMode, _message_content
from recall_kit._manifest import Manifest, build_manifest, clear_line_cache
from recall_kit._selector import SYSTEM_PROMPT, _response_format, selection_messages
from recall_kit.limits import MAX_ANSWER_TOKENS

__all__ = [
    "AnswerError",
    "MAX_ANSWER_TOKENS",
    "Manifest",
    "RESPONSE_MODES",
    "ResponseMode",
    "SYSTEM_PROMPT",
    "Verdict",
    "answer_text",
    "build_manifest",
    "clear_line_cache",
    "parse_answer",
    "response_format",
    "selection_messages",
    "validate_selection",
]


def response_format(mode: ResponseMode, manifest: Manifest) -> dict[str, Any] | None:
    """The request's ``response_format`` in ``mode``: a JSON schema whose enum is the manifest's refs,
    a bare JSON object, or None for plain text."""
    return _response_format(mode, manifest)


def answer_text(body: bytes) -> str:
    """The model's text in a chat-completions response body; AnswerError when the body holds none."""
    try:
        return _message_content(body)
    except _ChatFailure as failure:
        raise AnswerError(failure.reason) from None
