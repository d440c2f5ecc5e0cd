import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recall_kit import _tokenize
from recall_kit._tokenize import _analyze_plain, analyze, analyze_terms, stem, tokenize


def test_case_folding_and_stop_words_removed() -> None:
    assert tokenize("The Database IS slow") == ["databas", "slow"]


def test_full_width_text_folds_to_ascii() -> None:
    assert tokenize("ＰＯＳＴＧＲＥＳ　ｄａｔａｂａｓｅ") == tokenize("postgres database")


def test_identifiers_are_split_and_kept_whole() -> None:
    terms = tokenize("getUserName snake_case dotted.names kebab-case")
    for whole in ("getusername", "snake_case", "dotted_names", "kebab_case"):
        assert whole in terms
    for part in ("get", "user", "name", "snake", "case", "kebab"):
        assert stem(part) in terms


def test_separator_styles_of_one_identifier_match_each_other() -> None:
    assert tokenize("kebab-case")[0] == tokenize("kebab_case")[0] == tokenize("kebab.case")[0]


def test_cjk_runs_become_character_bigrams() -> None:
    assert tokenize("数据库迁移") == ["数据", "据库", "库迁", "迁移"]
    assert tokenize("서버 재시작") == ["서버", "재시", "시작"]


def test_lone_cjk_character_gives_no_term() -> None:
    assert tokenize("猫") == []
    assert tokenize("用 docker") == ["docker"]


def test_mixed_scripts_split_into_runs() -> None:
    assert tokenize("Postgres数据库") == [stem("postgres"), "数据", "据库"]


def test_stemmer_conflates_inflections() -> None:
    assert stem("deployments") == stem("deploy")
    assert stem("configured") == stem("configuration") == stem("configure")
    assert stem("running") == stem("run")
    assert stem("policies") == stem("policy")


def test_possessive_dropped_and_single_letters_ignored() -> None:
    assert tokenize("Caroline's plan a b") == [stem("caroline"), stem("plan")]


def test_surface_word_kept_for_typo_matching() -> None:
    tokens = analyze("Migrations snake_case")
    assert [(t.term, t.surface) for t in tokens] == [
        ("migr", "migrations"),
        ("snake_case", None),
        (stem("snake"), "snake"),
        ("case", "case"),
    ]


# Text built to hit the analyser's edges: identifiers, camel case, possessives, Unicode spaces that
# NFKC folds, full-width letters, CJK runs glued to Latin words, and punctuation around words.
_TRICKY = st.lists(
    st.sampled_from(
        list("abcXYZ019_.-'’` ,;:()\n\t") + ["\u3000", "\xa0", "\u2028", "ＡＢｃ", "数据库", "서버", "の", "ß", "İ", "ﬁ", "é", "ing", "ies"]
    ),
    max_size=60,
).map("".join)
_WORDS = st.lists(st.sampled_from(["deploy", "Deploy", "getUserName", "snake_case", "dotted.name", "the", "APIs"]))


@settings(max_examples=300, deadline=None)
@given(text=_TRICKY)
def test_cached_analysis_equals_plain_analysis(text: str) -> None:
    assert analyze(text) == _analyze_plain(text)
    assert analyze(text) == _analyze_plain(text)  # the second call answers from the cache
    terms, surfaces = analyze_terms(text)
    assert terms == [t.term for t in _analyze_plain(text)]
    assert surfaces == [t.surface for t in _analyze_plain(text) if t.surface]


@settings(max_examples=100, deadline=None)
@given(words=_WORDS, text=_TRICKY)
def test_cached_analysis_survives_the_cache_starting_over(
    words: list[str], text: str, monkeypatch_cache_size: None
) -> None:
    mixed = " ".join(words) + " " + text
    assert analyze(mixed) == _analyze_plain(mixed)
    assert analyze(text + " " + mixed) == _analyze_plain(text + " " + mixed)


@pytest.fixture(scope="module")
def monkeypatch_cache_size():
    # A cache of three entries starts over on almost every text, and one text can exceed it.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_tokenize, "CHUNK_CACHE_SIZE", 3)
        yield


def test_long_chunks_are_analysed_but_never_kept_so_a_long_lived_process_stays_small() -> None:
    import random
    import string
    import tracemalloc

    rng = random.Random(1)
    _tokenize._chunk_cache.clear()
    _tokenize._word_cache.clear()

    def identifier() -> str:  # one chunk of 340 two-letter parts: some 50 KB of terms when kept
        return "_".join("".join(rng.choices(string.ascii_lowercase, k=2)) for _ in range(340))

    sample = f"{identifier()} deploy {identifier().replace('_', '-')}"
    assert analyze(sample) == _analyze_plain(sample)
    tracemalloc.start()
    try:
        for _ in range(100):  # a daemon's or MCP server's prompts, each with long pasted tokens
            analyze(f"{identifier()} {identifier()}")
        kept, _peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept < 1_000_000, kept  # was 5.4 MB for these 200 chunks: CHUNK_CACHE_SIZE of them, 2.7 GB
