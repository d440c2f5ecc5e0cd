"""The model selector end to end against llama.cpp's OpenAI-compatible server serving SmolLM2-135M-Instruct.

Needs llama-cpp-python and the model (`python -m recall_kit.testing.llama_build`); without them these
tests fail (they do not skip) and say what to run. The checks are in tests/support/real_model_checks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real_model_checks import check_deadline_cut, check_selection_protocol

from recall_kit.testing import LlamaServer

pytestmark = pytest.mark.real_model


def test_real_model_selection_protocol_end_to_end(llama: LlamaServer, tmp_path: Path) -> None:
    check_selection_protocol(llama, tmp_path)


def test_real_model_request_cut_by_deadline_leaves_server_usable(llama: LlamaServer, tmp_path: Path) -> None:
    check_deadline_cut(llama, tmp_path)
