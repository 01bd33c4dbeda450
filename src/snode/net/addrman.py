"""The address book and the inbound eviction rule: Bitcoin Core's addrman and
`SelectNodeToEvict`, simplified. Sans-IO: no sockets, no clock (times come in as arguments).

Addresses learned from peers go to a slot of the "new" table chosen by a keyed hash of the
source's network group and the address's own, so that one source (or one /16 of them) reaches a
few buckets only; an address we dialled and shook hands with moves to "tried", which gossip
never touches. A slot is given up only by a terrible entry (or, in "tried", by one that failed a
test), so nobody pushes out a good entry. Each entry keeps its record (attempts, last try, last
success) for the dialer's backoff and `select`'s weights (`net/dialer.py` chooses the dials).
On mainnet and testnet an address that is not globally routable is dropped (regtest and devnet
keep loopback and private ones: their networks live there).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import os
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from snode.common.endpoints import ip_endpoint
from snode.net import limits as L


def network_group(ip: str) -> str:
    """The group one operator plausibly controls all of: an IPv4 /16 (an IPv4-mapped IPv6
    address, as a dual-stack `::` bind sees every IPv4 peer, is its IPv4 address), an IPv6 /32.
    An address that is not globally routable (only regtest and devnet meet one: their nodes share
    loopback or a LAN) is a group of its own."""
    try:
        addr = ipaddress.ip_address(ip)
    except ValueError:
        return "unparsable"
    return _group(addr)


def _group(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if not addr.is_global:
        return str(addr)
    if isinstance(addr, ipaddress.IPv4Address):
        return ".".join(str(addr).split(".")[:2])
    return addr.exploded[:9]


@dataclass(slots=True)
class AddressInfo:
    """What the book knows of one address (Bitcoin Core's AddrInfo). Times are wall-clock seconds."""

    address: str
    group: str
    """Its network group."""
    source_group: str
    """The network group of the peer we first learned it from (its "new" bucket depends on it)."""
    seen: float
    """When a peer last told us of it, or we last shook hands with it."""
    bucket: int = -1
    position: int = -1
    """Its slot in its table; -1 while it has none (a peer we dialled whose slot was taken)."""
    tried: bool = False
    attempts: int = 0
    """Dials since its last handshake (reset by `good`)."""
    last_try: float = 0.0
    last_success: float = 0.0

    def terrible(self, now: float) -> bool:
        """Not worth a dial, a slot or a place on disk (Bitcoin Core's IsTerrible)."""
        if now - self.last_try < L.ADDRESS_TERRIBLE_GRACE_S:
            return False  # just tried: give it the time to answer before judging it
        if self.seen > now + L.ADDRESS_FUTURE_S:
            return True  # our clock went back, or the entry is corrupt
        if now - self.seen > L.ADDRESS_HORIZON_S:
            return True  # nobody told us of it for a month
        if self.last_success == 0 and self.attempts >= L.ADDRESS_RETRIES:
            return True  # never answered
        return now - self.last_success > L.ADDRESS_MIN_FAIL_S and self.attempts >= L.ADDRESS_MAX_FAILURES

    def chance(self, now: float) -> float:
        """The relative chance `select` takes it (Bitcoin Core's GetChance): lower after each
        failed dial, and much lower when dialled in the last minutes."""
        chance = 1.0
        if now - self.last_try < L.ADDRESS_RECENT_TRY_S:
            chance *= 0.01
        return chance * 0.66 ** min(self.attempts, 8)

    def next_dial(self) -> float:
        """When it may be dialled again: an exponential backoff on its failed dials."""
        if self.attempts == 0:
            return 0.0
        wait = min(L.DIAL_BACKOFF_BASE_S * 2 ** min(self.attempts - 1, 30), L.DIAL_BACKOFF_MAX_S)
        return self.last_try + wait


class AddressBook:
    """Peer addresses to dial: Bitcoin Core's two tables, "new" and "tried", of buckets of slots.

    An address has one slot, chosen by a keyed hash (a secret per book, so that nobody can aim at
    a slot): in "new", of its source's network group and its own, so that all the peers of one
    network group reach NEW_BUCKETS_PER_SOURCE_GROUP buckets; in "tried", of its own group. A
    slot that is taken keeps its entry unless that entry is terrible: a newcomer from gossip is
    dropped instead, and an address that answered waits for a test of the tried entry in its way
    (`collision_to_test`: a feeler dials it) and takes the slot only if the old one fails it.
    """

    def __init__(self, *, global_only: bool, key: bytes | None = None, rng: random.Random | None = None) -> None:
        self.global_only = global_only
        self._key = key if key is not None else os.urandom(16)
        self._rng = rng if rng is not None else random.SystemRandom()
        self._info: dict[str, AddressInfo] = {}
        self._new: dict[int, dict[int, str]] = {}
        self._tried: dict[int, dict[int, str]] = {}
        """bucket -> position -> address; a bucket with no entry is absent, so that `select`
        draws among the buckets that have one."""
        self._collisions: set[str] = set()
        """Addresses that answered and wait for a tried slot held by another."""

    def __len__(self) -> int:
        return len(self._info)

    def __contains__(self, address: object) -> bool:
        return address in self._info

    def info(self, address: str) -> AddressInfo | None:
        return self._info.get(address)

    def acceptable(self, address: str) -> bool:
        """An `ip:port` that this network would dial."""
        return self._group_if_acceptable(address) is not None

    def _group_if_acceptable(self, address: str) -> str | None:
        """The network group of an `ip:port` this network would dial; None for anything else."""
        parsed = ip_endpoint(address)
        if parsed is None:
            return None
        ip = ipaddress.ip_address(parsed.host)
        if self.global_only and not ip.is_global:
            return None
        return _group(ip)

    def records(self, now: float) -> tuple[bytes, list[AddressInfo]]:
        """The book's key and its entries worth keeping across a restart (terrible ones are
        not), for `net.address_file`."""
        return self._key, [i for i in self._info.values() if not i.terrible(now)]

    def restore(self, key: bytes, entries: Sequence[AddressInfo], now: float) -> int:
        """Take back what `records` gave (into an empty book, before any `add`): the same key,
        so every entry finds its own slot again; an entry that is not one this network dials,
        or whose slot is taken (a file made by hand), is left out. How many were taken."""
        assert not self._info, "restore into an empty book"
        self._key = key
        for saved in entries:
            group = self._group_if_acceptable(saved.address)
            if group is None or saved.address in self._info:
                continue
            info = AddressInfo(saved.address, group, saved.source_group, saved.seen, attempts=saved.attempts,
                               last_try=saved.last_try, last_success=saved.last_success)
            if info.terrible(now) or not self._take_new_slot(info, now):
                continue
            self._info[info.address] = info
            if saved.tried:
                self._promote(info, now, test_first=True)
                self._collisions.discard(info.address)  # a hand-made file's collision: it stays new
        return len(self._info)

    def to_save(self, now: float) -> list[str]:
        """The entries worth keeping across a restart, tried first (terrible ones are not)."""
        good = [i for i in self._info.values() if not i.terrible(now)]
        return [i.address for i in sorted(good, key=lambda i: not i.tried)]

    # --- learning -----------------------------------------------------------------------------

    def add(self, address: str, source_ip: str, now: float) -> bool:
        """Learn `address` from the peer at `source_ip`; False when it is not taken (not one this
        network dials, known already, or its slot holds an entry that is not terrible)."""
        known = self._info.get(address)
        if known is not None:
            if now - known.seen > L.ADDRESS_SEEN_REFRESH_S:
                known.seen = now
            return False
        group = self._group_if_acceptable(address)
        if group is None:
            return False
        info = AddressInfo(address, group, _source_group(source_ip), now)
        if not self._take_new_slot(info, now):
            return False
        self._info[address] = info
        return True

    def attempt(self, address: str, now: float) -> None:
        """We are dialling `address`: one more attempt until it shakes hands (`good`)."""
        info = self._info.get(address)
        if info is not None:
            info.attempts += 1
            info.last_try = now

    def good(self, address: str, now: float) -> None:
        """We dialled `address` and it shook hands: move it to "tried" (a peer we dialled that the
        book did not hold is learned from itself first)."""
        info = self._info.get(address)
        if info is None:
            group = self._group_if_acceptable(address)
            if group is None:
                return
            info = AddressInfo(address, group, group, now)
            self._info[address] = info
            self._take_new_slot(info, now)
        info.attempts, info.last_try, info.last_success, info.seen = 0, now, now, now
        if not info.tried:
            self._promote(info, now, test_first=True)
            if info.bucket < 0 and info.address not in self._collisions:
                self._forget(info)  # no slot in either table and no test to wait for

    def _take_new_slot(self, info: AddressInfo, now: float) -> bool:
        bucket = self._new_bucket(info)
        position = self._position("new", bucket, info.address)
        occupant = self._new.get(bucket, {}).get(position)
        if occupant is not None:
            if not self._info[occupant].terrible(now):
                return False
            self._forget(self._info[occupant])
        self._place(self._new, info, bucket, position)
        return True

    def _promote(self, info: AddressInfo, now: float, *, test_first: bool) -> None:
        """Move `info` to its tried slot. A terrible occupant is sent back to "new"; a good one
        is kept while `test_first`, and the newcomer waits in `_collisions` (a bounded few: an
        address over the bound simply stays in "new")."""
        bucket = self._tried_bucket(info)
        position = self._position("tried", bucket, info.address)
        occupant = self._tried.get(bucket, {}).get(position)
        if occupant is not None:
            old = self._info[occupant]
            if test_first and not old.terrible(now):
                if len(self._collisions) < L.MAX_TRIED_COLLISIONS:
                    self._collisions.add(info.address)
                return
            self._unplace(old)
            old.tried = False
            if not self._take_new_slot(old, now):
                self._forget(old)  # its "new" slot is taken by a good entry: it goes
        self._collisions.discard(info.address)
        self._unplace(info)
        info.tried = True
        self._place(self._tried, info, bucket, position)

    # --- tried collisions (Bitcoin Core's ResolveCollisions and SelectTriedCollision) -------

    def collision_to_test(self, now: float) -> str | None:
        """Settle the collisions that can be settled, and name a tried entry in the way of one
        that is left: dialling it (a feeler) tests it; `None` when there is none."""
        for address in list(self._collisions):
            self._settle(address, now)
        if not self._collisions:
            return None
        waiting = self._info[self._rng.choice(sorted(self._collisions))]
        bucket = self._tried_bucket(waiting)
        return self._tried[bucket][self._position("tried", bucket, waiting.address)]

    def _settle(self, address: str, now: float) -> None:
        info = self._info.get(address)
        if info is None or info.tried:
            self._collisions.discard(address)
            return
        bucket = self._tried_bucket(info)
        occupant = self._tried.get(bucket, {}).get(self._position("tried", bucket, address))
        if occupant is None:
            self._promote(info, now, test_first=False)
            return
        old = self._info[occupant]
        if now - old.last_success < L.TRIED_REPLACEMENT_S:
            self._collisions.discard(address)  # the old entry answered lately: it stays
        elif now - old.last_try < L.TRIED_REPLACEMENT_S:
            if now - old.last_try > L.ADDRESS_TERRIBLE_GRACE_S:
                self._promote(info, now, test_first=False)  # it was dialled and did not answer
        elif now - info.last_success > L.TRIED_TEST_WINDOW_S:
            self._promote(info, now, test_first=False)  # not tested in time: it cannot be reached

    # --- choosing -----------------------------------------------------------------------------

    def select(self, now: float, *, new_only: bool = False,
               usable: Callable[[AddressInfo], bool] = lambda info: True) -> str | None:
        """A random entry to dial (Bitcoin Core's Select): each draw flips a coin between the
        tables, draws a bucket that has entries and one of them, and takes it with its `chance`,
        scaled up at every draw so that a table of poor entries still gives one. Terrible
        entries, and those that `usable` refuses, are never taken; None after SELECT_DRAWS. A
        book of no more entries than that is first looked through whole: where none is usable
        (a small network's node, connected to every address it knows, asks every 2 s for a free
        slot) that is one pass, not SELECT_DRAWS draws (about 1 ms each time on a devnet)."""
        if len(self._info) <= L.SELECT_DRAWS and not any(
                usable(info) and not info.terrible(now)
                for info in self._info.values() if not (new_only and info.tried)):
            return None
        factor = 1.0
        for _ in range(L.SELECT_DRAWS):
            use_tried = bool(self._tried) and not new_only and (not self._new or self._rng.random() < 0.5)
            table = self._tried if use_tried else self._new
            if not table:
                return None
            bucket = table[self._rng.choice(list(table))]
            info = self._info[bucket[self._rng.choice(list(bucket))]]
            if not info.terrible(now) and usable(info) and self._rng.random() < factor * info.chance(now):
                return info.address
            factor *= 1.2
        return None

    # --- slots --------------------------------------------------------------------------------

    def _new_bucket(self, info: AddressInfo) -> int:
        spread = self._hash("new", info.group, info.source_group)
        return self._hash("new", info.source_group, spread % L.NEW_BUCKETS_PER_SOURCE_GROUP) % L.NEW_BUCKETS

    def _tried_bucket(self, info: AddressInfo) -> int:
        spread = self._hash("tried", info.address) % L.TRIED_BUCKETS_PER_GROUP
        return self._hash("tried", info.group, spread) % L.TRIED_BUCKETS

    def _position(self, table: str, bucket: int, address: str) -> int:
        return self._hash(table, bucket, address) % L.ADDRESS_BUCKET_SIZE

    def _hash(self, *parts: object) -> int:
        text = "|".join(str(p) for p in parts).encode()
        return int.from_bytes(hashlib.blake2b(text, key=self._key, digest_size=8).digest(), "big")

    def _place(self, table: dict[int, dict[int, str]], info: AddressInfo, bucket: int, position: int) -> None:
        table.setdefault(bucket, {})[position] = info.address
        info.bucket, info.position = bucket, position

    def _unplace(self, info: AddressInfo) -> None:
        if info.bucket < 0:
            return
        table = self._tried if info.tried else self._new
        slots = table[info.bucket]
        del slots[info.position]
        if not slots:
            del table[info.bucket]
        info.bucket = info.position = -1

    def _forget(self, info: AddressInfo) -> None:
        self._unplace(info)
        del self._info[info.address]
        self._collisions.discard(info.address)

    def placement(self, address: str) -> tuple[str, int] | None:
        """("new" or "tried", bucket) of an entry that has a slot (for tests and diagnostics)."""
        info = self._info.get(address)
        if info is None or info.bucket < 0:
            return None
        return ("tried" if info.tried else "new"), info.bucket


@functools.lru_cache(maxsize=1_024)
def _source_group(ip: str) -> str:
    """`network_group` of a source, remembered: a book hears from few sources, many times."""
    return network_group(ip)


@dataclass(frozen=True, slots=True)
class Candidate:
    """An inbound peer as the eviction rule sees it."""

    ident: object
    ip: str
    connected_at: float
    last_block_at: float


def choose_eviction(candidates: Sequence[Candidate]) -> object | None:
    """The inbound peer to drop for a new one, or None when every one is protected: one peer
    from each of a few network groups, the peers that last sent us blocks, and the longest
    connected half of the rest are kept; of the others, the youngest of the most crowded
    network group goes."""
    rest = list(candidates)
    protected: set[int] = set()
    seen_groups: set[str] = set()
    for c in sorted(rest, key=lambda c: c.connected_at):
        group = network_group(c.ip)
        if group not in seen_groups and len(seen_groups) < L.EVICT_PROTECT_GROUPS:
            seen_groups.add(group)
            protected.add(id(c))
    recent = sorted((c for c in rest if c.last_block_at > 0), key=lambda c: -c.last_block_at)
    protected.update(id(c) for c in recent[:L.EVICT_PROTECT_BLOCKS])
    rest = sorted((c for c in rest if id(c) not in protected), key=lambda c: c.connected_at)
    rest = rest[int(len(rest) * L.EVICT_PROTECT_LONGEST):]
    if not rest:
        return None
    crowd = Counter(network_group(c.ip) for c in rest)
    group = max(crowd, key=lambda g: crowd[g])
    return max((c for c in rest if network_group(c.ip) == group), key=lambda c: c.connected_at).ident
