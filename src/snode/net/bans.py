"""What a misbehaving peer has earned, kept per address: its score and its ban. Sans-IO: no
sockets, no clock (times come in as arguments).

Both tables are keyed by `address_key`, not by connection: a peer that reconnects keeps its score,
and one that moves to another address of its IPv6 /64 keeps its score and its ban. Both are
bounded, so that an attacker with many addresses cannot grow them: scores decay and the lowest
goes when the table is full; expired bans are purged and the oldest goes when that table is full.
"""

from __future__ import annotations

import heapq
import ipaddress
from collections.abc import Iterator

from snode.net import limits as L


def address_key(ip: str) -> str:
    """The address a score, a ban and MAX_PER_IP hold: an IPv4 address as it is (an IPv4-mapped
    IPv6 address as its IPv4), any other IPv6 address by its /64 (what one subscriber is
    usually given: its other addresses are no new identities)."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return ip
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return str(addr.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(addr) >> 64 << 64, 64)))
    return str(addr)


class Scores:
    """Misbehaviour points per address, decaying by SCORE_DECAY per second; at most MAX_SCORED
    addresses (when full, the lowest score goes).

    A score is stored as the time it will have decayed to zero, so the order of those times is
    the order of the scores at any moment: a heap of them finds the lowest and the expired in
    O(log n) (stale heap entries are skipped when met, and the heap rebuilt when they pile up).
    """

    def __init__(self) -> None:
        self._zero_at: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._zero_at)

    def get(self, key: str, now: float) -> float:
        return max(0.0, (self._zero_at.get(key, now) - now) * L.SCORE_DECAY)

    def add(self, key: str, points: int, now: float) -> float:
        """Add `points` to `key`'s score; the score now."""
        score = self.get(key, now) + points
        zero_at = now + score / L.SCORE_DECAY
        self._zero_at[key] = zero_at
        heapq.heappush(self._heap, (zero_at, key))
        self._bound(now)
        return score

    def forget(self, key: str) -> None:
        """Drop `key`'s score (it was banned: after the ban it starts again from zero)."""
        self._zero_at.pop(key, None)

    def _bound(self, now: float) -> None:
        heap, table = self._heap, self._zero_at
        while heap:
            zero_at, key = heap[0]
            if table.get(key) == zero_at and zero_at > now and len(table) <= L.MAX_SCORED:
                break
            heapq.heappop(heap)
            if table.get(key) == zero_at:  # expired, or the lowest of a full table
                del table[key]
        if len(heap) > 2 * len(table) + 64:
            self._heap = [(zero_at, key) for key, zero_at in table.items()]
            heapq.heapify(self._heap)


class Bans:
    """Banned addresses until when, and why; at most MAX_BANS (when full, the oldest goes).
    Every ban lasts `seconds`, so the table's insertion order is also the order of expiry:
    expired entries are purged from its front."""

    def __init__(self, seconds: float = L.BAN_SECONDS) -> None:
        self.seconds = seconds
        self._until: dict[str, tuple[float, str]] = {}

    def __len__(self) -> int:
        return len(self._until)

    def ban(self, key: str, reason: str, now: float) -> None:
        self._purge(now)
        self._until.pop(key, None)
        self._until[key] = (now + self.seconds, reason)
        while len(self._until) > L.MAX_BANS:
            del self._until[next(iter(self._until))]

    def banned(self, key: str, now: float) -> bool:
        self._purge(now)
        return key in self._until

    def items(self, now: float) -> Iterator[tuple[str, float, str]]:
        """(address, seconds left, reason) of each ban in force."""
        self._purge(now)
        for key, (until, reason) in self._until.items():
            yield key, until - now, reason

    def _purge(self, now: float) -> None:
        until = self._until
        while until:
            key = next(iter(until))
            if until[key][0] > now:
                return
            del until[key]
