"""The address book and the inbound eviction rule: Bitcoin Core's addrman and
`SelectNodeToEvict`, simplified. Sans-IO: no sockets, no clock (times come in as arguments).

Addresses learned from peers go to "new" buckets chosen by a keyed hash of the source's network
group and the address's own, so that one source (or one /16 of them) reaches a few buckets only
and can push out only what it put there; an address we shook hands with moves to "tried", which
gossip never touches. On mainnet and testnet an address that is not globally routable is dropped
(regtest and devnet keep loopback and private ones: their networks live there).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
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
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if not addr.is_global:
        return str(addr)
    if isinstance(addr, ipaddress.IPv4Address):
        return ".".join(str(addr).split(".")[:2])
    return addr.exploded[:9]


class AddressBook:
    """Peer addresses to dial: bounded, bucketed by where they were learned."""

    def __init__(self, *, global_only: bool, key: bytes | None = None) -> None:
        self.global_only = global_only
        self._key = key if key is not None else os.urandom(16)
        self._new: list[OrderedDict[str, None]] = [OrderedDict() for _ in range(L.ADDRESS_BUCKETS)]
        self._where: dict[str, int] = {}
        self._tried: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._where) + len(self._tried)

    def __iter__(self) -> Iterator[str]:
        """Tried addresses first (they answered before), then the new ones, bucket by bucket."""
        yield from list(self._tried)
        for bucket in self._new:
            yield from list(bucket)

    def acceptable(self, address: str) -> bool:
        """An `ip:port` that this network would dial."""
        parsed = ip_endpoint(address)
        if parsed is None:
            return False
        return not self.global_only or ipaddress.ip_address(parsed.host).is_global

    def add(self, address: str, source_ip: str) -> bool:
        """Learn `address` from the peer at `source_ip`; False when it is dropped."""
        if not self.acceptable(address) or address in self._tried or address in self._where:
            return False
        index = self._bucket(address, source_ip)
        bucket = self._new[index]
        if len(bucket) >= L.ADDRESS_BUCKET_SIZE:
            old, _ = bucket.popitem(last=False)
            del self._where[old]
        bucket[address] = None
        self._where[address] = index
        return True

    def good(self, address: str) -> None:
        """We connected to `address` and it shook hands: keep it in the tried table."""
        if not self.acceptable(address):
            return
        index = self._where.pop(address, None)
        if index is not None:
            del self._new[index][address]
        self._tried[address] = None
        self._tried.move_to_end(address)
        while len(self._tried) > L.MAX_TRIED:
            self._tried.popitem(last=False)

    def _bucket(self, address: str, source_ip: str) -> int:
        host = address.rpartition(":")[0].strip("[]")
        spread = self._hash(network_group(host)) % L.BUCKETS_PER_SOURCE_GROUP
        return self._hash(f"{network_group(source_ip)}|{spread}") % L.ADDRESS_BUCKETS

    def _hash(self, text: str) -> int:
        return int.from_bytes(hashlib.blake2b(text.encode(), key=self._key, digest_size=8).digest(), "big")


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
