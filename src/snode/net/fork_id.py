"""Fork identity for the handshake, by Ethereum's EIP-2124 rules (issue #34 item 3).

A node's fork id is a hash of its genesis and the heights of the forks it has passed, with the
height of its next scheduled fork (0: none). Two nodes compare them to know, before anything is
synced, whether they follow one chain: the same schedule connects; a node behind but on a prefix
of the other's schedule connects (it is syncing, or the other is); a peer is never refused before
a fork's height, so that an upgrade never splits the network early; after it, a peer on another
branch is refused, as a refusal and not as misbehaviour (it is not banned).

Pure (no I/O): the handshake carries the id and acts on `compatibility`'s answer. It lives
beside the protocol, not in `core`: it compares fork heights, which only `params.rules_at` may
do for the consensus rules.
"""

from __future__ import annotations

from typing import NamedTuple

from snode.core.crypto import hash32
from snode.params import Fork

FORK_HASH_BYTES = 4
"""EIP-2124's FORK_HASH is a CRC32; here the first 4 bytes of BLAKE2b-256, the house hash."""


class ForkId(NamedTuple):
    """What a node announces: the hash of its genesis and passed forks, and its next fork."""

    hash: bytes
    next: int
    """The height of the next fork it has scheduled; 0: none."""


def _hashes(genesis_hash: bytes, forks: tuple[Fork, ...]) -> list[bytes]:
    """The fork hash after genesis and after each fork of the schedule in turn (the first
    fork, v1 at genesis, is the genesis itself, as EIP-2124 leaves out forks at block 0)."""
    state = genesis_hash
    hashes = [hash32(state)[:FORK_HASH_BYTES]]
    for fork in forks[1:]:
        state += fork.height.to_bytes(8, "big")
        hashes.append(hash32(state)[:FORK_HASH_BYTES])
    return hashes


def _passed(forks: tuple[Fork, ...], height: int) -> int:
    """How many forks after genesis the block at `height` has passed."""
    return sum(1 for fork in forks[1:] if fork.height <= height)


def fork_id(genesis_hash: bytes, forks: tuple[Fork, ...], height: int) -> ForkId:
    """The fork id of a node whose tip is at `height` on this schedule."""
    passed = _passed(forks, height)
    upcoming = forks[1 + passed:]
    return ForkId(_hashes(genesis_hash, forks)[passed], upcoming[0].height if upcoming else 0)


def compatibility(genesis_hash: bytes, forks: tuple[Fork, ...], height: int, remote: ForkId) -> str | None:
    """None when a peer announcing `remote` follows this node's chain (EIP-2124's rules, this
    node's tip at `height`); else the one line that says why not, naming both forks."""
    hashes = _hashes(genesis_hash, forks)
    passed = _passed(forks, height)
    names = [fork.rules.name for fork in forks]
    ours = names[passed]
    if remote.hash == hashes[passed]:
        # Rule 1: the same forks passed. Refused only if the peer schedules a fork this node
        # has already passed without it (then this node is on another branch from that height).
        if remote.next and remote.next <= height:
            return (f"peer is on fork {ours} but schedules a fork at height {remote.next}, which this node "
                    f"passed on {ours}: another branch")
        return None
    if remote.hash in hashes[:passed]:
        # Rule 2: the peer is behind, on a prefix of this schedule; it must know the next fork.
        behind = hashes.index(remote.hash)
        if remote.next == forks[behind + 1].height:
            return None
        theirs = f"next fork at height {remote.next}" if remote.next else "no fork scheduled"
        return (f"peer is on fork {names[behind]} with {theirs}; this node is on fork {ours} from height "
                f"{forks[passed].height}: the peer does not know {names[behind + 1]} (an older snoded)")
    if remote.hash in hashes[passed + 1:]:
        return None  # Rule 3: the peer is ahead, on forks this node has scheduled too.
    return (f"peer is on a fork this node does not know (fork id {remote.hash.hex()}, next fork at "
            f"{remote.next or 'none'}); this node is on fork {ours}: its snoded may be newer, or "
            "another branch")
