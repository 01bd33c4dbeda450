"""Which peers one sync downloads from, and which of them is asked each range, without I/O.

GetBlocks names a range only by a locator: the hash of the block before it (the protocol has no
start height, and a new message would need a protocol bump). So a range can be asked only once
the one before it has arrived (its last block's hash), not ahead of it: the ranges are chained,
and a sync has one request out at a time, asked as soon as the download before it arrives (while
that one is validated). What more peers bring is that a slow or lying one costs little:

- the ranges go to up to MAX_SYNC_SOURCES peers in turn (`Sources`), each of which proved a
  height at or above the top of the range it is asked (`Claim.proven`: a checked tip header,
  blocks it delivered) and is not backed off; a peer keeps its turn for the two downloads one
  store transaction takes (`TURN`), so that a batch is stored whole from one sender and an
  invalid block in it is that sender's fault;
- a request not answered within SYNC_HEDGE_S is asked of the next peer too (`hedge_wait`): the
  first answer counts, the slower peer is left (backed off, not scored), so a peer that answers
  just before each timeout costs the sync SYNC_HEDGE_S once, not REQUEST_TIMEOUT each time;
- a peer that times out, goes away or sends a range that does not follow the block it was asked
  after is scored and backed off as before (`sync.Syncer`) and its range asked of another.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from snode.net.limits import DEFAULT_SYNC_LIMITS, MAX_SYNC_SOURCES
from snode.services.sync_peers import Backoffs, Claim

TURN = 2
"""Downloads a source is asked in a row (`sync.SYNC_STORE_BLOCKS` is two of them)."""


@dataclass(slots=True)
class Sources:
    """The peers one sync downloads from, the first the one it started with."""

    members: list[Claim]
    limit: int = MAX_SYNC_SOURCES
    turn: int = TURN
    _at: int = 0
    """The member whose turn it is..."""
    _given: int = 0
    """...and how many downloads it was asked in this turn."""
    delivered: dict[object, int] = field(default_factory=dict)
    """Blocks each peer sent that this sync used."""

    def fill(self, claims: Iterable[Claim], need: int, backoffs: Backoffs) -> list[Claim]:
        """Take on peers up to `limit`, the highest proven first: those not backed off, of an
        address not among the members yet, that proved `need` (the top of the next range) or
        more; those taken."""
        keys = {m.key for m in self.members}
        fit = sorted((c for c in claims if c.proven >= need and c.key not in keys and not backoffs.blocked(c.key)),
                     key=lambda c: -c.proven)
        taken: list[Claim] = []
        for claim in fit:
            if len(self.members) >= self.limit:
                break
            if claim.key not in keys:
                keys.add(claim.key)
                self.members.append(claim)
                taken.append(claim)
        return taken

    def next(self, busy: Collection[object] = ()) -> Claim | None:
        """The member to ask the next range of: the one whose turn it is for `turn` downloads,
        then the next; skipping those in `busy` (peers with a request out). None: all are."""
        count = len(self.members)
        if count and self._given >= self.turn:
            self._at, self._given = (self._at + 1) % count, 0
        for step in range(count):
            at = (self._at + step) % count
            member = self.members[at]
            if member.peer not in busy:
                if step:
                    self._at, self._given = at, 0
                self._given += 1
                return member
        return None

    def spare(self, busy: Collection[object]) -> Claim | None:
        """A member not in `busy` to ask a request again (a hedge), from the one whose turn it
        is on; the turn does not move. None: every member is busy."""
        count = len(self.members)
        for step in range(count):
            member = self.members[(self._at + step) % count]
            if member.peer not in busy:
                return member
        return None

    def drop(self, peer: object) -> None:
        """`peer` is asked no more in this sync (it failed, or was slower than another)."""
        for at, member in enumerate(self.members):
            if member.peer is peer:
                del self.members[at]
                if at < self._at:
                    self._at -= 1
                elif at == self._at:
                    self._given = 0
                if self._at >= len(self.members):
                    self._at = 0
                return

    def has(self, peer: object) -> bool:
        return any(m.peer is peer for m in self.members)

    def credit(self, peer: object, blocks: int) -> None:
        self.delivered[peer] = self.delivered.get(peer, 0) + blocks


def hedge_wait(sent: float, now: float, hedge_s: float = DEFAULT_SYNC_LIMITS.sync_hedge_s) -> float:
    """Seconds until a request sent at `sent` is to be asked of another peer too (0: now), a
    request being hedged `hedge_s` after it was sent (SYNC_HEDGE_S; `SyncLimits.sync_hedge_s`)."""
    return max(0.0, sent + hedge_s - now)
