"""A learning session end to end against llama.cpp serving SmolLM2-135M: every recall gets the
model's answer, whatever the small model picks passes the selector's validation before it teaches,
and a rejected pick teaches nothing.

Needs llama-cpp-python and the model (`python -m recall_kit.testing.llama_build`); without them this
fails (it does not skip) and says what to run. The check is in tests/support/real_model_checks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real_model_checks import check_learning_session

from recall_kit.testing import LlamaServer

pytestmark = pytest.mark.real_model


def test_a_learning_session_against_a_real_model_teaches_only_validated_picks(tmp_path: Path, llama: LlamaServer) -> None:
    check_learning_session(llama, tmp_path)
