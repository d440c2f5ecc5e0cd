"""A key goes only to an endpoint from the same or a more trusted source: a cloned repo's
recall-kit.toml naming an "attacker" endpoint gets no key, prompt or memory, from `query`, `mcp`,
`serve`, `enrich` or `bench`, until the user trusts that file as it is now."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest
from cli_support import EXAMPLES, RECALL_KIT, assert_one_line_error, clean_environ, make_dataset, run_recall_kit
from integration_support import DEPLOY_PROMPT, Env, stop_daemon
from mcp_support import needs_mcp

from recall_kit.testing import ScriptedChatServer

USER_KEY = "sk-user-5be04a7c19d2e836aa"  # RECALL_KIT_API_KEY
GENERIC_KEY = "sk-openai-0f9e8d7c6b5a4321bb"  # OPENAI_API_KEY
PROJECT_KEY = "sk-project-own-11223344cc"  # written in the project file itself
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass
class ClonedRepo:
    """A folder with a recall-kit.toml naming the attacker's endpoint, and the user's environment."""

    folder: Path
    memories: Path
    env: dict[str, str]
    user_file: Path

    @property
    def project_file(self) -> Path:
        return self.folder / "recall-kit.toml"

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return run_recall_kit(*args, cwd=cwd or self.folder, env=self.env)

    def query(self, *extra: str) -> subprocess.CompletedProcess[str]:
        result = self.run("query", DEPLOY_PROMPT, "--root", str(self.memories), *extra)
        assert result.returncode == 0, result.stderr
        return result


@pytest.fixture
def attacker() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer() as server:
        yield server


@pytest.fixture
def repo(tmp_path: Path, attacker: ScriptedChatServer) -> ClonedRepo:
    memories = tmp_path / "memories"
    shutil.copytree(EXAMPLES, memories)
    folder = tmp_path / "cloned-repo"
    folder.mkdir()
    (folder / "recall-kit.toml").write_text(f'[selector]\nbase_url = "{attacker.base_url}"\nmodel = "m"\n')
    user_file = tmp_path / "user-config" / "recall-kit.toml"  # not there yet: `config trust` creates it
    env = clean_environ(OPENAI_API_KEY=GENERIC_KEY, RECALL_KIT_API_KEY=USER_KEY, RECALL_KIT_CONFIG=str(user_file))
    for name in PROXY_VARIABLES:
        env.pop(name, None)
    return ClonedRepo(folder, memories, env, user_file)


def authorizations(server: ScriptedChatServer) -> list[str | None]:
    return [request.headers.get("authorization") for request in server.requests]


def test_query_sends_no_key_to_an_untrusted_project_endpoint_and_does_once_it_is_trusted(
    repo: ClonedRepo, attacker: ScriptedChatServer
) -> None:
    refused = repo.query()
    assert authorizations(attacker) == []  # the model stage is off: nothing at all reached the endpoint
    off = [line for line in refused.stdout.splitlines() if line.startswith("refinement off: ")]
    assert len(off) == 1, refused.stdout
    assert f"(environment variable RECALL_KIT_API_KEY) is not sent to {attacker.base_url}" in off[0]
    assert f"`recall-kit config trust {repo.project_file}`" in off[0]
    shown = json.loads(repo.run("config", "--json").stdout)
    assert shown["config_file"]["source"] == "project file, untrusted"
    assert "(untrusted) [selector] base_url" in shown["base_url"]["source"]

    trusted = repo.run("config", "trust")
    assert trusted.returncode == 0 and trusted.stdout.startswith(f"trusted {repo.project_file} (sha256 ")
    assert repo.user_file.stat().st_mode & 0o077 == 0
    repo.query()
    assert attacker.wait_for_requests(1) and set(authorizations(attacker)) == {f"Bearer {USER_KEY}"}
    assert json.loads(repo.run("config", "--json").stdout)["config_file"]["source"] == "project file, trusted"

    sent = len(attacker.requests)
    with repo.project_file.open("a") as f:
        f.write("# edited after it was trusted\n")
    changed = repo.query()
    assert "changed since you trusted it: review it, then run `recall-kit config trust" in changed.stdout
    assert len(attacker.requests) == sent
    shown = json.loads(repo.run("config", "--json").stdout)
    assert shown["config_file"]["source"] == "project file, untrusted: changed since you trusted it"
    assert "withheld" in shown["api_key"]


def test_a_clones_symlink_to_a_trusted_file_is_not_trusted_in_the_clone(
    repo: ClonedRepo, attacker: ScriptedChatServer, tmp_path: Path
) -> None:
    # git keeps symlinks: a clone that ships recall-kit.toml as a link to the user's trusted team file
    # took on its trust, with its relative roots and learning applied to the clone's own folder
    assert repo.run("config", "trust").returncode == 0
    clone = tmp_path / "another-clone"
    clone.mkdir()
    (clone / "recall-kit.toml").symlink_to(repo.project_file)
    shown = json.loads(repo.run("config", "--json", cwd=clone).stdout)
    assert shown["config_file"]["source"] == "project file, untrusted"
    repo.query()  # in the trusted folder itself the endpoint is used
    sent = len(attacker.requests)
    assert sent >= 1
    result = repo.run("query", DEPLOY_PROMPT, "--root", str(repo.memories), cwd=clone)
    assert result.returncode == 0 and "refinement off: " in result.stdout
    assert len(attacker.requests) == sent
    assert repo.run("config", "trust", cwd=clone).returncode == 0  # trusted where it is, it counts there
    assert json.loads(repo.run("config", "--json", cwd=clone).stdout)["config_file"]["source"] == "project file, trusted"


def test_an_untrusted_project_endpoint_gets_no_prompt_even_without_a_key_or_with_its_own(
    repo: ClonedRepo, attacker: ScriptedChatServer
) -> None:
    repo.env = {k: v for k, v in repo.env.items() if k not in ("OPENAI_API_KEY", "RECALL_KIT_API_KEY")}
    keyless = repo.query()
    assert attacker.requests == []  # the user's prompt and memories stay home too
    assert f"refinement off: your prompts are not sent to {attacker.base_url}" in keyless.stdout
    assert "your prompts are not sent to" in json.loads(repo.run("config", "--json").stdout)["base_url"]["withheld"]
    repo.project_file.write_text(
        f'[selector]\nbase_url = "{attacker.base_url}"\nmodel = "m"\napi_key = "{PROJECT_KEY}"\n')
    block = repo.query("--format", "block")
    assert attacker.requests == []
    # the project's own key is ignored, said once; the refusal is the other line
    assert block.stderr.count("\n") == 2 and "refinement off: your prompts are not sent to" in block.stderr
    assert "[selector] api_key ignored: a project file you have not trusted may set only" in block.stderr
    with ScriptedChatServer() as users_endpoint:  # the user's own endpoint never gets the project's key
        repo.env["RECALL_KIT_BASE_URL"] = users_endpoint.base_url
        repo.query()
        assert users_endpoint.wait_for_requests(1) and set(authorizations(users_endpoint)) == {None}
    shown = json.loads(repo.run("config", "--json").stdout)
    assert "withheld" not in shown["api_key"] and "withheld" not in shown["base_url"]


def test_the_users_own_config_file_endpoint_gets_the_key(repo: ClonedRepo, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with ScriptedChatServer() as users_endpoint:
        repo.user_file.parent.mkdir()
        repo.user_file.write_text(f'[selector]\nbase_url = "{users_endpoint.base_url}"\nmodel = "m"\n')
        result = repo.run("query", DEPLOY_PROMPT, "--root", str(repo.memories), cwd=elsewhere)
        assert result.returncode == 0, result.stderr
        assert users_endpoint.wait_for_requests(1) and set(authorizations(users_endpoint)) == {f"Bearer {USER_KEY}"}
        shown = json.loads(repo.run("config", "--json", cwd=elsewhere).stdout)
        assert shown["base_url"]["source"] == f"user file {repo.user_file} [selector] base_url"
        assert shown["user_config"] == {"value": str(repo.user_file), "source": "environment variable RECALL_KIT_CONFIG"}


def test_a_user_config_file_others_can_write_is_refused_in_one_line(repo: ClonedRepo) -> None:
    repo.user_file.parent.mkdir()
    repo.user_file.write_text('[selector]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n')
    repo.user_file.chmod(0o666)
    assert_one_line_error(repo.run("query", "x", "--root", str(repo.memories)), str(repo.user_file),
                          "others can write to it")


def _mcp_recall(repo: ClonedRepo, errlog_path: Path, attacker: ScriptedChatServer, expect_requests: int) -> str:
    """`recall` once in an MCP session started in the cloned repo; waits for ``expect_requests``
    model requests while the session is still open."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=str(RECALL_KIT), args=["mcp", "--root", str(repo.memories)], env=repo.env, cwd=str(repo.folder))
    delivered = ""

    async def main() -> None:
        nonlocal delivered
        with errlog_path.open("w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    result = await session.call_tool("recall", {"prompt": DEPLOY_PROMPT})
                    delivered = result.content[0].text if result.content else ""
                    if expect_requests:
                        await anyio.to_thread.run_sync(attacker.wait_for_requests, expect_requests, 10.0)

    anyio.run(main)
    return delivered


@needs_mcp
def test_mcp_sends_no_key_to_an_untrusted_project_endpoint_and_does_once_it_is_trusted(
    repo: ClonedRepo, attacker: ScriptedChatServer, tmp_path: Path
) -> None:
    errlog = tmp_path / "mcp.err"
    delivered = _mcp_recall(repo, errlog, attacker, expect_requests=0)
    assert authorizations(attacker) == []
    assert "Deploying ledgerline to Fly.io" in delivered  # the fast stage still works
    warnings = [line for line in errlog.read_text().splitlines() if "model stage off" in line]
    assert len(warnings) == 1 and "recall-kit config trust" in warnings[0], errlog.read_text()

    assert repo.run("config", "trust").returncode == 0
    _mcp_recall(repo, errlog, attacker, expect_requests=1)
    assert set(authorizations(attacker)) == {f"Bearer {USER_KEY}"}
    assert "model stage off" not in errlog.read_text()


def test_serve_started_in_a_cloned_repo_has_no_model_stage_until_the_file_is_trusted(
    repo: ClonedRepo, attacker: ScriptedChatServer, tmp_path: Path
) -> None:
    env = Env(tmp_path / "user")
    env.vars = {**repo.env, **env.vars}  # the user's keys, in a home and run folder of the test's own

    def serve() -> tuple[dict[str, Any], str]:
        process = subprocess.Popen([str(RECALL_KIT), "serve"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=env.vars, cwd=repo.folder, text=True)
        assert process.stdout is not None and process.stderr is not None
        try:
            assert json.loads(process.stdout.readline())["ready"]  # blocks until it listens
            begin = {"op": "begin", "session": "s1", "query": DEPLOY_PROMPT, "roots": [str(repo.memories)]}
            status = env.request(begin, {"op": "consume", "session": "s1", "point": "initial"}, {"op": "status"})[-1]
            if status["selector"]:
                attacker.wait_for_requests(1, timeout=10)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)
        return status, process.stderr.read()

    try:
        status, stderr = serve()
        assert authorizations(attacker) == []
        assert status["selector"] is None and "model stage off: your API key" in stderr
        assert repo.run("config", "trust").returncode == 0
        status, stderr = serve()
        assert status["selector"] == "m" and "model stage off" not in stderr
        assert set(authorizations(attacker)) == {f"Bearer {USER_KEY}"}
    finally:
        stop_daemon(env)


def test_enrich_and_bench_in_a_cloned_repo_refuse_in_one_line_and_send_nothing(
    repo: ClonedRepo, attacker: ScriptedChatServer, tmp_path: Path
) -> None:
    enrich = repo.run("enrich", "--root", str(repo.memories))
    dataset = make_dataset(tmp_path / "dataset")
    bench = repo.run("bench", "delivery", str(dataset), "--model", "m", "--limit", "1")
    assert authorizations(attacker) == []
    assert_one_line_error(enrich, "is not sent to", "recall-kit config trust")
    assert_one_line_error(bench, "is not sent to", "recall-kit config trust")
