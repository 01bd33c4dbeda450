"""Deterministic selection of obligations quorums, block leaders and block validators.

Every node computes the same answer from the same (registry, block hash, round): the candidates
are sorted by public key and shuffled by a BLAKE2b stream seeded with the block hash.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from snode.core.crypto import hash32
from snode.core.service_nodes import is_payable, reward_order_key
from snode.core.state import Quorum, ServiceNode
from snode.params import NetworkParams


def _shuffled(keys: Sequence[bytes], seed: bytes, count: int) -> tuple[bytes, ...]:
    """The first `count` keys of a Fisher-Yates shuffle of sorted keys driven by seed."""
    pool = sorted(keys)
    count = min(count, len(pool))
    for i in range(count):
        draw = int.from_bytes(hash32(seed + i.to_bytes(4, "big"))[:8], "big")
        j = i + draw % (len(pool) - i)
        pool[i], pool[j] = pool[j], pool[i]
    return tuple(pool[:count])


def active_keys(nodes: Iterable[ServiceNode]) -> list[bytes]:
    """Public keys of the active nodes."""
    return [sn.pubkey for sn in nodes if sn.active]


def authority_quorum(height: int, authorities: Sequence[bytes]) -> Quorum:
    """While the network is small the genesis authority stands in: a majority of its keys."""
    return Quorum(height=height, members=tuple(authorities), needed=len(authorities) // 2 + 1)


def obligations_quorum(
    nodes: Iterable[ServiceNode], block_hash: bytes, height: int,
    authorities: Sequence[bytes], params: NetworkParams,
) -> Quorum:
    """The quorum that judges every funded node at `height` (block_hash is that block's)."""
    active = active_keys(nodes)
    if len(active) < params.min_active_sns:
        return authority_quorum(height, authorities)
    size = params.quorum_size(len(active))
    members = _shuffled(active, block_hash + b"obligations", size)
    return Quorum(height=height, members=members, needed=params.votes_needed(len(members)))


def block_leader(
    nodes: Iterable[ServiceNode], height: int, round: int, params: NetworkParams
) -> bytes | None:
    """The leader of (height, round): the payable nodes in reward order, rotated by round."""
    payable = sorted(
        (sn for sn in nodes if is_payable(sn, height - 1, params)), key=reward_order_key
    )
    if not payable:
        return None
    return payable[round % len(payable)].pubkey


def block_validators(
    nodes: Iterable[ServiceNode], prev_hash: bytes, round: int, leader: bytes,
    params: NetworkParams,
) -> tuple[bytes, ...]:
    """Validators of (height, round): drawn from the active set without the leader."""
    candidates = [k for k in active_keys(nodes) if k != leader]
    size = (
        min(params.validators_size, len(candidates))
        if params.private_public_ip_allowed else params.validators_size
    )
    return _shuffled(candidates, prev_hash + b"validators" + round.to_bytes(4, "big"), size)
