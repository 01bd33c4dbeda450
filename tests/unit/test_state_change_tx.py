"""`core.state_change`: the one builder of a quorum's state change puts the votes in voter order,
returns a deregistered node's stakes in its outputs, and gives a node named by key alone none
(the rules then refuse its deregistration)."""

from __future__ import annotations

from snode.core.crypto import verify
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.stake_exit import returned_outputs
from snode.core.state_change import sign_votes, state_change_tx
from snode.core.transactions import StateChange, state_change_hash
from snode.devchain import key_from_label
from tests.unit.conftest import new_chain

KEYS = [key_from_label(f"state change voter {i}") for i in range(3)]


def test_votes_are_signed_over_the_state_change_and_kept_in_voter_order():
    target = key_from_label("state change target").public
    kind, reason = StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS
    votes = sign_votes(KEYS, 7, target, kind, reason, 12)
    message = state_change_hash(7, target, kind, reason, 12)
    assert [v.voter for v in votes] == [k.public for k in KEYS]
    assert all(verify(v.voter, message, v.signature) for v in votes)
    tx = state_change_tx(reversed(votes), target, kind, reason, 12)
    assert isinstance(tx.payload, StateChange)
    assert [v.voter for v in tx.payload.votes] == sorted(k.public for k in KEYS)
    assert (tx.inputs, tx.outputs, tx.payload.sn_pubkey, tx.payload.quorum_height) == ((), (), target, 12)


def test_a_deregistration_returns_the_stakes_read_from_the_record():
    chain = new_chain()
    pubkey = chain.new_node()
    record = chain.state.service_nodes[pubkey]
    kind, reason = StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS
    tx = state_change_tx((), record, kind, reason, chain.state.height)
    assert tx.outputs == returned_outputs(record) and tx.outputs
    assert state_change_tx((), record, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF, 1).outputs == ()
    assert state_change_tx((), pubkey, kind, reason, chain.state.height).outputs == ()
