"""Participation in block production: who missed a duty, and who missed too many
(issue #12, DESIGN.md section 6).

A duty is leading a round or validating one. Each block says who did theirs: its round r tells
that the leaders of rounds 0..r-1 let their rounds pass without a block (missed) and that round
r's leader made it (done); its signer bitset tells which of round r's validators signed (done)
and which did not (missed). The validators of the failed rounds are not judged: a round fails
when its leader is silent or sends something unsignable, and nothing on the chain says which
validators would have signed.

A node's record is its last `participation_window` duties as a small bitmask (bit 0 the most
recent duty, set for a miss) and a count of duties recorded, so that it fits in a registry entry
and judging it is a popcount. A node fails its participation with more than
`participation_max_misses` misses in the window (Oxen: more than 4 of the last 8); the
obligations quorum then decommissions it with the reason `missed_block_production`. A window
rather than a lifetime count, as Oxen's ring buffer (#712), so that a node that was down once
recovers by doing its duties.

The signer bitset is not covered by the block hash (see `core.pulse`), so the records built
here are each node's own view of the chain, judged through the quorum's votes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import msgspec

from snode.core.blocks import Block
from snode.core.pulse import RoundQuorum, round_quorum
from snode.core.state import ChainState
from snode.core.types import PubKey
from snode.params import NetworkParams


class Participation(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A node's last duties of block production."""

    misses: int = 0
    """Bit i set: the i-th most recent duty was missed (bit 0 the latest)."""
    duties: int = 0
    """Duties recorded, at most the window: fewer while the node is new."""


Update = tuple[PubKey, bool]
"""One duty of one node: (public key, missed)."""


def participation_updates(
    round_quorums: Sequence[RoundQuorum], signer_bitset: int
) -> list[Update]:
    """The duties one block settles, in order: `round_quorums` are the quorums of its rounds 0
    to r (r is the block's round), `signer_bitset` the block's validator bitset."""
    *failed, made = round_quorums
    updates = [(quorum.leader, True) for quorum in failed]
    updates.append((made.leader, False))
    updates += [
        (validator, not signer_bitset >> i & 1) for i, validator in enumerate(made.validators)
    ]
    return updates


def record(history: Participation, missed: bool, window: int) -> Participation:
    """`history` with one more duty; the oldest leaves once the window is full."""
    misses = ((history.misses << 1) | missed) & ((1 << window) - 1)
    return Participation(misses, min(history.duties + 1, window))


def recorded(
    histories: Mapping[bytes, Participation], updates: Iterable[Update], window: int
) -> dict[bytes, Participation]:
    """The new records of the nodes `updates` touch (a node with no record starts empty)."""
    changed: dict[bytes, Participation] = {}
    for key, missed in updates:
        history = changed.get(key) or histories.get(key) or Participation()
        changed[key] = record(history, missed, window)
    return changed


def miss_count(history: Participation) -> int:
    """Duties missed in the window."""
    return history.misses.bit_count()


def fails_participation(history: Participation, params: NetworkParams) -> bool:
    """True when the node missed more duties in its window than the network allows."""
    return miss_count(history) > params.participation_max_misses


def block_updates(parent: ChainState, block: Block, params: NetworkParams) -> list[Update]:
    """The duties a block settles, judged from its parent's state: none for an authority block
    (no round quorum made it)."""
    header = block.header
    if header.producer not in parent.service_nodes:
        return []
    quorums = [round_quorum(parent, r, params) for r in range(header.round + 1)]
    return participation_updates(quorums, block.validator_bitset)
