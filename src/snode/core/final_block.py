"""A service-node block applied once by a node that checked its template.

A validator checks a round leader's block before it signs (`check_template`: every rule of the
next block but the validators' signatures, which the template cannot carry yet). The block that
comes back is the same header, producer signature and transactions plus `validator_bitset` and
`validator_signatures`, which the block hash does not cover. Applying it again in full would
check every rule a second time and build the very same state and undo record: neither depends
on who signed (the undo keeps the round's validators, drawn from the parent, not the signers).

So `apply_final` takes the template's result when, and only when, the block is provably that
template on that parent: the same parent state object (a state is immutable, so identity is
sameness), the same producer signature, and the same encodings of the header and of every
transaction. It checks then only what the template check left out: the block's size with the
signatures, the future-timestamp rule again (the one rule on the node's clock, which may have
stepped back), and the validators' rules and signatures (`pulse.validator_checks`, as
`transition._check_signers` does for a signed block). Anything else is applied in full.
"""

from __future__ import annotations

from typing import NamedTuple

from snode.core.blocks import Block, encode_block_from_parts
from snode.core.encoding import encode
from snode.core.errors import InvalidBlock
from snode.core.genesis import Consensus
from snode.core.pulse import RoundQuorum, validator_checks
from snode.core.sigchecks import BatchVerifier, run_checks, verify_serially
from snode.core.state import ChainState
from snode.core.transition import (
    AppliedBlock,
    EncodedBlock,
    apply_block_parts,
    check_block_size,
    check_not_future,
)


class CheckedTemplate(NamedTuple):
    """A round leader's block that passed every rule but its validators' signatures on
    `parent` (`check_template`)."""

    parent: ChainState
    """The very state object it was applied on, held so that its id cannot be reused while this
    is kept."""
    producer_signature: bytes
    encoded: EncodedBlock
    quorum: RoundQuorum
    applied: AppliedBlock
    """The state after the block and its undo record."""


def check_template(
    state: ChainState, block: Block, consensus: Consensus, *,
    verifier: BatchVerifier = verify_serially, now: int | None = None,
) -> CheckedTemplate | None:
    """`apply_block(..., template=True)`, a validator's check of a round leader's block before
    it signs; InvalidBlock says what is wrong. Returns what `apply_final` takes (None for an
    authority block, which has no round)."""
    applied, enc, quorum = apply_block_parts(state, block, consensus, verifier, now, True)
    if quorum is None:
        return None
    return CheckedTemplate(state, block.producer_signature, enc, quorum, applied)


def apply_final(
    state: ChainState, block: Block, checked: CheckedTemplate, consensus: Consensus, *,
    verifier: BatchVerifier = verify_serially, now: int | None = None,
) -> AppliedBlock | None:
    """`transition.apply_block_encoded` of the signed block of a template checked on this very
    `state`: the template's state and undo record with the block's own encoding, once its size,
    its timestamp on this node's clock `now` (which may have stepped back since the template)
    and its validators' signatures check out (InvalidBlock, or a bad signature reported by
    `verifier`, as for any block). None when `block` is not provably that template on `state`:
    apply it in full."""
    enc = checked.encoded
    if state is not checked.parent or block.producer_signature != checked.producer_signature:
        return None
    header = encode(block.header)
    if header != enc.header:
        return None
    txs = [encode(tx) for tx in block.transactions]
    if txs != enc.txs:
        return None
    check_not_future(block.header, now)
    data = encode_block_from_parts(block, header, txs)
    check_block_size(data)
    checks = validator_checks(consensus.params.network_id, block.header.height, enc.hash, checked.quorum,
                              block.validator_bitset, block.validator_signatures)
    run_checks(checks, verifier, InvalidBlock)
    return checked.applied._replace(encoded=data)
