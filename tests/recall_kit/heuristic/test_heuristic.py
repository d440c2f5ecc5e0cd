"""FastHeuristic: ranking, the confidence gate, typos, exclusion, updates, determinism."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from memory_store import MemoryDoc, Snapshot
from recall_kit import MAX_FAST_DOCS, FastHeuristic, FastResult
from recall_kit.limits import RANKED_LIMIT


def refs(result: FastResult) -> list[str]:
    return [scored.doc.ref for scored in result.docs]


def test_one_document_store_delivers_its_match(developer_docs, make_snapshot) -> None:
    heuristic = FastHeuristic(make_snapshot(developer_docs[0]))
    result = heuristic.recall("how do I run the postgres migrations?")
    assert refs(result) == ["mem/db/postgres.md"]
    assert result.docs[0].score > 0 and result.strategy == "heuristic"


def test_two_and_three_document_stores_rank_the_match_first(developer_docs, make_snapshot) -> None:
    for size in (2, 3):
        heuristic = FastHeuristic(make_snapshot(*developer_docs[:size]))
        result = heuristic.recall("flush the redis cache on staging")
        assert refs(result)[:1] == ["mem/db/redis.md"]
        assert all(scored.score > 0 for scored in result.ranked)


def test_lexical_query_delivers_the_right_memory(developer_docs, make_snapshot) -> None:
    result = FastHeuristic(make_snapshot(*developer_docs)).recall("how do we deploy routewise to fly?")
    assert refs(result)[:1] == ["mem/deploy/fly.md"]
    assert len(result.docs) <= MAX_FAST_DOCS


def test_query_sharing_only_generic_words_gets_nothing(developer_docs, make_snapshot) -> None:
    heuristic = FastHeuristic(make_snapshot(*developer_docs))
    result = heuristic.recall("what is the weather like in Lisbon this weekend, should I use an umbrella")
    assert result.docs == () and result.strategy == "none"


def test_unrelated_query_gets_nothing_but_a_ranking_may_exist(developer_docs, make_snapshot) -> None:
    result = FastHeuristic(make_snapshot(*developer_docs)).recall("recommend a sourdough bread recipe")
    assert result.docs == ()


def test_typo_in_an_unknown_word_is_expanded(developer_docs, make_snapshot) -> None:
    heuristic = FastHeuristic(make_snapshot(*developer_docs))
    assert refs(heuristic.recall("postgress migratons"))[:1] == ["mem/db/postgres.md"]
    assert refs(heuristic.recall("configure neovimm tabs"))[:1] == ["mem/user/editor.md"]


def test_typo_expansion_scores_below_an_exact_match(make_doc, make_snapshot) -> None:
    exact = make_doc("a.md", "Kubernetes cluster", "kubernetes cluster notes")
    near = make_doc("b.md", "Kubernetis cluster", "kubernetis cluster notes")
    result = FastHeuristic(make_snapshot(exact, near)).recall("kubernetes")
    assert [s.doc.ref for s in result.ranked] == ["mem/a.md"]  # a known word is not expanded
    result = FastHeuristic(make_snapshot(near)).recall("kubernetes cluster")
    assert refs(result) == ["mem/b.md"]


def test_one_cjk_word_does_not_pass_as_two_matched_words(make_doc, make_snapshot) -> None:
    incident = make_doc(
        "ja/incident.md", "障害対応の手順", "本番でエラーが出たら復旧を優先する", "ロールバックしてから原因を調べる"
    )
    deploy = make_doc("zh/deploy.md", "发布流程", "生产发布与回滚", "先在预发环境验证")
    heuristic = FastHeuristic(make_snapshot(incident, deploy))
    # "エラー" is one word, though its bigrams エラ and ラー both match.
    assert refs(heuristic.recall("エラー")) == []
    assert [s.doc.ref for s in heuristic.recall("エラー").ranked] == ["mem/ja/incident.md"]
    # Two words, each matched apart from the other in one unbroken run, still count as two.
    assert refs(heuristic.recall("生产发布出问题了，怎么回滚"))[:1] == ["mem/zh/deploy.md"]
    assert refs(heuristic.recall("本番エラー"))[:1] == ["mem/ja/incident.md"]


def test_identifier_query_matches_whole_and_parts(developer_docs, make_snapshot) -> None:
    heuristic = FastHeuristic(make_snapshot(*developer_docs))
    assert refs(heuristic.recall("where is getUserName defined"))[:1] == ["mem/code/style.md"]
    assert refs(heuristic.recall("auth_utils module"))[:1] == ["mem/code/style.md"]


def test_excluded_refs_are_neither_delivered_nor_ranked(developer_docs, make_snapshot) -> None:
    heuristic = FastHeuristic(make_snapshot(*developer_docs))
    result = heuristic.recall("postgres database", exclude={"mem/db/postgres.md"})
    assert "mem/db/postgres.md" not in [s.doc.ref for s in result.ranked]


def test_equal_scores_break_ties_by_ref_and_repeat_exactly(make_doc, make_snapshot) -> None:
    docs = [make_doc(f"{name}.md", "Backup policy", "nightly restic backups to b2") for name in "cab"]
    heuristic = FastHeuristic(make_snapshot(*docs))
    first = heuristic.recall("restic backups")
    assert [s.doc.ref for s in first.ranked] == ["mem/a.md", "mem/b.md", "mem/c.md"]
    again = heuristic.recall("restic backups")
    assert (again.docs, again.ranked) == (first.docs, first.ranked)


def test_ranking_is_capped(make_doc, make_snapshot) -> None:
    docs = [make_doc(f"d{i:03d}.md", f"note {i}", "shared topic words") for i in range(80)]
    result = FastHeuristic(make_snapshot(*docs)).recall("shared topic")
    assert len(result.ranked) == RANKED_LIMIT


def test_empty_store_and_empty_query_give_nothing(developer_docs, make_snapshot) -> None:
    assert FastHeuristic(make_snapshot()).recall("postgres").docs == ()
    assert FastHeuristic(make_snapshot(*developer_docs)).recall("   ").docs == ()
    assert FastHeuristic(make_snapshot(*developer_docs)).recall("猫").docs == ()


def next_snapshot(previous: Snapshot, add: tuple[MemoryDoc, ...] = (), remove: tuple[str, ...] = ()) -> Snapshot:
    docs = dict(previous.docs)
    for ref in remove:
        docs.pop(ref)
    for doc in add:
        docs[doc.ref] = doc
    return Snapshot.build(
        previous.version + 1, docs, (), frozenset(d.ref for d in add), frozenset(remove)
    )


class SnapshotFeed:
    """Test double of the store's subscription boundary: hands out snapshots it is given."""

    def __init__(self, first: Snapshot) -> None:
        self.current = first
        self.callbacks: list[Callable[[Snapshot], None]] = []

    def snapshot(self) -> Snapshot:
        return self.current

    def subscribe(self, callback: Callable[[Snapshot], None]) -> Callable[[], None]:
        self.callbacks.append(callback)
        return lambda: self.callbacks.remove(callback)

    def publish(self, snapshot: Snapshot) -> None:
        self.current = snapshot
        for callback in list(self.callbacks):
            callback(snapshot)


def test_follows_the_store_incrementally(developer_docs, make_snapshot) -> None:
    feed = SnapshotFeed(make_snapshot(*developer_docs[:3]))
    heuristic = FastHeuristic(feed)
    assert heuristic.recall("neovim tabs").docs == ()
    v2 = next_snapshot(feed.current, add=(developer_docs[3],))
    feed.publish(v2)
    assert heuristic.version == 2
    assert refs(heuristic.recall("neovim tabs")) == ["mem/user/editor.md"]
    feed.publish(next_snapshot(v2, remove=("mem/user/editor.md",)))
    assert heuristic.recall("neovim tabs").docs == ()
    heuristic.close()
    assert feed.callbacks == []


def test_missed_version_rebuilds_and_matches_a_fresh_index(developer_docs, make_snapshot) -> None:
    feed = SnapshotFeed(make_snapshot(*developer_docs[:2]))
    heuristic = FastHeuristic(feed)
    v2 = next_snapshot(feed.current, add=(developer_docs[2],))
    v3 = next_snapshot(v2, add=(developer_docs[3],), remove=("mem/db/redis.md",))
    feed.publish(v3)  # v2 never arrived
    fresh = FastHeuristic(v3)
    for query in ("deploy routewise", "neovim", "redis cache", "postgres"):
        assert heuristic.recall(query).ranked == fresh.recall(query).ranked
    feed.publish(v2)  # an older snapshot arriving late changes nothing
    assert heuristic.version == 3


def test_field_weights_weigh_every_index_the_heuristic_builds(developer_docs, make_snapshot) -> None:
    body_heavy = (1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0, 1.0)
    query = "flyctl secrets set and roll back"  # deploy/fly.md: one word in its description, the rest in its body
    feed = SnapshotFeed(make_snapshot(*developer_docs[:3]))
    heuristic = FastHeuristic(feed, field_weights=body_heavy)
    assert heuristic.recall(query).ranked != FastHeuristic(feed.current).recall(query).ranked
    v2 = next_snapshot(feed.current, add=(developer_docs[3],))
    feed.publish(v2)  # added incrementally
    assert heuristic.recall(query).ranked == FastHeuristic(v2, field_weights=body_heavy).recall(query).ranked
    v4 = next_snapshot(next_snapshot(v2, add=(developer_docs[4],)), remove=("mem/db/redis.md",))
    feed.publish(v4)  # rebuilt: v3 never arrived
    assert heuristic.recall(query).ranked == FastHeuristic(v4, field_weights=body_heavy).recall(query).ranked
    assert heuristic.recall(query).ranked != FastHeuristic(v4).recall(query).ranked
    with pytest.raises(ValueError, match=r"^field_weights: 1 given, one per field of \('name'"):
        FastHeuristic(v4, field_weights=(1.0,))


def test_edited_document_is_rescored(developer_docs, make_doc, make_snapshot) -> None:
    snapshot = make_snapshot(*developer_docs)
    heuristic = FastHeuristic(snapshot)
    edited = make_doc("db/redis.md", "Valkey cache", "Session cache moved from Redis to Valkey 8.")
    heuristic.apply(next_snapshot(snapshot, add=(edited,)))
    assert refs(heuristic.recall("valkey session cache"))[:1] == ["mem/db/redis.md"]
    assert heuristic.recall("valkey session cache").docs[0].doc.name == "Valkey cache"


def test_queries_during_updates_see_whole_versions(developer_docs, make_snapshot) -> None:
    base = make_snapshot(*developer_docs[:4])
    heuristic = FastHeuristic(base)
    errors: list[BaseException] = []
    done = threading.Event()

    def query_loop() -> None:
        try:
            while not done.is_set():
                names = {s.doc.name for s in heuristic.recall("python style hints").ranked}
                assert names <= {"Python style", "Postgres setup", "Redis cache", "Deploying routewise", "Editor preferences"}
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=query_loop)
    thread.start()
    snapshot = base
    for _ in range(100):
        snapshot = next_snapshot(snapshot, add=(developer_docs[4],))
        heuristic.apply(snapshot)
        snapshot = next_snapshot(snapshot, remove=(developer_docs[4].ref,))
        heuristic.apply(snapshot)
    done.set()
    thread.join(timeout=10)
    assert not errors
