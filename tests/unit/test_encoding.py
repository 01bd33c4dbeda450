"""Canonical encoding (core/encoding.py): every consensus type round-trips, and `decode` refuses
every other byte string that means the same value, with DecodeError.

The non-canonical variants come from a small msgpack walker that rewrites one item of the
canonical bytes at a time: an integer, a byte string's length or an array's length in another
(wider or signed) msgpack form; plus trailing bytes, every truncation and a map in place of the
array a record is encoded as.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.core.blocks import Block, BlockHeader, BlockHeaderV2
from snode.core.encoding import decode, decode_trusted, encode
from snode.core.errors import DecodeError
from snode.core.state import Contribution, Quorum, ServiceNode, Undo, UtxoEntry
from snode.core.transactions import OutPoint, Transaction, Vote
from tests.unit.helpers import (
    BLOCKS,
    PAYLOADS,
    QUORUMS,
    SERVICE_NODES,
    UNDOS,
    UTXOS,
    V1_HEADERS,
    V2_HEADERS,
    transactions,
)

CASES: dict[str, tuple[type[msgspec.Struct], st.SearchStrategy[Any]]] = {
    **{f"Transaction[{kind}]": (Transaction, transactions(p)) for kind, p in PAYLOADS.items()},
    "Block": (Block, BLOCKS),
    "BlockHeader": (BlockHeader, V1_HEADERS),
    "BlockHeaderV2": (BlockHeaderV2, V2_HEADERS),
    "UtxoEntry": (UtxoEntry, UTXOS),
    "ServiceNode": (ServiceNode, SERVICE_NODES),
    "Undo": (Undo, UNDOS),
    "Quorum": (Quorum, QUORUMS),
}


# --- a msgpack walker that rewrites one item at a time -------------------------------------

_INT_FORMS = [  # (first byte, width, signed)
    (0xCC, 1, False), (0xCD, 2, False), (0xCE, 4, False), (0xCF, 8, False),
    (0xD0, 1, True), (0xD1, 2, True), (0xD2, 4, True), (0xD3, 8, True),
]
_UNSIGNED = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
_SIGNED = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
_BIN = {0xC4: 1, 0xC5: 2, 0xC6: 4}
_ARRAY = {0xDC: 2, 0xDD: 4}


def items(data: bytes) -> list[tuple[int, int, str, int]]:
    """(start, end of header, kind, value) of every msgpack item, in order; kind is `int`,
    `bin` (value: length), `array` (value: length) or `other`."""
    found: list[tuple[int, int, str, int]] = []
    pos = 0

    def number(start: int, width: int, signed: bool) -> int:
        return int.from_bytes(data[start:start + width], "big", signed=signed)

    def item() -> None:
        nonlocal pos
        start, first = pos, data[pos]
        if first <= 0x7F or first >= 0xE0:
            pos += 1
            found.append((start, pos, "int", first if first <= 0x7F else first - 0x100))
        elif first in _UNSIGNED or first in _SIGNED:
            width = _UNSIGNED.get(first) or _SIGNED[first]
            pos += 1 + width
            found.append((start, pos, "int", number(start + 1, width, first in _SIGNED)))
        elif first in _BIN:
            width = _BIN[first]
            length = number(start + 1, width, False)
            found.append((start, start + 1 + width, "bin", length))
            pos = start + 1 + width + length
        elif 0x90 <= first <= 0x9F or first in _ARRAY:
            width = _ARRAY.get(first, 0)
            length = first & 0x0F if not width else number(start + 1, width, False)
            pos = start + 1 + width
            found.append((start, pos, "array", length))
            for _ in range(length):
                item()
        elif first in (0xC0, 0xC2, 0xC3):
            pos += 1
            found.append((start, pos, "other", first))
        else:
            raise AssertionError(f"unexpected msgpack byte {first:#x} at {start}")

    item()
    assert pos == len(data), "the walker must consume exactly one item"
    return found


def _other_headers(kind: str, value: int) -> Iterator[bytes]:
    """Every msgpack header for `value` of `kind`, canonical or not."""
    if kind == "int":
        if 0 <= value <= 0x7F:
            yield bytes([value])
        if -32 <= value < 0:
            yield bytes([value + 0x100])
        for first, width, signed in _INT_FORMS:
            bits = 8 * width
            lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2**bits - 1)
            if lo <= value <= hi:
                yield bytes([first]) + value.to_bytes(width, "big", signed=signed)
    elif kind == "bin":
        for first, width in _BIN.items():
            if value < 2 ** (8 * width):
                yield bytes([first]) + value.to_bytes(width, "big")
    elif kind == "array":
        if value <= 0x0F:
            yield bytes([0x90 | value])
        for first, width in _ARRAY.items():
            yield bytes([first]) + value.to_bytes(width, "big")


def same_value_other_bytes(data: bytes) -> Iterator[bytes]:
    """Each encoding that differs from `data` in the form of exactly one item."""
    for start, header_end, kind, value in items(data):
        for header in _other_headers(kind, value):
            if header != data[start:header_end]:
                yield data[:start] + header + data[header_end:]


def as_map(value: msgspec.Struct) -> bytes:
    """The record as a map of field name -> value instead of the canonical array."""
    return msgspec.msgpack.encode({f: getattr(value, f) for f in value.__struct_fields__})


def non_canonical(data: bytes, value: msgspec.Struct) -> Iterator[tuple[str, bytes]]:
    """(what, bytes) of every non-canonical variant of `data`, the canonical form of `value`."""
    for variant in same_value_other_bytes(data):
        yield "wider form", variant
    for tail in (b"\x00", b"\xc0", data):
        yield "trailing bytes", data + tail
    for cut in range(len(data)):
        yield f"truncated at {cut}", data[:cut]
    yield "map instead of array", as_map(value)


# --- tests --------------------------------------------------------------------------------

@pytest.mark.parametrize("case", sorted(CASES))
@given(data=st.data())
def test_round_trip_and_refuse_every_non_canonical_variant(case, data):
    kind, strategy = CASES[case]
    value = data.draw(strategy)
    encoded = encode(value)
    assert decode(encoded, kind) == value
    assert decode_trusted(encoded, kind) == value
    assert encode(decode(encoded, kind)) == encoded
    for what, variant in non_canonical(encoded, value):
        assert variant != encoded
        with pytest.raises(DecodeError):
            decode(variant, kind)
            pytest.fail(f"{case}: accepted a variant ({what}): {variant.hex()}")


def test_walker_sees_every_item_of_a_known_encoding():
    # [[32 zero bytes], 5, 200] as UtxoEntry: array, bin, fixint, uint8.
    encoded = encode(UtxoEntry(bytes(32), 5, 200))
    assert [(kind, value) for _, _, kind, value in items(encoded)] == [
        ("array", 3), ("bin", 32), ("int", 5), ("int", 200),
    ]
    variants = list(same_value_other_bytes(encoded))
    assert bytes.fromhex("dc0003") + encoded[1:] in variants
    assert encoded[:-2] + bytes.fromhex("cd00c8") in variants
    assert encoded[:-2] + bytes.fromhex("d100c8") in variants


@pytest.mark.parametrize(
    ("kind", "value", "field", "bad"),
    [
        (UtxoEntry, UtxoEntry(bytes(32), 5, 7), "amount", -1),
        (UtxoEntry, UtxoEntry(bytes(32), 5, 7), "owner", bytes(31)),
        (OutPoint, OutPoint(bytes(32), 1), "index", 65_536),
        (ServiceNode, None, "fee_ppm", 1_000_001),
        (Vote, Vote(bytes(32), bytes(64)), "signature", bytes(63)),
    ],
)
def test_out_of_range_fields_are_refused(kind, value, field, bad):
    if value is None:
        value = ServiceNode(
            bytes(32), 0, 0, 0, (Contribution(bytes(32), 1, 1),), -1, False, -1, 0, 0, 0, 0, 0
        )
    fields = [bad if f == field else getattr(value, f) for f in value.__struct_fields__]
    with pytest.raises(DecodeError, match=f"not a valid {kind.__name__}"):
        decode(msgspec.msgpack.encode(fields), kind)


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        (Transaction, b""),
        (Transaction, encode([1, [], [], [9], []])),  # unknown payload tag
        (Transaction, encode([1, [], [], [0], [], "extra"])),
        (Block, encode("a block")),
        (UtxoEntry, encode([bytes(32), 5.0, 7])),
        (UtxoEntry, encode([bytes(32), True, 7])),
        (ServiceNode, encode([bytes(32)] * 13)),
    ],
)
def test_wrong_shapes_are_refused(kind, data):
    with pytest.raises(DecodeError):
        decode(data, kind)


def test_a_text_field_that_is_not_utf8_is_a_decode_error():
    # Found by the P2P mutation fuzzer: msgspec before 0.23 raised UnicodeDecodeError for it, which
    # reached a peer handler as an unexpected exception (a traceback, no ban); 0.23 raises a
    # DecodeError of its own wording. Either is the same DecodeError in our words.
    from snode.core.encoding import decode, encode
    from snode.core.errors import DecodeError
    from snode.net import protocol as P

    good = encode(P.Peers(["no"]))
    bad = good.replace(b"\xa2no", b"\xa2\xff\xfe")
    with pytest.raises(DecodeError, match="a text field is not UTF-8"):
        decode(bad, P.Message)  # type: ignore[arg-type]  # a Union alias, not a type object; msgspec takes it
