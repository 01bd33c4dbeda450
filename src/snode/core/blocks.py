"""Blocks: header, body, block hash and transaction root."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from snode.core.crypto import SigningKey, hash32
from snode.core.encoding import domain_hash, encode
from snode.core.transactions import Transaction, txid
from snode.core.types import Hash32, Height, PubKey, Signature, Timestamp

ZERO_HASH: Final = bytes(32)
ZERO_SIGNATURE: Final = bytes(64)


class Checkpoint(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Enough votes of a checkpoint quorum for the block at one height, as a later block carries
    them (`core.finality`)."""

    height: Height
    block_hash: Hash32
    signers: int
    """Bit i set: member i of the checkpoint quorum signed."""
    signatures: tuple[Signature, ...]
    """The signers' signatures, in increasing bit order."""


class BlockHeader(msgspec.Struct, frozen=True, array_like=True, gc=False, tag=1):
    """What the block hash commits to: a header of version 1 (fork v1).

    The header's version is its msgspec tag, the first item of its array, so that a block of
    either version decodes as the header its version names (`Header`) and a version-1 header
    keeps exactly the bytes it always had: [1, height, prev_hash, ...] (docs/UPGRADES.md)."""

    height: Height
    prev_hash: Hash32
    timestamp: Timestamp
    tx_root: Hash32
    """BLAKE2b-256 of the concatenated transaction ids, in block order."""
    producer: PubKey
    """The key that produced and signed the block (a genesis authority while bootstrapping)."""
    round: int
    """Block-production round (0 for authority blocks; `core.pulse`)."""
    checkpoint: Checkpoint | None = None
    """The checkpoint of an earlier height this block carries, if any: inside the hash, so that
    the validators sign it with the block and no relay can strip it (`core.finality`)."""

    @property
    def version(self) -> int:
        """The header's version (its tag): the block version of its height's fork."""
        return int(self.__struct_config__.tag)  # type: ignore[arg-type]  # every header class has an int tag


class BlockHeaderV2(BlockHeader, frozen=True, array_like=True, gc=False, tag=2):
    """A header of version 2 (fork v2): version 1's fields and, last, the state root."""

    state_root: Hash32 = ZERO_HASH
    """The root of the state after this block (`core.state_root.header_root`): required, the
    default is there only because a subclass's fields follow its parent's defaults (a header
    that leaves it out does not decode: its bytes are not canonical)."""


Header = BlockHeader | BlockHeaderV2
"""A header of any version this snoded knows; a header of another version does not decode."""

HEADER_CLASSES: Final[dict[int, type[BlockHeader]]] = {1: BlockHeader, 2: BlockHeaderV2}
"""The header record of each block version."""


def make_header(version: int, *, state_root: bytes | None = None, **fields: Any) -> BlockHeader:
    """A header of block `version` with these fields; `state_root` goes with version 2 and
    later, never with 1. ValueError for a version this snoded does not know."""
    kind = HEADER_CLASSES.get(version)
    if kind is None:
        raise ValueError(f"this snoded knows no block version {version}")
    if kind is BlockHeader:
        if state_root is not None:
            raise ValueError("a version-1 header carries no state root")
        return BlockHeader(**fields)
    if state_root is None:
        raise ValueError(f"a version-{version} header carries a state root")
    return BlockHeaderV2(**fields, state_root=state_root)


def header_fields(header: BlockHeader) -> dict[str, Any]:
    """The fields a header of every version has, by name (to make one of another version)."""
    return {name: getattr(header, name) for name in BlockHeader.__struct_fields__}


def header_state_root(header: BlockHeader) -> bytes | None:
    """The state root a header carries (None: a version-1 header, which has none)."""
    return header.state_root if isinstance(header, BlockHeaderV2) else None


class Block(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A header, its transactions (coinbase first) and the signatures that authorise it.

    The validators sign the block hash, so their signatures cannot be inside it: they travel
    beside the header, as a bitset of who signed (bit i: validator i of the round) and the
    signatures in bit order (`core.pulse.validator_checks`). An authority block has none."""

    header: Header
    transactions: tuple[Transaction, ...]
    producer_signature: Signature
    validator_bitset: int = 0
    validator_signatures: tuple[Signature, ...] = ()


def block_hash(header: BlockHeader) -> bytes:
    """The block's id: BLAKE2b-256 of the canonical header."""
    return hash32(encode(header))


def _array_header(length: int) -> bytes:
    """The msgpack header of an array of `length` items (what `encode` writes before them)."""
    if length < 16:
        return bytes((0x90 | length,))
    if length < 0x10000:
        return b"\xdc" + length.to_bytes(2, "big")
    return b"\xdd" + length.to_bytes(4, "big")


def encode_block_from_parts(block: Block, header: bytes, transactions: list[bytes]) -> bytes:
    """`encode(block)`, given the encodings of its header and of each of its transactions
    (which validation computes anyway): joined with the block's own framing instead of
    encoding every transaction a second time."""
    return b"".join((
        b"\x95", header, _array_header(len(transactions)), *transactions,
        encode(block.producer_signature), encode(block.validator_bitset),
        encode(block.validator_signatures),
    ))


def tx_root(txids: list[bytes]) -> bytes:
    """Commitment to the block's transactions in order."""
    return hash32(b"".join(txids))


def producer_message(network_id: int, header_hash: bytes) -> bytes:
    """What the producer signs."""
    return domain_hash(b"block", network_id, header_hash)


def make_block(
    *, version: int, height: int, prev_hash: bytes, timestamp: int, transactions: tuple[Transaction, ...],
    producer_key: SigningKey, network_id: int, round: int = 0, checkpoint: Checkpoint | None = None,
    state_root: bytes | None = None,
) -> Block:
    """Assemble and sign a block of header `version` (its height's fork's, `ForkRules`), without
    validator signatures: a service-node block gets them from its round's validators. From
    version 2 the header carries `state_root` (`production.with_state_root` finds it)."""
    header = make_header(
        version, height=height, prev_hash=prev_hash, timestamp=timestamp,
        tx_root=tx_root([txid(tx) for tx in transactions]),
        producer=producer_key.public, round=round, checkpoint=checkpoint, state_root=state_root,
    )
    return sign_block(header, transactions, producer_key, network_id)


def sign_block(header: BlockHeader, transactions: tuple[Transaction, ...], producer_key: SigningKey,
               network_id: int) -> Block:
    """The block of `header` and `transactions`, signed by its producer."""
    signature = producer_key.sign(producer_message(network_id, block_hash(header)))
    return Block(header=header, transactions=transactions, producer_signature=signature)

