"""A stored block's header and producer signature, read without decoding its transactions
(what a GetHeaders answer sends: `Node.headers_after`)."""

from __future__ import annotations

import msgspec

from snode.core.blocks import Header
from snode.core.types import Signature


class _Head(msgspec.Struct, frozen=True, array_like=True):
    """A canonical `Block`'s leading fields, its transactions and what follows them left raw."""

    header: msgspec.Raw
    transactions: msgspec.Raw
    producer_signature: Signature


_head_decoder = msgspec.msgpack.Decoder(_Head)
_header_decoder = msgspec.msgpack.Decoder(Header)


def block_head(data: bytes) -> tuple[Header, bytes, int]:
    """(header, producer signature, the header's encoded bytes) of a block's canonical bytes, as
    stored (trusted: this node wrote them)."""
    head = _head_decoder.decode(data)
    raw = bytes(head.header)
    return _header_decoder.decode(raw), head.producer_signature, len(raw)
