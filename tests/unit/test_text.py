"""`common.text.fixed_hex`: the one parse of a fixed-size hex value (keys, hashes, salts) that
the RPC, the wallet, snode-cli's OMQ client, registrations and genesis documents share."""

from __future__ import annotations

import pytest

from snode.common.text import fixed_hex


def test_the_bytes_of_hex_of_the_right_size():
    assert fixed_hex("00ff" * 16, 32) == bytes.fromhex("00ff" * 16)
    assert fixed_hex("ABCD", 2) == b"\xab\xcd"


@pytest.mark.parametrize("text", ["ab" * 31, "ab" * 33, "zz" * 32, "abc", "", None, 7, b"ab" * 32])
def test_anything_else_is_none(text):
    assert fixed_hex(text, 32) is None
