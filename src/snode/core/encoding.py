"""The one canonical byte form of every consensus object: msgpack of array-like msgspec records.

The same bytes go to disk, onto the wire and into hashes. Decoding is strict: the bytes must be
exactly what encoding the decoded value gives back (no longer integer forms, no trailing fields,
no extra bytes), so every object has one encoding and one hash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import msgspec

from snode.common import decode_reasons
from snode.core.crypto import hash32
from snode.core.errors import DecodeError

T = TypeVar("T")

_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODERS: dict[Any, msgspec.msgpack.Decoder[Any]] = {}


def encode(obj: Any) -> bytes:
    """Canonical bytes of a consensus object."""
    return _ENCODER.encode(obj)


def _decoder(kind: type[T]) -> msgspec.msgpack.Decoder[T]:
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.msgpack.Decoder(kind)
    return decoder


def _decode_error(kind: Any, err: Exception) -> DecodeError:
    """The one DecodeError for what msgspec raised (DecodeError, ValidationError, or before
    msgspec 0.23 UnicodeDecodeError for a text field that is not UTF-8), in our words."""
    return DecodeError(f"not a valid {_name(kind)}: {decode_reasons.reason(err)}")


def decode(data: bytes, kind: type[T]) -> T:
    """Decode canonical bytes into `kind`; DecodeError for anything else (truncated,
    non-canonical, wrong shape or out-of-range field)."""
    try:
        value = _decoder(kind).decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as err:
        raise _decode_error(kind, err) from None
    if _ENCODER.encode(value) != data:
        raise DecodeError(f"not a valid {_name(kind)}: the encoding is not canonical")
    return value


@contextmanager
def decoding_trusted(kind: type[T]) -> Iterator[Callable[[bytes], T]]:
    """`decode_trusted` for many rows of one kind: the bare decoder, with errors translated
    once around the whole loop (a restart decodes hundreds of thousands of outputs)."""
    decoder = _decoder(kind)
    try:
        yield decoder.decode
    except (msgspec.DecodeError, UnicodeDecodeError) as err:
        raise _decode_error(kind, err) from None


def decode_trusted(data: bytes, kind: type[T]) -> T:
    """Decode bytes this node wrote itself (its own database): shape-checked, not re-encoded."""
    try:
        return _decoder(kind).decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError) as err:
        raise _decode_error(kind, err) from None


def _name(kind: Any) -> str:
    return getattr(kind, "__name__", str(kind))


def domain_hash(domain: bytes, network_id: int, payload: bytes) -> bytes:
    """What a signature signs: BLAKE2b-256 of (domain tag, network id, payload), so that a
    signature made for one purpose or one network is worthless for any other."""
    return hash32(domain + b"\x00" + network_id.to_bytes(4, "big") + payload)
