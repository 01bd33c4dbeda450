"""Which addresses the peer manager dials, and when (Bitcoin Core's ThreadOpenConnections,
simplified). Sans-IO: the peer manager does the dialling and tells the book how it went.

Each free outbound slot gets an entry that the address book draws at random (`AddressBook.select`:
tried or new by a coin flip, weighted by the entry's record), never one we are connected to or
dialling, never a second in a network group that already has one of our outbound peers (on
mainnet and testnet), and
never one whose backoff is still running (`AddressInfo.next_dial`). Every dial counts as an
attempt until the address shakes hands, so a dead address is dialled less and less often and,
once terrible, not at all. While the outbound slots are full, a feeler now and then dials an
entry of "new" (or a tried entry that another waits to replace) and closes after the
handshake: an answer moves it to "tried", where gossip cannot push it out.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection

from snode.net import limits as L
from snode.net.addrman import AddressBook, AddressInfo


class Dialer:
    """Picks the next outbound and feeler dials from the address book, and records them."""

    def __init__(self, book: AddressBook, rng: random.Random | None = None) -> None:
        self.book = book
        self._rng = rng if rng is not None else random.SystemRandom()
        self._next_feeler = 0.0

    def outbound(self, now: float, free: int, *, skip: Callable[[str], bool],
                 groups: Collection[str]) -> list[str]:
        """Up to `free` addresses to dial now, each recorded as an attempt. `skip` names the
        addresses we must not dial (connected, being dialled, banned, our own); `groups` the
        network groups our outbound peers are in already. Where the book keeps addresses that
        are not global (regtest and devnet: their nodes share loopback or a LAN, maybe one IP)
        there is no rule of one per group."""
        chosen: list[str] = []
        taken = set(groups) if self.book.global_only else set()

        def usable(info: AddressInfo) -> bool:
            return info.next_dial() <= now and info.group not in taken and not skip(info.address)

        while len(chosen) < free:
            address = self.book.select(now, usable=usable)
            if address is None:
                break
            chosen.append(address)
            self.book.attempt(address, now)
            info = self.book.info(address)
            assert info is not None  # it was just drawn
            if self.book.global_only:
                taken.add(info.group)
        return chosen

    def feeler(self, now: float, *, skip: Callable[[str], bool],
               connected: Collection[str] = ()) -> str | None:
        """The address of a feeler connection, when one is due (about every FEELER_INTERVAL_S,
        at random moments: Bitcoin Core's exponential timer), recorded as an attempt. A tried
        entry to test that is `connected` (an outbound peer of ours) passes its test at once."""
        if now < self._next_feeler:
            return None
        self._next_feeler = now + self._rng.expovariate(1 / L.FEELER_INTERVAL_S)
        address = self.book.collision_to_test(now)
        for _ in range(L.MAX_TRIED_COLLISIONS):
            if address is None or address not in connected:
                break
            self.book.good(address, now)
            address = self.book.collision_to_test(now)
        if address is None or skip(address):
            address = self.book.select(
                now, new_only=True, usable=lambda info: info.next_dial() <= now and not skip(info.address))
        if address is not None:
            self.book.attempt(address, now)
        return address

    def load(self, addresses: Collection[str], now: float) -> list[str]:
        """Put the saved addresses in the book (as "new", each learned from itself); the ones
        that are not an `ip:port` this network dials are returned, not taken."""
        refused = []
        for address in addresses:
            if not self.book.acceptable(address):
                refused.append(address)
            else:
                self.book.add(address, source_ip=address.rpartition(":")[0].strip("[]"), now=now)
        return refused
