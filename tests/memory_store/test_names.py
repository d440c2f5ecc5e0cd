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


@given(st.binary(max_size=40))
def test_any_file_name_bytes_round_trip(name: bytes) -> None:
    ref = os.fsdecode(name.replace(b"\\", b""))  # a backslash is the one byte whose \xNN form is ambiguous
    assert given_ref(shown_ref(ref)) == ref
    shown_ref(ref).encode("utf-8")
