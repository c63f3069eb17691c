"""Fingerprints of Pipe-mode records (smtrain.data.fingerprints): the checkpoint's file format and
the multiset a resumed epoch drops from."""
from __future__ import annotations

from array import array

import pytest

from smtrain.data.fingerprints import Fingerprints, fingerprint, from_bytes, to_bytes


def test_fingerprints_are_64_bit_stable_and_tell_records_apart() -> None:
    records = [b"", b"a", b"b", b"ab", b"ba", bytes(1000), bytes(1001)]
    keys = [fingerprint(r) for r in records]
    assert len(set(keys)) == len(records) and all(0 <= k < 1 << 64 for k in keys)
    assert fingerprint(memoryview(b"xab")[1:]) == fingerprint(b"ab")  # buffers without a copy, same value
    assert fingerprint(b"hello") == 0x9555E8555C62DCFD  # XXH3-64 of b"hello": stable across runs and hosts


def test_file_format_is_little_endian_u64_and_round_trips() -> None:
    values = array("Q", [0, 1, 1 << 63, (1 << 64) - 1])
    data = to_bytes(values)
    assert data[:16] == bytes(8) + b"\x01" + bytes(7) and len(data) == 32
    assert from_bytes(data) == values
    with pytest.raises(ValueError, match="8-byte values; got 7 bytes"):
        from_bytes(bytes(7))


def test_each_fingerprint_is_dropped_as_often_as_it_was_consumed() -> None:
    drop = Fingerprints([5, 5, 9])
    assert [drop.take(k) for k in (5, 9, 5, 5, 9, 7)] == [True, True, True, False, False, False]
    assert (drop.total, drop.dropped, drop.missing) == (3, 3, 0)
    partly = Fingerprints([1, 2])
    partly.take(2)
    assert partly.missing == 1
