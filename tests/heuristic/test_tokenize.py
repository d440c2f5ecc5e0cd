from recall_kit._tokenize import analyze, stem, tokenize


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
