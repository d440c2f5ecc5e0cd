"""`recall-kit query`: the fast delivery at once, the model's refinement after, nothing secret."""

from __future__ import annotations

import json
from pathlib import Path

from cli_support import EXAMPLES, RunCli, assert_one_line_error, clean_environ, json_out

from recall_kit.testing import Reply, ScriptedChatServer

DEPLOY = "how do we deploy ledgerline to production"
DEPLOY_DOC = "memories/projects/ledgerline/deploy.md"
API_KEY = "sk-test-9f2c41d7e0b35a68"


def test_query_text_shows_fast_delivery_with_scores_and_the_rendered_block(run_cli: RunCli) -> None:
    result = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "refinement off: --fast-only"
    assert lines[1].startswith("searched 27 memories in ") and lines[1].endswith(" ms")
    assert lines[2].startswith("delivered at once (") and lines[2].endswith("): 1 memory")  # plain words only
    label, score, ref = lines[3].split()[:3]
    assert label == "score" and float(score) > 0 and ref == DEPLOY_DOC
    assert "<recalled-memories>" in result.stdout and f"Reference: {DEPLOY_DOC}" in result.stdout


def test_query_verbose_adds_the_stage_details_and_a_root_too_large_is_named(run_cli: RunCli, tmp_path: Path) -> None:
    verbose = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only", "-v").stdout.splitlines()
    assert "phase fast, strategy heuristic" in verbose[3] and "placement prepend" in verbose[3]
    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for n in range(50_001):  # one over the store's bound: it is named, never walked through in silence
        (crowded / f"{n}").touch()
    lines = run_cli("query", DEPLOY, "--root", str(crowded), "--fast-only").stdout.splitlines()
    assert lines[1] == "searched 0 memories in " + lines[1].split(" in ")[1]
    assert lines[2].startswith("  not read: crowded/.: more than 50,000 files and folders")


def test_query_without_model_config_says_refinement_is_off_in_one_line(run_cli: RunCli) -> None:
    result = run_cli("query", DEPLOY, "--root", str(EXAMPLES))
    assert result.returncode == 0, result.stderr
    off = [line for line in result.stdout.splitlines() if line.startswith("refinement off")]
    assert len(off) == 1 and "missing base URL and model" in off[0]
    assert DEPLOY_DOC in result.stdout and "refined" not in result.stdout


def test_query_json_fast_only_has_scores_rendered_text_and_no_refined_part(run_cli: RunCli) -> None:
    data = json_out(run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only", "--json"))
    assert [d["ref"] for d in data["docs"]] == [DEPLOY_DOC] and data["docs"][0]["score"] > 0
    assert data["strategy"] == "heuristic" and data["fast_ms"] >= 0 and data["store_size"] > 20
    assert data["initial"]["phase"] == "fast" and data["initial"]["wait_ms"] < 100
    assert data["rendered"].startswith("<recalled-memories>") and DEPLOY_DOC in data["rendered"]
    assert data["fast"]["ranked"][0]["ref"] == DEPLOY_DOC
    assert data["refinement"] == {"enabled": False, "reason": "--fast-only"}
    assert data["refined"] is None
    same = json_out(run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only", "--format", "json"))
    assert same["docs"] == data["docs"] and same["rendered"] == data["rendered"]


def test_query_with_a_model_prints_the_refinement_and_rejected_refs_but_never_the_key(run_cli: RunCli) -> None:
    with ScriptedChatServer(default=Reply.traversal(valid=2), latency_ms=200) as server:
        env = clean_environ(RECALL_KIT_API_KEY=API_KEY)
        args = ("query", DEPLOY, "--root", str(EXAMPLES), "--base-url", server.base_url, "--model", "scripted")
        text = run_cli(*args, env=env)
        data = json_out(run_cli(*args, "--json", env=env))
        headers = [r.headers.get("authorization") for r in server.requests]
    assert headers == [f"Bearer {API_KEY}"] * 2  # the key was used, and is in no output below
    assert API_KEY not in text.stdout + text.stderr and API_KEY not in data.__repr__()
    assert text.returncode == 0, text.stderr
    assert text.stdout.index("delivered at once") < text.stdout.index("refined after")
    assert "strategy model, response mode json_schema" in text.stdout
    assert "rejected: ../../etc/passwd (path escapes the memory roots)" in text.stdout
    refined = data["refined"]
    assert refined["settled"] and refined["strategy"] == "model" and refined["model_ms"] >= 200
    assert len(refined["accepted"]) == 2 and [d["ref"] for d in refined["docs"]] == refined["accepted"]
    assert {r["reason"] for r in refined["rejected"]} == {"path escapes the memory roots"}
    new = set(refined["accepted"]) - {d["ref"] for d in data["docs"]}
    if new:  # what the fast phase did not deliver arrives at the first tool-result point
        assert set(refined["tool_result"]["docs"]) == new and refined["tool_result"]["placement"] == "append"
    assert data["refinement"]["enabled"] and "api_key" not in data["refinement"]


def test_query_with_no_fast_match_gets_the_model_choice_at_the_tool_result_point(run_cli: RunCli) -> None:
    chosen = "memories/user/profile.md"
    with ScriptedChatServer(selections=[chosen], latency_ms=300) as server:
        data = json_out(run_cli(
            "query", "sourdough starter feeding", "--root", str(EXAMPLES), "--json",
            env=clean_environ(RECALL_KIT_BASE_URL=server.base_url, RECALL_KIT_MODEL="scripted"),
        ))
    assert data["docs"] == [] and data["initial"] is None and data["rendered"] == ""
    assert data["refined"]["accepted"] == [chosen]
    assert data["refined"]["tool_result"]["docs"] == [chosen]
    assert data["refined"]["tool_result"]["latency_ms"] >= 300


def test_query_with_a_missing_root_exits_2_with_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    assert_one_line_error(run_cli("query", "x", "--root", str(tmp_path / "absent")), "absent")


def test_query_with_a_broken_config_file_exits_2_with_one_line(run_cli: RunCli, tmp_path: Path) -> None:
    workdir = tmp_path / "broken"
    workdir.mkdir()
    (workdir / "recall-kit.toml").write_text("[selector\nmodel = 'x'\n")
    assert_one_line_error(run_cli("query", "x", "--root", str(EXAMPLES), cwd=workdir), "not valid TOML")
    assert_one_line_error(
        run_cli("query", "x", "--root", str(EXAMPLES), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                "--model-timeout", "-1"),
        "argument --model-timeout: timeout must be a positive",
    )


def test_query_verbose_shows_the_near_misses_and_why_the_gate_held_them(run_cli: RunCli) -> None:
    result = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only", "-v")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("near misses (ranked, not delivered):")
    misses = lines[start + 1:]
    assert len(misses) == 9 and all(DEPLOY_DOC not in line for line in misses)
    assert misses[0].split()[1] == "memories/projects/tidepool/deploy.md:" and "needs 2" in misses[0]
    assert misses[1].endswith("ranked #3; the gate passes only the top 2")
    assert "near misses" not in run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only").stdout
    data = json_out(run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--fast-only", "-v", "--json"))
    assert [m["ref"] + ": " + m["why"] for m in data["near_misses"]] == [line.split(maxsplit=1)[1] for line in misses]


def test_query_verbose_holds_a_body_phrase_match_only_for_the_rule_it_fails(run_cli: RunCli, tmp_path: Path) -> None:
    # The second document passes the confidence test through its body phrase: only its score holds it.
    root = tmp_path / "m"
    root.mkdir()
    memory = "---\nname: {name}\ndescription: {description}\ntype: project\n---\n{body}\n"
    (root / "flags.md").write_text(memory.format(
        name="Feature flag migrations", description="Migrations run behind a feature flag",
        body="We gate every schema change."), encoding="utf-8")
    (root / "release.md").write_text(memory.format(
        name="Billing release notes", description="How releases are cut and announced",
        body="Run migrations behind a feature flag so a rollback never needs a down migration."), encoding="utf-8")
    data = json_out(run_cli("query", "migrations behind a feature flag", "--root", str(root), "--fast-only", "-v",
                            "--json"))
    assert [d["ref"] for d in data["docs"]] == ["m/flags.md"]
    (miss,) = data["near_misses"]
    assert miss["ref"] == "m/release.md" and miss["why"] == "score below 0.7 x the best"
    assert miss["passed"] is False and [r["rule"] for r in miss["reasons"]] == ["second_score"]


def test_query_format_block_prints_only_the_memory_block_or_nothing(run_cli: RunCli) -> None:
    block = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--format", "block")
    assert block.returncode == 0 and block.stderr == ""
    assert block.stdout.startswith("<recalled-memories>\n") and block.stdout.endswith("</recalled-memories>\n")
    assert f"Reference: {DEPLOY_DOC}" in block.stdout and "fast stage" not in block.stdout
    nothing = run_cli("query", "sourdough starter feeding", "--root", str(EXAMPLES), "--format", "block")
    assert nothing.returncode == 0 and nothing.stdout == ""


def test_an_unreachable_model_reads_plainly_and_exits_3_only_under_require_model(run_cli: RunCli) -> None:
    args = ("query", DEPLOY, "--root", str(EXAMPLES), "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    shown = run_cli(*args)
    assert shown.returncode == 0, shown.stderr
    assert "model unreachable (ConnectError): showing the fast result" in shown.stdout.splitlines()
    required = run_cli(*args, "--require-model")
    assert required.returncode == 3 and DEPLOY_DOC in required.stdout
    assert required.stderr == "recall-kit: --require-model: model unreachable (ConnectError): showing the fast result\n"
    data = json.loads(run_cli(*args, "--json", "--require-model").stdout)
    assert data["refined"]["model_answered"] is False and data["refined"]["summary"].startswith("model unreachable")


def test_require_model_exits_0_when_the_model_answers_and_3_when_none_is_configured(run_cli: RunCli) -> None:
    with ScriptedChatServer(selections=[DEPLOY_DOC]) as server:
        answered = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--base-url", server.base_url,
                           "--model", "scripted", "--require-model")
    assert answered.returncode == 0, answered.stderr
    assert "refined after" in answered.stdout
    unconfigured = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--require-model")
    assert unconfigured.returncode == 3 and DEPLOY_DOC in unconfigured.stdout  # the fast result is still shown
    stderr = unconfigured.stderr.splitlines()
    assert len(stderr) == 1 and stderr[0].startswith("recall-kit: --require-model: refinement is off (no model configured")
    as_json = run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--require-model", "--json")
    assert as_json.returncode == 3 and json.loads(as_json.stdout)["refinement"]["enabled"] is False
    assert_one_line_error(run_cli("query", DEPLOY, "--root", str(EXAMPLES), "--require-model", "--fast-only"),
                          "--require-model", "--fast-only")


def test_a_model_timeout_and_an_http_error_read_plainly(run_cli: RunCli) -> None:
    args = ("query", DEPLOY, "--root", str(EXAMPLES), "--model", "scripted")
    with ScriptedChatServer(default=Reply.hang()) as server:
        slow = run_cli(*args, "--base-url", server.base_url, "--model-timeout", "0.3", "--require-model")
    with ScriptedChatServer(default=Reply.error(400, "context too long")) as server:
        failed = run_cli(*args, "--base-url", server.base_url)
    assert slow.returncode == 3 and "model timed out (deadline of 0.3 s exceeded): showing the fast result" in slow.stdout
    assert "model failed (HTTP 400: context too long): showing the fast result" in failed.stdout
