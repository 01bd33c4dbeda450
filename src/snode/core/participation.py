"""Participation in block production: who missed a duty, and who missed too many
(DESIGN.md section 6).

A duty is leading a round or validating one. Each block says who did theirs: its round r tells
that the leaders of rounds 0..r-1 let their rounds pass without a block (missed) and that round
r's leader made it (done); its signer bitset tells which of round r's validators signed (done)
and which did not (missed). The validators of the failed rounds are not judged: a round fails
when its leader is silent or sends something unsignable, and nothing on the chain says which
validators would have signed.

A node's record is its last `participation_window` duties as a small bitmask (bit 0 the most
recent duty, set for a miss), a count of duties recorded, and when its current failing stretch
began. A window rather than a lifetime count, as Oxen's ring buffer (#712), so that a node that
was down once recovers by doing its duties.

Participation is judged over a count of duties AND a span of time (docs/PARTICIPATION.md). The
record is failing while more than `participation_max_misses` of the window's duties were missed
(Oxen: more than 4 of the last 8); a failing stretch begins at the timestamp of the block that
put it over the limit and ends once the record is back to at most half the limit (2 of 8), so a
node that keeps hovering at the limit stays in one stretch. A node fails its participation only
when its stretch has lasted `participation_grace` seconds: in a small network a node has a duty
in nearly every block, and a restart for an upgrade would otherwise cost a decommission within
seconds whatever the decommission age promises. A node that stays away is still judged: its
stretch never ends (and its proofs stop, which the quorum judges first).

The signer bitset is not covered by the block hash (see `core.pulse`), so the records built
here are each node's own view of the chain, judged through the quorum's votes; and a node counts
a validator the bitset leaves out as done when it holds that validator's signature of the block
from before the block came (`block_updates`' `witnessed`, docs/PARTICIPATION.md "Framing").
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
    failing_since: int = 0
    """Timestamp of the block that began the current failing stretch; 0 outside one."""


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


def record(history: Participation, missed: bool, params: NetworkParams, at: int) -> Participation:
    """`history` with one more duty, settled by a block stamped `at`; the oldest duty leaves
    once the window is full."""
    window, limit = params.participation_window, params.participation_max_misses
    misses = ((history.misses << 1) | missed) & ((1 << window) - 1)
    count = misses.bit_count()
    if count > limit:
        since = history.failing_since or at
    elif count <= limit // 2:
        since = 0
    else:
        since = history.failing_since
    return Participation(misses, min(history.duties + 1, window), since)


def recorded(
    histories: Mapping[bytes, Participation], updates: Iterable[Update], params: NetworkParams,
    at: int,
) -> dict[bytes, Participation]:
    """The new records of the nodes `updates` touch (a node with no record starts empty), the
    updates coming from a block stamped `at`."""
    changed: dict[bytes, Participation] = {}
    for key, missed in updates:
        history = changed.get(key) or histories.get(key) or Participation()
        changed[key] = record(history, missed, params, at)
    return changed


def miss_count(history: Participation) -> int:
    """Duties missed in the window."""
    return history.misses.bit_count()


def failing(history: Participation, params: NetworkParams) -> bool:
    """True while the node has missed more duties in its window than the network allows."""
    return miss_count(history) > params.participation_max_misses


def fails_participation(history: Participation, params: NetworkParams, now: int) -> bool:
    """True when the node is failing and its failing stretch has lasted the grace span by `now`
    (a restart for an upgrade ends its stretch before that)."""
    return failing(history, params) and now - history.failing_since >= params.participation_grace


def block_updates(
    parent: ChainState, block: Block, params: NetworkParams, witnessed: int = 0,
) -> list[Update]:
    """The duties a block settles, judged from its parent's state: none for an authority block
    (no round quorum made it). `witnessed`: a bitset of the round's validators that this node
    knows signed the block though its bitset leaves them out (docs/PARTICIPATION.md "Framing")."""
    header = block.header
    if header.producer not in parent.service_nodes:
        return []
    quorums = [round_quorum(parent, r, params) for r in range(header.round + 1)]
    return participation_updates(quorums, block.validator_bitset | witnessed)
