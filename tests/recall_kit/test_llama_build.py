"""recall_kit.testing.llama_build: a wheel for one CPU is never installed or kept, the wheel cache is
only this user's and only what its record says, and a probe that crashes is one line, not a crash.

The "builds" here are tiny shared libraries compiled by this test (the C compiler llama.cpp's own
build needs): each exports llama_print_system_info as a real build would, below the C ABI boundary.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memory_store import UnsafePathError
from recall_kit.testing import _llama_build as llama_build
from recall_kit.testing._llama_build import (
    LLAMA_CPP_VERSION,
    LlamaBuildError,
    build_key,
    cached_wheel,
    install_llama_cpp,
    portable_wheel,
    probe_system_info,
    wheel_dir,
    wheel_system_info,
)

PORTABLE = "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | OPENMP = 1 | "
NATIVE_AMX = "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | AMX_INT8 = 1 | OPENMP = 1 | "


def fake_library(folder: Path, body: str) -> Path:
    """A libllama whose llama_print_system_info runs ``body``."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "no C compiler: llama_build needs one to build llama.cpp"
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "fake.c"
    source.write_text(f"const char *llama_print_system_info(void) {{ {body} }}\n")
    library = folder / "libllama.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, capture_output=True)
    source.unlink()
    return folder


def fake_wheel(tmp_path: Path, info: str) -> Path:
    lib = fake_library(tmp_path / "lib", f"return {json.dumps(info)};")
    wheel = tmp_path / f"llama_cpp_python-{LLAMA_CPP_VERSION}-py3-none-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.write(lib / "libllama.so", "llama_cpp/lib/libllama.so")
    return wheel


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the fake libraries are Linux shared objects")


def test_the_probe_reads_what_the_library_says(tmp_path: Path) -> None:
    assert probe_system_info(lib_dir=fake_library(tmp_path, f"return {json.dumps(PORTABLE)};")) == PORTABLE.strip()


def test_a_library_that_crashes_the_probe_is_one_line_naming_the_signal(tmp_path: Path) -> None:
    lib = fake_library(tmp_path, "return *(const char **)0;")  # what a CPU without the build's instructions does
    with pytest.raises(LlamaBuildError, match=r"^probing llama.cpp was killed by SIGSEGV: ") as crashed:
        probe_system_info(lib_dir=lib)
    assert "\n" not in str(crashed.value)


def test_a_wheel_for_one_cpu_is_refused_before_anything_is_installed(tmp_path: Path) -> None:
    before = probe_system_info()
    with pytest.raises(LlamaBuildError, match=r"it uses AMX_INT8, AVX512, AVX512_VNNI \(AMX crashes"):
        install_llama_cpp(wheel=fake_wheel(tmp_path, NATIVE_AMX))
    assert probe_system_info() == before  # the venv's llama.cpp is untouched


def test_a_build_for_one_cpu_is_never_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # what pip's wheel cache hands back after an earlier native install, whatever CMAKE_ARGS say
    native = fake_wheel(tmp_path / "pip-cache", NATIVE_AMX)

    def trapped_build(folder: Path, log: Path, python: str = sys.executable) -> tuple[Path, float]:
        shutil.copy(native, folder)
        return folder / native.name, 1.0

    monkeypatch.setattr(llama_build, "build_wheel", trapped_build)
    cache = tmp_path / "wheels"
    with pytest.raises(LlamaBuildError, match=r"^the build is not portable: .*AMX_INT8"):
        portable_wheel(cache, say=lambda line: None)
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith((".lock", ".log"))) == []


def test_a_kept_wheel_is_used_only_while_its_bytes_match_its_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Path] = []

    def build(folder: Path, log: Path, python: str = sys.executable) -> tuple[Path, float]:
        built.append(folder)
        return fake_wheel(folder, PORTABLE), 1.0

    monkeypatch.setattr(llama_build, "build_wheel", build)
    cache = tmp_path / "wheels"
    wheel = portable_wheel(cache, say=lambda line: None)
    assert wheel.parent == cache / build_key() and cached_wheel(wheel.parent) == wheel
    assert wheel_system_info(wheel) == PORTABLE.strip()
    assert portable_wheel(cache, say=lambda line: None) == wheel and len(built) == 1  # reused, not rebuilt
    with open(wheel, "r+b") as file:  # a truncated or altered wheel: rebuilt, never installed
        file.truncate(100)
    assert cached_wheel(wheel.parent) is None
    assert portable_wheel(cache, say=lambda line: None) == wheel and len(built) == 2
    assert json.loads((wheel.parent / "build.json").read_text())["system_info"] == PORTABLE.strip()


def test_the_wheel_cache_is_refused_when_it_is_a_symlink_or_others_can_write_it(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "wheels").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError, match="symlink"):
        portable_wheel(tmp_path / "wheels", say=lambda line: None)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafePathError, match="writable by others"):
        portable_wheel(shared / "wheels", say=lambda line: None)
    assert os.listdir(tmp_path / "elsewhere") == []


def test_the_wheels_are_kept_apart_from_pips_cache_and_the_index_cache(tmp_path: Path) -> None:
    assert wheel_dir({"RECALL_KIT_WHEEL_DIR": str(tmp_path)}) == tmp_path
    default = wheel_dir({})
    pip_cache = subprocess.run([sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True).stdout.strip()
    assert default.name == "recall-kit-wheels" and Path(pip_cache) not in (default, *default.parents)
    assert LLAMA_CPP_VERSION in build_key() and build_key("x86_64") != build_key("aarch64")
