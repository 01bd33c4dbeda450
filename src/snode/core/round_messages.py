"""What the round machine (`core.rounds.RoundMachine`) receives from other nodes over
quorumnet: a leader's `BlockTemplate` and a validator's `ValidatorSignature`.

They are msgspec records in the core so that quorumnet carries them as it carries `QuorumVote`
(tags 2 and 3 of its union; a template needs frames up to `MAX_BLOCK_BYTES`).
"""

from __future__ import annotations

from typing import Annotated, TypeAlias

import msgspec

from snode.core.pulse import MAX_ROUND
from snode.core.types import Hash32, Height, PubKey, Signature
from snode.params import MAX_BLOCK_BYTES

RoundNumber: TypeAlias = Annotated[int, msgspec.Meta(ge=0, lt=MAX_ROUND)]
"""A block-production round."""


class BlockTemplate(msgspec.Struct, frozen=True, array_like=True, tag=2, gc=False):
    """Leader to validators: the block it proposes for (height, round)."""

    height: Height
    """Of the block proposed."""
    round: RoundNumber
    """The round the leader leads."""
    block: Annotated[bytes, msgspec.Meta(max_length=MAX_BLOCK_BYTES)]
    """Canonical encoding of the block, signed by the leader, without validator signatures."""


class ValidatorSignature(msgspec.Struct, frozen=True, array_like=True, tag=3, gc=False):
    """Validator to leader: its signature of the template's block hash."""

    height: Height
    round: RoundNumber
    """The round of the template signed."""
    block_hash: Hash32
    """The template's block hash."""
    validator: PubKey
    """Who signed: one of the round's validators."""
    signature: Signature
    """Over `pulse.validator_message(network_id, block_hash)`."""
