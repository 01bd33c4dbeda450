"""What one quorum member may cost this node on quorumnet: a budget per message kind, and a score
for junk that ends in its connection being cut and refused for a while. Sans-IO: no sockets, no
clock (times come in as arguments).

A member is the key its CurveZMQ connection was admitted with (our ZAP handler names it as the
connection's User-Id, and ZeroMQ stamps it on every message read from that connection), never a
key a message claims. ZAP admits only registered service nodes, so every member is one, and a
flood from one costs the flooder, not the network: messages over its budget are dropped before
they are decoded, junk adds points to its score (decaying, as P2P scores do), and at
BAN_THRESHOLD points its connections are cut and ZAP refuses its key for BAN_SECONDS. The
points are P2P's (`net.limits`), so an operator reads one scale: 100 is a ban.

The budgets are sized for devnet, the fastest network (2 s blocks, 2 s rounds): an honest member
stays far inside them on every network; mainnet's 120 s blocks and 60 s rounds leave it
sixty times more room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, get_args

import msgspec

from snode.core.equivocation import EquivocationEvidence
from snode.core.finality import CheckpointVote
from snode.core.round_messages import BlockTemplate, ValidatorSignature
from snode.net import limits as L
from snode.net.bans import Bans, Scores
from snode.net.peer import TokenBucket
from snode.net.protocol import QuorumMessage, QuorumVote

VOTE_RATE: Final = 1_000.0
"""Obligations votes per second from one member on average: it votes once per block on each
node it finds failing (with each of its keys in the quorum), so a devnet of 2,000 nodes all
failing at once, one vote each per 2 s block, is 1,000 a second..."""
VOTE_BURST: Final = 4_000.0
"""...and in one burst: a block's votes on such a devnet from a member holding two keys."""
TEMPLATE_RATE: Final = 1.0
"""Block templates per second from one member: a leader sends its validators one per round it
leads (devnet rounds are 2 s: half this rate), each up to a whole block (2 MB) to decode..."""
TEMPLATE_BURST: Final = 4.0
"""...and in one burst (a template held early for the next round, a leader of rounds in a row)."""
SIGNATURE_RATE: Final = 1.0
"""Validator signatures per second from one member: a validator signs one template per round
and sends it to that round's leader, and to every other active node as its witness
(docs/PARTICIPATION.md "Framing"): one a round to each..."""
SIGNATURE_BURST: Final = 8.0
CHECKPOINT_VOTE_RATE: Final = 1.0
"""Checkpoint votes per second from one member: one per checkpoint height (every 4 blocks: 8 s
on devnet)..."""
CHECKPOINT_VOTE_BURST: Final = 32.0
"""...and in one burst: a member that has just synced votes on every pending checkpoint height
at once (at most the 4 the chain keeps waiting for, `transition.CHECKPOINT_WAIT`, and room to
spare)."""
EVIDENCE_RATE: Final = 1.0
"""Equivocation proofs per second from one member: each offender's proof is sent once, by the
node that made it or passed on by each member that checked it..."""
EVIDENCE_BURST: Final = 16.0
"""...and in one burst (several offenders at once)."""


def _tag(kind: type[msgspec.Struct]) -> int:
    tag = kind.__struct_config__.tag
    assert isinstance(tag, int)
    return tag


KINDS: Final = {_tag(kind): kind.__name__ for kind in get_args(QuorumMessage)}
"""The quorum messages by tag (their second byte: a fixarray, then the tag)."""
BUDGETS: Final = {
    _tag(QuorumVote): (VOTE_RATE, VOTE_BURST),
    _tag(BlockTemplate): (TEMPLATE_RATE, TEMPLATE_BURST),
    _tag(ValidatorSignature): (SIGNATURE_RATE, SIGNATURE_BURST),
    _tag(CheckpointVote): (CHECKPOINT_VOTE_RATE, CHECKPOINT_VOTE_BURST),
    _tag(EquivocationEvidence): (EVIDENCE_RATE, EVIDENCE_BURST),
}
"""(rate, burst) by tag."""
assert BUDGETS.keys() == KINDS.keys()

SCORE_OVER_BUDGET: Final = 1
"""A message over its kind's budget: dropped unread (P2P's SCORE_PROOF_FLOOD): a flood bans its
member about BAN_THRESHOLD messages past the burst."""
SCORE_UNDECODABLE: Final = 10
"""A message of the wrong shape, an unknown kind, or bytes that are not one canonical message.
CurveZMQ authenticates every byte, so no honest member's message arrives mangled; ten, not a
ban at once, so that one member's bug costs it a little before it costs it its connection."""
SCORE_IMPERSONATION: Final = 100
"""A vote or signature that names another key as its signer: an honest member sends only what
it signed itself, with the key it connected with."""
SCORE_FORGED: Final = 100
"""A vote or signature whose signature does not verify, everything else about it right."""
SCORE_NOT_OURS: Final = 10
"""A checkpoint vote for a block that is not ours at that height, or from a key outside that
height's checkpoint quorum: a member on a short-lived fork may send one or two, a flood is
banned after ten."""

MAX_BUDGETS: Final = 4 * 10_000
"""Budgets kept (one a member and kind); ZAP admits only registered nodes, so this is reached
only by keys that have come and gone: the longest idle go first."""


def message_tag(head: bytes) -> int | None:
    """The tag of a quorum message from its first two bytes (canonical msgpack: a fixarray, then
    the tag), if it is a budgeted kind."""
    if len(head) == 2 and head[0] & 0xF0 == 0x90 and head[1] in BUDGETS:
        return head[1]
    return None


def signer_of(message: QuorumMessage) -> bytes | None:
    """The key a message says signed it (None for a template: its block names its producer, and
    the round machine checks the producer's signature and that it leads the round)."""
    if isinstance(message, (QuorumVote, CheckpointVote)):
        return message.voter
    if isinstance(message, ValidatorSignature):
        return message.validator
    return None


@dataclass(frozen=True, slots=True)
class Ban:
    """A member whose score just passed BAN_THRESHOLD: cut its connections, refuse its key."""

    member: bytes
    reason: str


class MemberGuard:
    """Each member's budgets, score and ban."""

    def __init__(self, ban_seconds: float = L.BAN_SECONDS) -> None:
        self.ban_seconds = ban_seconds
        self._buckets: dict[tuple[bytes, int], TokenBucket] = {}
        self._scores = Scores()
        self._bans = Bans(ban_seconds)
        self.dropped = 0
        """Messages dropped over a budget or from a banned member (for tests and figures)."""
        self.banned_count = 0

    def banned(self, member: bytes, now: float) -> bool:
        return self._bans.banned(member.hex(), now)

    def take(self, member: bytes, tag: int, now: float) -> bool:
        """Whether `member` may send one more message of kind `tag` now."""
        key = (member, tag)
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            rate, burst = BUDGETS[tag]
            bucket = TokenBucket(rate, burst, burst, now)
        self._buckets[key] = bucket  # most recently used last
        if len(self._buckets) > MAX_BUDGETS:
            del self._buckets[next(iter(self._buckets))]
        if bucket.take(now):
            return True
        self.dropped += 1
        return False

    def junk(self, member: bytes, points: int, reason: str, now: float) -> Ban | None:
        """Add `points` to `member`'s score; the Ban when this passes BAN_THRESHOLD (once: a
        banned member scores nothing more until its ban ends)."""
        key = member.hex()
        if self._bans.banned(key, now):
            return None
        if self._scores.add(key, points, now) < L.BAN_THRESHOLD:
            return None
        self._scores.forget(key)
        self._bans.ban(key, reason, now)
        self.banned_count += 1
        return Ban(member, reason)
