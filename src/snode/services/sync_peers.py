"""Which peers a sync believes and asks, without I/O: the proof of a peer's height, the backoff
of peers that did not deliver, the choice of the peer to sync from, and the sync target.

A height a peer announces (its `Hello`, a `Tip`, a `TipHeader` we cannot check yet) is a hint:
a sync may try it when nothing better is known, but it is never the node's `target_height`. A
height counts (`Peer.proven`) once something proves it:

- the peer's `TipHeader` at that height (`check_tip`): a header whose hash is the tip it claims,
  made by a key that could have made it (an authority, or a service node registered on our
  chain: what the relay asks of an orphan), with that key's valid signature, and not from the
  future. When its parent is our tip, every header rule is checked too (the round's leader,
  its time window) and its validators' signatures against the round's quorum;
- a block of that height the peer relayed and we adopted, or kept as an orphan (the relay
  checks its producer and signature);
- blocks the peer delivered in a sync, staged or stored.

A header further ahead than our chain cannot have its validators checked (their quorum comes
from the state before it, which we do not have yet), so a registered service node's key, or the
authority's, can still sign one lying header; the liar then is one of those keys, and its height
still counts only until its first request times out (scored, backed off). A header whose
producer our chain does not know yet (a fresh node far behind a network of service nodes) stays
a hint until the node has synced that producer's registration (`Syncer` checks the last one
again after each stored batch).

Backoff is per address (`bans.address_key`), so that a peer that timed out or stalled is not
asked again, nor its height believed, however often it reconnects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from snode.core.blocks import block_hash, producer_message
from snode.core.crypto import verify
from snode.core.errors import InvalidBlock
from snode.core.genesis import Consensus
from snode.core.pulse import check_block_producer, validator_checks
from snode.core.sigchecks import verify_serially
from snode.core.state import ChainState
from snode.net import protocol as P
from snode.net.limits import DEFAULT_SYNC_LIMITS, SyncLimits
from snode.params import MAX_FUTURE_BLOCK_TIME


@dataclass(frozen=True, slots=True)
class TipCheck:
    """What a TipHeader shows: its height proven, or only hinted at; `forged` names why it is a
    forgery (its sender is banned)."""

    proven: bool
    forged: str = ""


HINT = TipCheck(proven=False)
PROVEN = TipCheck(proven=True)


def check_tip(tip: P.TipHeader, state: ChainState, consensus: Consensus, now: int,
              could_produce: Callable[[bytes], bool]) -> TipCheck:
    """Whether `tip` proves its height to a node whose chain is `state` (clock `now`)."""
    h = tip.header
    if not could_produce(h.producer) or h.timestamp > now + MAX_FUTURE_BLOCK_TIME:
        return HINT  # a producer we may not know yet, a clock apart: nothing proven, nothing forged
    this = block_hash(h)
    if not verify(h.producer, producer_message(consensus.params.network_id, this), tip.producer_signature):
        return TipCheck(proven=False, forged=f"sent the header of block {h.height} with a bad producer signature")
    if h.height != state.height + 1 or h.prev_hash != state.tip_hash:
        return PROVEN
    # Its parent is our tip: the whole header can be checked, its validators' signatures too.
    try:
        quorum = check_block_producer(state, h, consensus)
        if quorum is None:
            if tip.validator_bitset or tip.validator_signatures:
                raise InvalidBlock("an authority block carries no validator signatures")
            return PROVEN
        checks = validator_checks(consensus.params.network_id, h.height, this, quorum, tip.validator_bitset,
                                  tip.validator_signatures)
    except InvalidBlock as err:
        return TipCheck(proven=False, forged=f"sent an invalid header of block {h.height}: {err.reason}")
    bad = verify_serially(checks)
    if bad >= 0:
        return TipCheck(proven=False, forged=f"sent the header of block {h.height}: {checks[bad].what} "
                                             "has a bad signature")
    return PROVEN


class Backoffs:
    """Addresses not to sync from for a while: SYNC_BACKOFF_S after a failure, doubling with
    each one up to SYNC_BACKOFF_MAX_S, forgotten after a good download. Bounded
    (MAX_SYNC_BACKOFFS: when full, the one whose backoff ends first goes); the three bounds
    are `limits`'s."""

    def __init__(self, clock: Callable[[], float], limits: SyncLimits = DEFAULT_SYNC_LIMITS) -> None:
        self.clock = clock
        self.limits = limits
        self._until: dict[str, tuple[float, float]] = {}
        """Address -> (when its backoff ends, its length)."""

    def fail(self, key: str) -> float:
        """One more failure of `key`; how long it is backed off now."""
        now = self.clock()
        last = self._until.pop(key, None)
        limits = self.limits
        delay = limits.sync_backoff_s if last is None else min(last[1] * 2, limits.sync_backoff_max_s)
        if len(self._until) >= limits.max_sync_backoffs:
            del self._until[min(self._until, key=lambda k: self._until[k][0])]
        self._until[key] = (now + delay, delay)
        return delay

    def succeeded(self, key: str) -> None:
        self._until.pop(key, None)

    def blocked(self, key: str) -> bool:
        entry = self._until.get(key)
        return entry is not None and entry[0] > self.clock()

    def next_end(self, keys: Iterable[str]) -> float | None:
        """Seconds until the first of `keys` that is backed off is free again (None: none is)."""
        now = self.clock()
        ends = [self._until[k][0] - now for k in keys if k in self._until and self._until[k][0] > now]
        return min(ends, default=None)


@dataclass(frozen=True, slots=True)
class Claim:
    """What the choice of a sync peer needs of one peer."""

    peer: object
    key: str
    """Its address (`bans.address_key`)."""
    claimed: int
    """The height it announced: a hint."""
    proven: int
    """The height something proved it has."""


def choose(claims: Iterable[Claim], node_height: int, backoffs: Backoffs) -> Claim | None:
    """The peer to sync from: of those not backed off, the one that proved the highest height
    above ours; failing that, the one that claims the highest (a hint may be tried, never
    believed); None when no peer claims more than we have."""
    usable = [c for c in claims if not backoffs.blocked(c.key)]
    proven = [c for c in usable if c.proven > node_height]
    if proven:
        return max(proven, key=lambda c: c.proven)
    return max((c for c in usable if c.claimed > node_height), key=lambda c: c.claimed, default=None)


def target(claims: Iterable[Claim], backoffs: Backoffs) -> int:
    """The sync target: the highest height a peer not backed off has proven (0: none)."""
    return max((c.proven for c in claims if not backoffs.blocked(c.key)), default=0)
