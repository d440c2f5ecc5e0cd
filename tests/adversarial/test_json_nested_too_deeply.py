"""JSON we did not write, nested past what ``json`` follows (it recurses once a level, so 100,000
``[`` raised RecursionError where every caller expected "not JSON"): a model's answer, a cloned
repo's package.json, an index cache's stamp, the daemon's answer, a sidecar's line. Each is read by
the one reader, ``memory_store.parse_json``, as malformed, and said so where it is reported."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from pathlib import Path

import pytest

from cli_support import run_recall_kit
from doctor_support import home_environ, sick_folder
from integration_support import DEPLOY_PROMPT, EXAMPLES, Env, env  # noqa: F401  (fixtures)
from memory_store import JsonNestingError, parse_json
from recall_kit import open_indexed
from recall_kit.cache import list_cache_files
from recall_kit.testing import Reply, ScriptedChatServer
from selector_helpers import make_docs, select_with

DEEP = "[" * 100_000


def test_nesting_past_the_interpreters_limit_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="^nested too deeply$") as caught:
        parse_json(DEEP)
    assert isinstance(caught.value, JsonNestingError)
    assert parse_json(b'{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


def test_bytes_are_read_as_utf8_only_never_guessed() -> None:
    # json.loads(bytes) takes b'{\x00"\x00' for UTF-16 and fails with "'utf-16-le' codec can't decode"
    with pytest.raises(UnicodeDecodeError) as caught:
        parse_json(b'{\x00"\x00\xe9')
    assert caught.value.encoding == "utf-8" and caught.value.start == 4


def test_a_model_answer_nested_too_deeply_falls_back_as_one_that_is_not_json() -> None:
    docs = make_docs(4)
    with ScriptedChatServer() as server:
        selection, _ = select_with(server, Reply.content(DEEP), candidates=docs, fallback=docs[:1])
    assert (selection.strategy, selection.docs, selection.fallback_reason) == ("heuristic", tuple(docs[:1]), "answer is not JSON")


def test_doctor_reads_a_package_json_nested_too_deeply_as_one_it_cannot_read(tmp_path: Path) -> None:
    reports = []
    for text in ("this is no JSON", DEEP):
        (tmp_path / text[:4]).mkdir()
        sick = sick_folder(tmp_path / text[:4])
        (sick.project / "package.json").write_text(text)
        result = run_recall_kit("doctor", "--json", cwd=sick.project, env=home_environ(sick.home))
        assert "Traceback" not in result.stderr and result.stdout, result.stderr[-2000:]
        report = json.loads(result.stdout)
        reports.append(sorted(json.dumps(finding["detail"], sort_keys=True) for finding in report["findings"]))
        # its scripts are unknown, so `npm run build` is not called gone, and the report says why
        assert not any('"runner": "npm"' in detail for detail in reports[-1]), reports[-1]
        assert any("1 package.json that is not JSON" in note for note in report["notes"]), report["notes"]
    assert reports[0] == reports[1] and any('"runner": "make"' in detail for detail in reports[1])


def test_an_index_cache_stamp_nested_too_deeply_names_no_roots(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    shutil.copytree(EXAMPLES, root)
    cache_dir = tmp_path / "cache"
    open_indexed([root], cache_dir=cache_dir)
    (cache,) = list_cache_files(cache_dir)
    cache.path.with_suffix(".used").write_text(DEEP)
    (listed,) = list_cache_files(cache_dir)
    assert listed.path == cache.path and listed.roots is None
    again = open_indexed([root], cache_dir=cache_dir)  # and the root still opens, from its cache
    assert again.reused == len(again.snapshot.docs) > 0


def test_a_sidecar_line_nested_too_deeply_is_one_problem_and_the_next_line_is_read(tmp_path: Path) -> None:
    root = tmp_path / "memories"
    (root / "user").mkdir(parents=True)
    (root / "user" / "note.md").write_text("---\nname: note\ndescription: a note\ntype: user\n---\nbody\n")
    (root / ".recall-kit").mkdir()
    sha256 = hashlib.sha256((root / "user" / "note.md").read_bytes()).hexdigest()
    good = json.dumps({"path": "user/note.md", "sha256": sha256, "keywords": ["zebra crossing"]})
    (root / ".recall-kit" / "enrichment.jsonl").write_text("[" * 30_000 + "\n" + good + "\n")
    result = run_recall_kit("validate", "--root", str(root), cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "enrichment.jsonl:1: not valid JSON (nested too deeply)" in result.stdout
    assert "enrichment.jsonl:2" not in result.stdout
    found = run_recall_kit("query", "zebra crossing", "--root", str(root), "--fast-only", cwd=tmp_path)
    assert "user/note.md" in found.stdout, found.stdout + found.stderr


@pytest.mark.parametrize("answer", [DEEP.encode() + b"\n", b"no JSON at all\n"], ids=["nested", "not-json"])
def test_a_daemon_answer_that_is_no_json_is_one_line_in_the_hooks_log(env: Env, answer: bytes) -> None:  # noqa: F811
    impostor = env.listener_in_the_daemons_place(8)

    def answer_once() -> None:
        conn, _ = impostor.accept()
        with conn:
            conn.makefile("rb").readline()
            conn.sendall(answer)

    answering = threading.Thread(target=answer_once, daemon=True)
    answering.start()
    try:
        event = {"session_id": "cc-1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
                 "hook_event_name": "UserPromptSubmit", "prompt": DEPLOY_PROMPT}
        result = env.hook(event, EXAMPLES)
    finally:
        answering.join(timeout=10)
        impostor.close()
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert env.hook_log.read_text().splitlines()[-1].endswith("the daemon's answer is not JSON")
