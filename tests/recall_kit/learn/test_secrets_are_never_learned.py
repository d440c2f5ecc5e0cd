"""What learning keeps of a prompt: every reproduction of a secret that once became a learned key,
and the everyday words and identifiers that must still be kept (docs/learning.md, "What is kept")."""

from __future__ import annotations

import random
import string

import pytest

from recall_kit import learnable_words
from recall_kit._secrets import scrub_secrets


def _kept(prompt: str) -> set[str]:
    words = learnable_words(prompt)
    return set(words.words) | set(words.keys)


@pytest.mark.parametrize(
    ("prompt", "secret_pieces"),
    [
        ("export PGPASSWORD=swordfishtrombone before psql", {"swordfishtrombone", "swordfish", "trombone"}),
        ("DB_PASSWORD=bluewhalecastle ./migrate", {"bluewhalecastle", "bluewhale", "castle"}),
        ("MYSQL_PWD='hunter twelve' mysql", {"hunter", "twelve"}),
        ("passphrase: purple monkey dishwasher", {"purple", "monkey", "dishwasher"}),
        ("the admin password is gravelmoon, can you log in", {"gravelmoon"}),
        ("GITHUB_TOKEN: plainlettersonly", {"plainlettersonly"}),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyzabcd", {"abcdefghijklmnopqrstuvwxyzabcd"}),
        ("curl -H 'Bearer qwertyuiopasdfghjklzxcvbnmqwer' the api", {"qwertyuiopasdfghjklzxcvbnmqwer"}),
        # a label, then an Authorization scheme: the scheme was taken for the value, and the value kept
        ("why does curl -H 'Authorization: Bearer hunter2hunter2' return 401", {"hunter2hunter2", "hunter2"}),
        ("Authorization: Basic dXNlcjpwYXNz fails", {"dxnlcjpwyxnz"}),
        ("auth=token gravelmoonriver in the header", {"gravelmoonriver", "gravelmoon"}),
        ("token Xk9mP2vL5qR8tZ3 fails", {"xk9mp2vl5qr8tz3", "xk9mp2vl5qr8tz"}),
        ("mail priya.shah@example.com about it", {"priya", "shah", "example"}),
        ("charge card 4111 1111 1111 1111 again", {"4111"}),
        # the forms an adversarial pass found kept as learned words
        ("SECRET_KEY=gravelmoon ./manage.py", {"gravelmoon"}),
        ("ENCRYPTION_KEY=gravelmoon", {"gravelmoon"}),
        ("export STRIPE_KEY=gravelmoon", {"gravelmoon"}),
        ("MY_APP_KEY=lettersonlyvalue", {"lettersonlyvalue"}),
        ("the wifi password for the office is gravelmoon", {"gravelmoon"}),
        ("the admin password is: hunter2abc", {"hunter2abc"}),
        ("the staging token was:gravelmoon", {"gravelmoon"}),
        ("run the migration with --password gravelmoon", {"gravelmoon"}),
        ("machine example.com login bob password gravelmoon", {"gravelmoon"}),
        ("machine example.com\n  login bob\n  password gravelmoon\n", {"gravelmoon"}),
        ("config = {password => 'gravelmoon'}", {"gravelmoon"}),
        ("curl -u alice:gravelmoon https://api.example.org", {"gravelmoon"}),
        ("docker login -p gravelmoon registry.example.org", {"gravelmoon"}),
        ("mysql -u root -pgravelmoon shop", {"gravelmoon", "pgravelmoon"}),
        ("sshpass -p gravelmoon ssh deploy-host uptime", {"gravelmoon"}),
        ("sshpass -pgravelmoon rsync the backups", {"gravelmoon", "pgravelmoon"}),
        ("redis-cli -h cache.internal -a gravelmoon ping", {"gravelmoon"}),
        ("smbclient //nas/share -U alice%gravelmoon", {"gravelmoon", "alice%gravelmoon"}),
        # a name longer than 64 characters before the label: the name was bounded and its value kept
        (
            "export acme_billing_service_production_readonly_replica_database_primary_eu_west_password=gravelmoon",
            {"gravelmoon"},
        ),
        ("pw: gravelmoon", {"gravelmoon"}),
        ("smtp pass: gravelmoon", {"gravelmoon"}),
        (
            "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGVsb2dyYXZlbG1vb24\ngravelmoon\n-----END PGP PRIVATE KEY BLOCK-----",
            {"gravelmoon", "lqoybgvsb2dyyxzlbg1vb24"},
        ),
        ("пароль: синийбанан", {"синийбанан"}),
        ("Passwort: blaubanane", {"blaubanane"}),
        ("le mot de passe: bananebleue", {"bananebleue"}),
        ("密码是蓝香蕉", {"蓝香", "香蕉"}),
        ("我的密码：蓝香蕉", {"蓝香", "香蕉"}),
        # a colon or a space after the word (what people type on a Latin keyboard layout)
        ("office wifi 密码: zebracornquux", {"zebracornquux"}),
        ("密码 zebracornquux for the office", {"zebracornquux"}),
        ("密码是 zebracornquux", {"zebracornquux"}),
        ("パスワード: zebracornquux", {"zebracornquux"}),
        ("パスワード zebracornquux", {"zebracornquux"}),
        ("비밀번호: zebracornquux", {"zebracornquux"}),
        # typed in full width (an input method's wide mode): the words kept are NFKC's, ASCII again
        ("ｐａｓｓｗｏｒｄ＝ｇｒａｖｅｌｍｏｏｎ for the db", {"gravelmoon"}),
        ("export ＰＧＰＡＳＳＷＯＲＤ＝gravelmoon", {"gravelmoon"}),
        ("deploy with ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ", {"akiaiosfodnn7example", "akiaiosfodnn", "example"}),
        ("ｇｈｐ＿ｂｌｕｅｗｈａｌｅｃａｓｔｌｅｍｏｏｎ push", {"bluewhalecastlemoon", "ghp_bluewhalecastlemoon"}),
    ],
)
def test_a_credential_or_private_datum_is_never_kept(prompt: str, secret_pieces: set[str]) -> None:
    kept = _kept(prompt)
    assert not kept & secret_pieces, kept & secret_pieces


def test_a_configured_secret_typed_in_full_width_is_not_kept() -> None:
    from recall_kit._secrets import Redactor

    redact = Redactor(["gravelmoonriverstone"])  # the API key of the user's settings
    for prompt in ("use gravelmoonriverstone here", "use ｇｒａｖｅｌｍｏｏｎｒｉｖｅｒｓｔｏｎｅ here"):
        assert "gravelmoonriverstone" not in learnable_words(prompt, redact).words


def test_a_random_token_of_letters_only_is_not_kept_whole_or_in_camel_case_pieces() -> None:
    rng = random.Random(7)
    for _ in range(20):
        mixed = "".join(rng.choices(string.ascii_letters, k=32))
        lower = "".join(rng.choices(string.ascii_lowercase, k=32))
        for token in (mixed, lower):
            kept = _kept(f"rotate {token} tonight")
            assert kept <= {"rotate", "tonight"}, (token, kept)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("why does getUserProfileById time out on kubernetes-dashboard", {"profile", "kubernetes", "dashboard"}),
        ("the HTTPServerRequestHandler of XMLHttpRequest in python3.11", {"handler", "xmlhttprequest"}),
        ("internationalization of the checkout page", {"internationalization", "checkout"}),
        ("max tokens: 300 for the tokenizer", {"tokens", "tokenizer"}),
        ("rotate the api key for staging", {"rotate", "staging"}),
        ("order 1234567890123 was shipped twice", {"1234567890123", "shipped"}),  # fails the Luhn check
        # flags and words the credential forms must leave alone
        ("docker run -p 8080:80 nginx", {"docker", "nginx"}),
        ("mkdir -p build before the release", {"build", "release"}),
        ("ssh -p 2222 into the bastion, then redis-cli -h cache ping", {"bastion", "redis", "cache", "ping"}),
        ("is sshpass installed on the runner", {"sshpass", "installed", "runner"}),
        ("bypass: cache and compass: north", {"bypass", "cache", "compass", "north"}),
        ("the login page has a bug with the password field", {"login", "page", "bug", "field"}),
        ("the wifi password for the office is wrong", {"wifi", "office"}),  # the value goes, the words before it stay
        ("use --key-file deploy.pem with --max-tokens 300", {"key", "file", "tokens"}),
    ],
)
def test_everyday_words_and_identifiers_are_still_kept(prompt: str, expected: set[str]) -> None:
    kept = _kept(prompt)
    assert expected <= kept, expected - kept


@pytest.mark.parametrize(
    ("line", "sure"),
    [
        ("Where the CI token for GitHub is kept and how to rotate it", False),  # prose, a plain word after "is"
        ("the wifi password for the office is gravelmoon", False),  # learning blanks it all the same
        ("the admin password is hunter2", True),
        ("the deploy token is Xk9mP2vL5qR8", True),
        ("GITHUB_TOKEN: plainlettersonly", True),  # an assignment is sure whatever its value
    ],
)
def test_what_doctor_reports_leaves_out_a_plain_word_named_in_prose(line: str, sure: bool) -> None:
    assert scrub_secrets(line) != line  # learning keeps none of these values
    assert (scrub_secrets(line, sure_only=True) != line) is sure


@pytest.mark.parametrize("run", ["a-", "a-1", "ab-", "A-"])
def test_a_pasted_run_of_dashed_words_is_scrubbed_in_bounded_time(run: str) -> None:
    import time

    from recall_kit.limits import bounded_prompt

    prompt = bounded_prompt(run * 3000 + " DB_PASSWORD=gravelmoon")  # what learning reads of a prompt
    started = time.perf_counter()
    kept = _kept(prompt)
    # 18 s before (every word start tried every length of the run), 0.1 s now: the bound fails the old
    # scrubber by a factor of 3 and leaves the new one 60 times its time on a loaded machine
    assert time.perf_counter() - started < 6.0
    assert "gravelmoon" not in kept


def test_a_whole_memory_of_dashed_words_is_scrubbed_in_bounded_time() -> None:
    import time

    # doctor scrubs a whole memory file, not a bounded prompt: 256 KiB on one line took 16 s with the name
    # before a label bounded (each word start read up to 64 characters on), 0.6 s idle now
    text = "a-" * (128 * 1024) + " DB_PASSWORD=gravelmoon"
    started = time.perf_counter()
    scrubbed = scrub_secrets(text, sure_only=True)
    assert time.perf_counter() - started < 8.0
    assert "gravelmoon" not in scrubbed and scrubbed.startswith("a-a-")


@pytest.mark.parametrize(
    "line",
    ["ｐａｓｓｗｏｒｄ＝ｇｒａｖｅｌｍｏｏｎ for the db", "export ＰＧＰＡＳＳＷＯＲＤ＝gravelmoon", "ＡＫＩＡＩＯＳＦＯＤＮＮ７ＥＸＡＭＰＬＥ"],
)
def test_the_scrubber_sees_a_secret_typed_in_full_width_for_every_caller(line: str) -> None:
    # the trail's kept head and doctor's report ask the scrubber of the text as typed, not as the index reads it
    from recall_kit._health_text import secret_columns

    for sure_only in (False, True):
        kept = scrub_secrets(line, sure_only=sure_only)
        assert "gravelmoon" not in kept and "ＧＲＡＶＥＬ" not in kept.upper() and "IOSFODNN7" not in kept
    assert list(secret_columns("a plain line\n" + line)) != []


def test_text_the_index_reads_differently_but_without_a_secret_is_kept_as_written() -> None:
    for line in ("ｗｉｄｅ ｗｏｒｄｓ only", "café … ﬁle ²", "東京の会議"):
        assert scrub_secrets(line) == line and scrub_secrets(line, sure_only=True) == line
