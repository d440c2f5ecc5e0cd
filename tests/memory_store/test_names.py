"""shown_ref and given_ref: a ref whose file name is not UTF-8, as text, and back."""

from __future__ import annotations

import os

from hypothesis import given
from hypothesis import strategies as st

from memory_store import MemoryStore, given_ref, shown_ref


def test_a_byte_that_is_not_utf8_is_shown_as_its_hex_and_read_back(tmp_path) -> None:
    (tmp_path / os.fsdecode(b"caf\xe9.md")).write_text("---\nname: Caf\ndescription: d\ntype: user\n---\nbody\n")
    store = MemoryStore.open(tmp_path, watch=False)
    try:
        (ref,) = store.snapshot().docs
    finally:
        store.close()
    assert shown_ref(ref).endswith("caf\\xe9.md")
    shown_ref(ref).encode("utf-8")  # text UTF-8 can carry
    assert given_ref(shown_ref(ref)) == ref


def test_a_utf8_name_is_unchanged() -> None:
    assert shown_ref("notes/café déjà.md") == "notes/café déjà.md"
    assert given_ref("notes/café déjà.md") == "notes/café déjà.md"


def test_a_name_that_reads_as_another_names_shown_form_is_shown_apart() -> None:
    literal, byte = "user/a\\xe9.md", os.fsdecode(b"user/a\xe9.md")  # a backslash, x, e, 9; the byte 0xE9
    assert shown_ref(byte) == "user/a\\xe9.md" and shown_ref(literal) == "user/a\\\\xe9.md"
    assert given_ref(shown_ref(literal)) == literal and given_ref(shown_ref(byte)) == byte
    assert shown_ref("notes\\draft.md") == "notes\\draft.md"  # a backslash that reads as no byte: as it is


@given(st.binary(max_size=40))
def test_any_file_name_bytes_round_trip(name: bytes) -> None:
    ref = os.fsdecode(name)
    assert given_ref(shown_ref(ref)) == ref
    shown_ref(ref).encode("utf-8")


# names made of the pieces that could read alike: backslashes, "x", hex digits, bytes that are not UTF-8
_TRICKY = st.lists(st.sampled_from([b"\\", b"\\xe9", b"x", b"e", b"9", b"7", b"\xe9", b"\x80", b"a"]), max_size=8).map(
    lambda pieces: os.fsdecode(b"".join(pieces)))


@given(_TRICKY)
def test_a_tricky_name_round_trips(ref: str) -> None:
    assert given_ref(shown_ref(ref)) == ref


@given(_TRICKY, _TRICKY)
def test_two_names_are_never_shown_alike(one: str, other: str) -> None:
    assert (shown_ref(one) == shown_ref(other)) == (one == other)
