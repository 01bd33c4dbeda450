"""Deterministic selection of obligations quorums, block leaders and block validators.

Every node computes the same answer from the same (registry, block hash, round): the candidates
are sorted by public key and shuffled by a BLAKE2b stream seeded with the block hash.

Each rule comes in two forms: one over the registry's nodes, the rule as written (it filters and
sorts them), and a `..._from_active` / `..._from_queue` form over the registry's index
(`state.RegistryIndex`), already filtered and sorted, which blocks use.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, overload

from snode.core.service_nodes import is_payable, reward_order_key
from snode.core.state import Quorum, RewardEntry, ServiceNode
from snode.params import NetworkParams


def _shuffled(sorted_keys: Sequence[bytes], seed: bytes, count: int) -> tuple[bytes, ...]:
    """The first `count` keys of a Fisher-Yates shuffle of `sorted_keys` driven by seed.

    Step i swaps places i and j >= i, after which place i holds its final key; so instead of
    copying every key, only the later places a swap changed are kept (in `moved`).
    """
    n = len(sorted_keys)
    moved: dict[int, bytes] = {}
    drawn = []
    # Draw i is the hash of seed + i: the seed is absorbed once and the state copied per draw
    # (the same digests as hash32(seed + i.to_bytes(4, "big"))). Every block draws its
    # obligations quorum: the loop's names are bound locally and the suffixes made once.
    fresh = hashlib.blake2b(seed, digest_size=32).copy
    number, get = int.from_bytes, moved.get
    for i in range(min(count, n)):
        hasher = fresh()
        hasher.update(_SUFFIXES[i] if i < len(_SUFFIXES) else i.to_bytes(4, "big"))
        j = i + number(hasher.digest()[:8], "big") % (n - i)
        drawn.append(get(j, sorted_keys[j]))
        moved[j] = get(i, sorted_keys[i])
    return tuple(drawn)


_SUFFIXES: Final = tuple(i.to_bytes(4, "big") for i in range(64))
"""The draw numbers of `_shuffled`'s first draws, encoded (quorums draw 10 to 20 keys)."""


def active_keys(nodes: Iterable[ServiceNode]) -> list[bytes]:
    """Public keys of the active nodes, sorted."""
    return sorted(sn.pubkey for sn in nodes if sn.active)


def authority_quorum(height: int, authorities: Sequence[bytes]) -> Quorum:
    """While the network is small the genesis authority stands in: a majority of its keys."""
    return Quorum(height=height, members=tuple(authorities), needed=len(authorities) // 2 + 1)


def obligations_quorum(
    nodes: Iterable[ServiceNode], block_hash: bytes, height: int,
    authorities: Sequence[bytes], params: NetworkParams,
) -> Quorum:
    """The quorum that judges every funded node at `height` (block_hash is that block's)."""
    return obligations_quorum_from_active(
        active_keys(nodes), block_hash, height, authorities, params
    )


def obligations_quorum_from_active(
    active: Sequence[bytes], block_hash: bytes, height: int,
    authorities: Sequence[bytes], params: NetworkParams,
) -> Quorum:
    """`obligations_quorum`, given the sorted public keys of the active nodes."""
    if len(active) < params.min_active_sns:
        return authority_quorum(height, authorities)
    size = params.quorum_size(len(active))
    members = _shuffled(active, block_hash + b"obligations", size)
    return Quorum(height=height, members=members, needed=params.votes_needed(len(members)))


def block_leader(
    nodes: Iterable[ServiceNode], height: int, round: int, params: NetworkParams
) -> bytes | None:
    """The leader of (height, round): the payable nodes in reward order, rotated by round.

    The reference, sorting every node; blocks use its fast twin `block_leader_from_queue`,
    which tests/unit/test_indexes.py checks against this one."""
    payable = sorted(
        (sn for sn in nodes if is_payable(sn, height - 1, params)), key=reward_order_key
    )
    if not payable:
        return None
    return payable[round % len(payable)].pubkey


def block_leader_from_queue(
    reward_queue: Iterable[RewardEntry], registry: Mapping[bytes, ServiceNode], height: int,
    round: int, params: NetworkParams,
) -> bytes | None:
    """`block_leader`, given the registry's reward queue (no sort): the fast twin of that
    reference, which tests/unit/test_indexes.py holds it to.

    Reads the queue only up to the leader: round r's is the (r+1)-th payable entry, so a block
    of round 0 looks at the head of the queue whatever the network's size (a list of every
    payable node costs milliseconds a call at 10,000 nodes, and a block calls this several
    times). Only when fewer than r+1 nodes are payable is the queue read whole, to count them,
    and once more to the wrapped position.
    """
    def nth_payable(n: int) -> tuple[bytes | None, int]:
        seen = 0
        for entry in reward_queue:
            if is_payable(registry[entry[2]], height - 1, params):
                if seen == n:
                    return entry[2], seen
                seen += 1
        return None, seen

    leader, count = nth_payable(round)
    if leader is not None or count == 0:
        return leader
    return nth_payable(round % count)[0]


def block_validators(
    nodes: Iterable[ServiceNode], prev_hash: bytes, round: int, leader: bytes,
    params: NetworkParams,
) -> tuple[bytes, ...]:
    """Validators of (height, round): drawn from the active set without the leader."""
    candidates = [k for k in active_keys(nodes) if k != leader]
    return _drawn_validators(candidates, prev_hash, round, params)


def block_validators_from_active(
    active: Sequence[bytes], prev_hash: bytes, round: int, leader: bytes, params: NetworkParams,
) -> tuple[bytes, ...]:
    """`block_validators`, given the sorted public keys of the active nodes."""
    i = bisect_left(active, leader)
    if i < len(active) and active[i] == leader:
        return _drawn_validators(_Without(active, i), prev_hash, round, params)
    return _drawn_validators(active, prev_hash, round, params)


class _Without(Sequence[bytes]):
    """`keys` without its element `skip`, without copying the other N - 1 (a block draws
    validators several times, and a copy of 10,000 keys each time would make the draw O(N))."""

    __slots__ = ("_keys", "_skip")

    def __init__(self, keys: Sequence[bytes], skip: int) -> None:
        self._keys = keys
        self._skip = skip

    def __len__(self) -> int:
        return len(self._keys) - 1

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._keys[i if i < self._skip else i + 1]


def _drawn_validators(
    candidates: Sequence[bytes], prev_hash: bytes, round: int, params: NetworkParams
) -> tuple[bytes, ...]:
    size = (
        min(params.validators_size, len(candidates))
        if params.private_public_ip_allowed else params.validators_size
    )
    return _shuffled(candidates, prev_hash + b"validators" + round.to_bytes(4, "big"), size)
