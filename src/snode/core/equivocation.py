"""Equivocation proofs: two conflicting messages one key signed for one slot (issue #33 item 8).

A service node equivocates when it signs two different things where the protocol lets it sign
one: a round's leader that signs two blocks for one height, round and parent (`BlockTwice`), or a
checkpoint-quorum member that signs two block hashes for one checkpoint height (`VoteTwice`).
Either pair is its own proof: anyone can check that both signatures are the offender's, that the
slot is the same and that the content differs (`proof_checks`). No honest node signs such a pair:
its round machine builds one template a round, its checkpoint duties sign one hash a height, and
after a restart it neither leads a round that began before it started nor votes on a checkpoint
height it may have voted on before (docs/PARTICIPATION.md "Equivocation").

From fork v2 (`ForkRules.equivocation_proofs`) the obligations quorum deregisters the offender
with `Reason.EQUIVOCATION`, and its `StateChange` carries the proof, so that every node that
validates the block checks the proof itself (`core.tx_rules`): the quorum's votes alone cannot
deregister a node for equivocation.
"""

from __future__ import annotations

from typing import Final, TypeAlias, Union

import msgspec

from snode.core.blocks import BlockHeader, Header, block_hash, producer_message
from snode.core.crypto import verify
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError, SnodeError
from snode.core.finality import CheckpointVote, checkpoint_message
from snode.core.sigchecks import SigCheck
from snode.core.transactions import MAX_EQUIVOCATION_PROOF
from snode.core.types import Signature

MAX_PROOF_BYTES: Final = MAX_EQUIVOCATION_PROOF
"""An encoded proof's limit: two headers, each with a checkpoint of at most 20 signatures (about
1.6 kB), or two checkpoint votes (about 140 bytes each)."""


class InvalidEquivocation(SnodeError):
    """Not a proof of equivocation: the reason says which rule it breaks."""


class BlockTwice(msgspec.Struct, frozen=True, array_like=True, tag=1, gc=False):
    """A leader's two blocks for one height, round and parent: two headers and the producer's
    signature of each (a header is what the block hash covers, so the rest of a block adds
    nothing to the proof)."""

    first: Header
    first_signature: Signature
    second: Header
    second_signature: Signature


class VoteTwice(msgspec.Struct, frozen=True, array_like=True, tag=2, gc=False):
    """A checkpoint-quorum member's two votes for one height, for two block hashes."""

    first: CheckpointVote
    second: CheckpointVote


EquivocationProof: TypeAlias = Union[BlockTwice, VoteTwice]


class _Carrier(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The one-field record an encoded proof is (msgspec decodes a union only inside a field)."""

    proof: EquivocationProof


def encode_proof(proof: EquivocationProof) -> bytes:
    """A proof's canonical bytes (what a `StateChange` and quorumnet carry)."""
    return encode(_Carrier(proof))


def decode_proof(data: bytes) -> EquivocationProof:
    """A proof from its canonical bytes; InvalidEquivocation for anything else."""
    if len(data) > MAX_PROOF_BYTES:
        raise InvalidEquivocation(f"an equivocation proof is {len(data)} bytes; the limit is {MAX_PROOF_BYTES}")
    try:
        return decode(data, _Carrier).proof
    except DecodeError as err:
        raise InvalidEquivocation(f"not an equivocation proof: {err.reason}") from None


def offender(proof: EquivocationProof) -> bytes:
    """The key that signed both messages."""
    return proof.first.producer if isinstance(proof, BlockTwice) else proof.first.voter


def offence_height(proof: EquivocationProof) -> int:
    """The height of the slot signed twice (a proof from before the offender's registration is
    about an earlier registration of the key, `core.tx_rules`)."""
    return proof.first.height


def describe(proof: EquivocationProof) -> str:
    """One line for logs: who signed what twice."""
    if isinstance(proof, BlockTwice):
        return (f"leader {proof.first.producer.hex()[:16]} signed two blocks for round "
                f"{proof.first.round} of block {proof.first.height}")
    return (f"checkpoint member {proof.first.voter.hex()[:16]} voted for two blocks at height "
            f"{proof.first.height}")


def block_proof(first: BlockHeader, first_signature: bytes, second: BlockHeader,
                second_signature: bytes) -> BlockTwice:
    """The proof of two signed headers, in a canonical order (the lower block hash first), so
    that every node that sees the same pair holds the same proof."""
    if block_hash(second) < block_hash(first):
        first, first_signature, second, second_signature = second, second_signature, first, first_signature
    return BlockTwice(first, first_signature, second, second_signature)


def vote_proof(first: CheckpointVote, second: CheckpointVote) -> VoteTwice:
    """The proof of two checkpoint votes, the lower block hash first."""
    if second.block_hash < first.block_hash:
        first, second = second, first
    return VoteTwice(first, second)


def proof_checks(proof: EquivocationProof, network_id: int) -> list[SigCheck]:
    """The two signature checks of a proof, after InvalidEquivocation for two messages of
    different signers, of different slots, of the same content, or too large for a `StateChange`
    to carry (an insider's own proof, padded, once held the place of every real one: its
    deregistration was refused, and its equivocation verdict kept it from any other)."""
    size = len(encode_proof(proof))
    if size > MAX_PROOF_BYTES:
        raise InvalidEquivocation(f"an equivocation proof is {size} bytes; the limit is {MAX_PROOF_BYTES}")
    if isinstance(proof, BlockTwice):
        return _block_checks(proof, network_id)
    a, b = proof.first, proof.second
    if a.voter != b.voter:
        raise InvalidEquivocation("the two checkpoint votes are by different members")
    if a.height != b.height:
        raise InvalidEquivocation(f"the two checkpoint votes are for heights {a.height} and {b.height}")
    if a.block_hash == b.block_hash:
        raise InvalidEquivocation("the two checkpoint votes are for the same block")
    return [
        SigCheck(a.voter, checkpoint_message(network_id, a.height, vote.block_hash), vote.signature,
                 f"equivocation proof: checkpoint vote for {vote.block_hash.hex()[:16]}")
        for vote in (a, b)
    ]


def _block_checks(proof: BlockTwice, network_id: int) -> list[SigCheck]:
    a, b = proof.first, proof.second
    if a.producer != b.producer:
        raise InvalidEquivocation("the two blocks are by different producers")
    if (a.height, a.round, a.prev_hash) != (b.height, b.round, b.prev_hash):
        raise InvalidEquivocation(
            f"the two blocks are of different slots: height {a.height} round {a.round} and "
            f"height {b.height} round {b.round}, or on different parents"
        )
    first_hash, second_hash = block_hash(a), block_hash(b)
    if first_hash == second_hash:
        raise InvalidEquivocation("the two blocks are the same block")
    return [
        SigCheck(a.producer, producer_message(network_id, hash_), signature,
                 f"equivocation proof: block {hash_.hex()[:16]}")
        for hash_, signature in ((first_hash, proof.first_signature), (second_hash, proof.second_signature))
    ]


def verified(proof: EquivocationProof, network_id: int) -> str | None:
    """None when `proof` proves an equivocation, else why not (signatures checked here, one
    by one: what a node does with a proof gossiped to it)."""
    try:
        checks = proof_checks(proof, network_id)
    except InvalidEquivocation as err:
        return err.reason
    for check in checks:
        if not verify(check.public, check.message, check.signature):
            return f"{check.what} has a bad signature"
    return None



class EquivocationEvidence(msgspec.Struct, frozen=True, array_like=True, tag=5, gc=False):
    """Quorumnet: a proof of equivocation, from a node that saw both messages (or one that
    verified it and passes it on to the quorum of its tip), for the obligations quorum to judge."""

    proof: EquivocationProof
