"""The transaction a quorum's votes make: one `StateChange` on one service node.

Every builder of a state change (the daemon's vote collector, the simulator, `DevChain`, the
benchmarks and tests) goes through `state_change_tx`, so the vote order and a deregistration's
outputs are stated once; `sign_votes` is the members' side, each key signing
`state_change_hash`. What makes a state change valid is `core.tx_rules`.
"""

from __future__ import annotations

from collections.abc import Iterable

from snode.core.crypto import SigningKey
from snode.core.service_nodes import StateChangeKind
from snode.core.stake_exit import returned_outputs
from snode.core.state import ServiceNode
from snode.core.transactions import TX_VERSION, ProvenStateChange, StateChange, Transaction, Vote, state_change_hash


def sign_votes(
    keys: Iterable[SigningKey], network_id: int, sn_pubkey: bytes, kind: int, reason: int, quorum_height: int,
) -> tuple[Vote, ...]:
    """Each key's vote for the state change (`kind`, `reason`) of `sn_pubkey` by the quorum of
    `quorum_height`, in the order of `keys`."""
    message = state_change_hash(network_id, sn_pubkey, kind, reason, quorum_height)
    return tuple(Vote(key.public, key.sign(message)) for key in keys)


def state_change_tx(
    votes: Iterable[Vote], target: ServiceNode | bytes, kind: int, reason: int, quorum_height: int,
    *, proof: bytes | None = None,
) -> Transaction:
    """The state change (`kind`, `reason`) of `target` voted by the quorum of `quorum_height`.

    The votes go in voter order. A deregistration's outputs return each stake to its contributor
    (`stake_exit.returned_outputs`), read from the node's record as `target`; a node named by
    public key alone gets none, so the rules refuse its deregistration (tests send one of an
    unregistered node). Any other kind has no outputs. With `proof` (an encoded proof), the change
    is a `ProvenStateChange` carrying it (fork v2's deregistration for equivocation, `core.equivocation`).
    """
    if isinstance(target, ServiceNode):
        sn_pubkey, outputs = target.pubkey, returned_outputs(target) if kind == StateChangeKind.DEREGISTER else ()
    else:
        sn_pubkey, outputs = target, ()
    ordered = tuple(sorted(votes, key=lambda v: v.voter))
    change = (StateChange(sn_pubkey, kind, reason, quorum_height, ordered) if proof is None
              else ProvenStateChange(sn_pubkey, kind, reason, quorum_height, ordered, proof))
    return Transaction(TX_VERSION, (), outputs, change, ())
