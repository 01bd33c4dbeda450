"""What the round machine (`core.rounds.RoundMachine`) tells its shell to do: one record per
action, each with what the shell needs to do it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from snode.core.blocks import Block
from snode.core.round_messages import BlockTemplate
from snode.core.types import PubKey


@dataclass(frozen=True, slots=True)
class BuildTemplate:
    """Leader: build the block of this round from the mempool and answer with `on_built`."""

    height: int
    round: int
    timestamp: int
    """The block's timestamp: now, inside the round's window."""


@dataclass(frozen=True, slots=True)
class SendTemplate:
    """Leader: send `template` to each validator of its round."""

    template: BlockTemplate
    validators: tuple[PubKey, ...]


@dataclass(frozen=True, slots=True)
class CheckTemplate:
    """Validator: check `block` fully as the next block (all rules but its validator
    signatures) and answer with `on_checked`."""

    template: BlockTemplate
    block: Block
    """`template.block`, decoded."""
    block_hash: bytes


@dataclass(frozen=True, slots=True)
class SignTemplate:
    """Validator: sign `block_hash` (`pulse.validator_message`) and send the
    `ValidatorSignature` to the leader."""

    height: int
    round: int
    block_hash: bytes
    leader: PubKey


@dataclass(frozen=True, slots=True)
class Broadcast:
    """Leader: the block has its signatures; put them in and broadcast it over P2P."""

    block: Block
    """The template, without validator signatures."""
    block_hash: bytes
    validator_bitset: int
    """Bit i set: validators[i] of the round signed."""
    validator_signatures: tuple[bytes, ...]
    """In increasing bit order."""


@dataclass(frozen=True, slots=True)
class RoundFailed:
    """The round ended without a block reaching this node; the next round has begun."""

    height: int
    round: int
    leader: PubKey
    """The round's leader."""


@dataclass(frozen=True, slots=True)
class Equivocation:
    """The round's leader sent two different templates, both signed by it: neither is signed."""

    height: int
    round: int
    leader: PubKey
    first: BlockTemplate
    second: BlockTemplate


Action: TypeAlias = (
    BuildTemplate | SendTemplate | CheckTemplate | SignTemplate | Broadcast | RoundFailed
    | Equivocation
)
