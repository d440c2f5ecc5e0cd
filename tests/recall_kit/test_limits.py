"""The one prompt policy: a prompt is cut to exactly what the stages read of it."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from recall_kit._tokenize import analyze
from recall_kit.limits import (
    MODEL_PROMPT_CHARS,
    PROMPT_ELLIPSIS,
    PROMPT_HEAD_CHARS,
    PROMPT_TAIL_CHARS,
    bounded_prompt,
    clip_prompt,
)

BOUND = PROMPT_HEAD_CHARS + MODEL_PROMPT_CHARS + len(PROMPT_ELLIPSIS) + PROMPT_TAIL_CHARS
pieces = st.sampled_from(["deploy ", "ledgerline ", "x" * 37, "\n", "  ", " " * 1500, "數據庫連接 ", "fly.io "])
prompts = st.lists(pieces, max_size=600).map("".join)


def fast_terms(prompt: str) -> list[str]:
    return [token.term for token in analyze(clip_prompt(prompt))]


def model_words(prompt: str) -> list[str]:
    return [word for word in prompt.strip()[:MODEL_PROMPT_CHARS].split() if word != PROMPT_ELLIPSIS.strip()]


@settings(max_examples=300, deadline=None)
@given(prompts)
def test_a_bounded_prompt_reads_the_same_to_both_stages(prompt: str) -> None:
    cut = bounded_prompt(prompt)
    assert len(cut) <= BOUND
    assert fast_terms(cut) == fast_terms(prompt)
    assert model_words(cut) == model_words(prompt)


def test_a_short_prompt_is_left_as_it_is() -> None:
    prompt = "  how do I deploy ledgerline?\n" * 100
    assert len(prompt) < BOUND and bounded_prompt(prompt) is prompt


def test_a_ten_megabyte_prompt_keeps_its_head_and_tail() -> None:
    prompt = "how do I deploy ledgerline? " + "noise " * 2_000_000 + " and the last words"
    cut = bounded_prompt(prompt)
    assert cut.startswith("how do I deploy ledgerline?") and cut.endswith(" and the last words")
    assert len(cut) == MODEL_PROMPT_CHARS + len(PROMPT_ELLIPSIS) + PROMPT_TAIL_CHARS


def test_the_limits_module_loads_without_the_engine() -> None:
    # the hook imports it on every prompt: no numpy, httpx, yaml or watchdog behind it
    code = (
        "import sys, recall_kit.limits; "
        "print(sorted(m for m in ('numpy', 'httpx', 'yaml', 'watchdog', 'recall_kit._session') if m in sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
