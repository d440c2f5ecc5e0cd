"""The model selector's steps without HTTP, for measuring or replaying what one selection costs.

``ModelSelector.select`` does these around its one request: ``build_manifest`` lists the candidates,
``selection_messages`` asks the model, ``response_format`` names the JSON to answer in (per
``ResponseMode``), ``answer_text`` reads the model's text out of a chat-completions body, and
``parse_answer`` then ``validate_selection`` check it against the manifest. ``clear_line_cache``
forgets the manifest's rendered lines, so the next manifest is built cold.
"""

from __future__ import annotations

from memory_store import fixup_module_metadata
from recall_kit._answer import AnswerError, Verdict, parse_answer, validate_selection
from recall_kit._chat import RESPONSE_MODES, ResponseMode
from recall_kit._manifest import Manifest, build_manifest, clear_line_cache
from recall_kit._selector import SYSTEM_PROMPT, answer_text, response_format, selection_messages
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


fixup_module_metadata(__name__, globals(), __all__)
