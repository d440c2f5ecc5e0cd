"""Fixtures shared by every test folder."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

# importlib mode: the plain helper modules in tests/support are imported by name
sys.path.insert(0, str(Path(__file__).parent / "support"))

from home_guard import XDG_FOLDERS, caches_of_ours, folder_entries, real_recall_kit_folders, sentinel_problem  # noqa: E402

# Never the real user's home, config, caches or state, here or in any subprocess (they inherit the
# environment): throwaway XDG folders for the run, and HOME a sentinel that must stay empty, since a
# test that needs a home makes its own. check_real_home() fails the run if the real one changed anyway.
REAL_HOME = Path(os.path.expanduser("~"))
REAL_FOLDERS = real_recall_kit_folders(REAL_HOME, os.environ)
THROWAWAY = Path(tempfile.mkdtemp(prefix="recall-kit-tests-"))
atexit.register(shutil.rmtree, THROWAWAY, True)
for variable, name in XDG_FOLDERS.items():
    (THROWAWAY / name).mkdir(mode=0o700)
    os.environ[variable] = str(THROWAWAY / name)
SENTINEL_HOME = THROWAWAY / "home"
SENTINEL_HOME.mkdir(mode=0o700)
os.environ["HOME"] = str(SENTINEL_HOME)
os.environ.pop("RECALL_KIT_CONFIG", None)
os.environ.pop("RECALL_KIT_CACHE_DIR", None)

from recall_kit.testing import LlamaServer, RealModelUnavailable, ScriptedChatServer


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    """A scripted OpenAI-compatible chat server on loopback."""
    with ScriptedChatServer() as srv:
        yield srv


@pytest.fixture(scope="session", autouse=True)
def check_real_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The run fails if an index cache of its roots appeared in the real user's recall-kit folders."""
    before = {folder: folder_entries(folder) for folder in REAL_FOLDERS}
    yield
    ours = (Path(__file__).resolve().parents[1], THROWAWAY, tmp_path_factory.getbasetemp())
    written = [found for folder in REAL_FOLDERS for found in caches_of_ours(folder, folder_entries(folder) - before[folder], ours)]
    if written:
        pytest.fail(f"the suite wrote into the real home: {'; '.join(written[:3])}", pytrace=False)


@pytest.fixture(autouse=True)
def home_stays_empty() -> Iterator[None]:
    """A test that wrote into the run's HOME (what the real home would have got) fails, naming what."""
    yield
    problem = sentinel_problem(SENTINEL_HOME)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    """One real llama.cpp server (SmolLM2-135M) for every real-model test; it fails, never skips,
    when llama-cpp-python or the model is missing, or llama.cpp was built for one CPU."""
    try:
        server = LlamaServer(n_ctx=8192).start()
    except RealModelUnavailable as exc:
        pytest.fail(f"real model unavailable: {exc}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def llama(llama_server: LlamaServer) -> Iterator[LlamaServer]:
    """The session's llama.cpp server, alive before and after the test: one that died fails the
    test with its exit status and the end of its log."""
    assert_alive(llama_server)
    yield llama_server
    assert_alive(llama_server)


def assert_alive(server: LlamaServer) -> None:
    try:
        server.check_alive()
    except RealModelUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
