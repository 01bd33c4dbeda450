"""Decode failures in snode's words, the same on every msgspec release (issue #32).

msgspec 0.23 changed what a text field that is not UTF-8 raises (its own DecodeError, "Invalid
UTF-8 encoded string", where 0.22 let Python's UnicodeDecodeError through), and a peer's ban
reason and an RPC error then read differently by the release a machine installed. Each case here
makes msgspec refuse real bytes with the installed release and checks the phrase we give, so
`make test` (the locked release) and `make test-latest` (the newest) both hold it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
import pytest

from snode.api import errors as E
from snode.api.invalid_params import invalid_params
from snode.common.decode_reasons import DECODE_FAILURES, PHRASES, reason
from snode.core.encoding import decode
from snode.core.errors import DecodeError


class Row(msgspec.Struct, array_like=True):
    count: int
    small: Annotated[int, msgspec.Meta(le=5)]
    name: str


class Call(msgspec.Struct, forbid_unknown_fields=True):
    blocks: Annotated[int, msgspec.Meta(ge=1, le=1000)]


CASES = [
    ("a field out of range", msgspec.msgpack.decode, b"\x93\x01\x09\xa1a", Row, "must be at most 5 (at $[1])"),
    ("a text not UTF-8", msgspec.msgpack.decode, b"\x93\x01\x02\xa2\xff\xfe", Row, "a text field is not UTF-8"),
    ("too few items", msgspec.msgpack.decode, b"\x92\x01\x02", Row, "must hold at least 3 items"),
    ("no MessagePack", msgspec.msgpack.decode, b"\xc1", Row, "the bytes are not MessagePack (at byte 0)"),
    ("bytes after it", msgspec.msgpack.decode, b"\x93\x01\x02\xa1a\x00", Row,
     "extra bytes follow the value (at byte 5)"),
    ("cut short", msgspec.msgpack.decode, b"\x93\x01", Row, "the data ends early"),
    ("a wrong type", msgspec.json.decode, b'{"blocks": "x"}', Call, "must be an integer, not a string (at $.blocks)"),
    ("an unknown field", msgspec.json.decode, b'{"blocks": 1, "block": 2}', Call, "unknown field 'block'"),
    ("a missing field", msgspec.json.decode, b"{}", Call, "missing field 'blocks'"),
    ("JSON not UTF-8", msgspec.json.decode, b'"\xff\xfe"', str, "a text field is not UTF-8"),
    ("JSON cut short", msgspec.json.decode, b'{"blocks": ', Call, "the data ends early"),
    ("not JSON", msgspec.json.decode, b"{x}", Call, "the text is not JSON (at byte 1)"),
]

LIBRARY_WORDS = re.compile(r"`|Expected|MessagePack data|JSON is malformed|Invalid UTF-8|codec|Object (missing|con)")


def _refusal(fn: Any, data: bytes, kind: Any) -> Exception:
    with pytest.raises(DECODE_FAILURES) as caught:
        fn(data, type=kind)
    return caught.value


@pytest.mark.parametrize(("what", "fn", "data", "kind", "words"), CASES, ids=[c[0] for c in CASES])
def test_each_failure_is_worded_by_us(what, fn, data, kind, words):
    said = reason(_refusal(fn, data, kind))
    assert said == words, f"{what}: msgspec {msgspec.__version__}"
    assert not LIBRARY_WORDS.search(said)


def test_every_reason_is_one_of_the_phrases():
    fill = {"type": ".+", "bound": "(at most|at least|below|above)", "n": r"\S+", "m": r"\S+", "name": "[^']*",
            "pattern": "'.*'", "unit": "(items?|characters?|bytes?)"}
    templates = [re.sub(r"\\\{(\w+)\\\}", lambda m: fill[m[1]], re.escape(p)) for p in PHRASES]
    phrase = re.compile(rf"({'|'.join(templates)})( \(at (byte \d+|\$\S*)\))?")
    for _, fn, data, kind, _ in CASES:
        assert phrase.fullmatch(reason(_refusal(fn, data, kind)))


def test_an_unknown_library_text_is_not_passed_on():
    future = msgspec.DecodeError("Some new wording of a future release (byte 3)")
    assert reason(future) == "does not have the expected form"
    assert reason(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")) == "a text field is not UTF-8"


def test_a_consensus_decode_names_the_record_and_our_reason():
    with pytest.raises(DecodeError) as caught:
        decode(b"\x93\x01\x09\xa1a", Row)
    assert caught.value.reason == "not a valid Row: must be at most 5 (at $[1])"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"blocks": 0}, "Invalid params: blocks: must be at least 1"),
        ({"blocks": "x"}, "Invalid params: blocks: must be an integer, not a string"),
        ({"block": 1}, "Invalid params: unknown parameter 'block' (this method takes: blocks)"),
        ({}, "Invalid params: missing parameter 'blocks'"),
    ],
)
def test_rpc_params_lead_with_the_parameter(params, message):
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(params, Call)
    err = invalid_params(caught.value, Call)
    assert (err.code, err.message) == (E.INVALID_PARAMS, message)
