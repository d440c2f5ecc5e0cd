"""`recall-kit enrich` end to end against llama.cpp's server with SmolLM2-135M-Instruct.

Needs llama-cpp-python and the model (`python -m recall_kit.testing.llama_build`); without them this
fails (it does not skip) and says what to run. A 135M model writes poor terms: this checks the
protocol and that whatever is written is valid; the terms themselves are printed for a reader, not
judged. The check is in tests/support/real_model_checks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from real_model_checks import check_enrich

from recall_kit.testing import LlamaServer

pytestmark = pytest.mark.real_model


def test_real_model_enrich_end_to_end_writes_only_valid_entries(llama: LlamaServer, tmp_path: Path) -> None:
    check_enrich(llama, tmp_path)
