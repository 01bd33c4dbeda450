"""Every kind has its rule: each payload kind maps to its operator-facing name and its spend, and
each state-change kind to its own rule; an unknown kind number is refused, never taken for
another (issue #11: "a new state-change kind would silently recommission")."""

from __future__ import annotations

import typing

import pytest

from snode.core.errors import InvalidStateChange
from snode.core.service_nodes import Reason, StateChangeKind, apply_state_change
from snode.core.transactions import (
    DEREGISTER_KIND,
    Coinbase,
    Payload,
    ProvenStateChange,
    Registration,
    Reservation,
    Stake,
    StakeReturn,
    StateChange,
    Transfer,
    TxKind,
    UnlockRequest,
    payload_kind,
    payload_spend,
)

SAMPLES: dict[str, Payload] = {
    "transfer": Transfer(),
    "coinbase": Coinbase(7),
    "registration": Registration(0, (Reservation(bytes(32), 100),), 0, bytes(32), bytes(64)),
    "stake": Stake(bytes(32), 25),
    "state_change": StateChange(bytes(32), 1, 1, 3, ()),
    "stake_return": StakeReturn(bytes(32), 1),
    "unlock_request": UnlockRequest(bytes(32), bytes(32)),
}


def test_every_payload_type_has_a_sample_and_a_kind() -> None:
    # A ProvenStateChange (fork v2, issue #33 item 8) is a StateChange with its proof: that kind.
    assert {type(p) for p in SAMPLES.values()} | {ProvenStateChange} == set(typing.get_args(Payload))
    assert {k.value for k in TxKind} == set(SAMPLES)
    proven = ProvenStateChange(bytes(32), 4, 7, 3, (), b"proof")
    assert payload_kind(proven) is TxKind.STATE_CHANGE and payload_spend(proven) == 0


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_kind_dispatches(name: str) -> None:
    payload = SAMPLES[name]
    assert payload_kind(payload).value == name
    assert payload_spend(payload) == {"registration": 100, "stake": 25}.get(name, 0)


def test_an_unknown_state_change_kind_is_refused(chain) -> None:
    node = _funded_node(chain)
    for kind in (0, max(StateChangeKind) + 1, 255):
        with pytest.raises(InvalidStateChange, match="unknown state change kind"):
            apply_state_change(node, kind, Reason.MISSED_UPTIME_PROOFS, chain.state.height + 1,
                               chain.params)


def test_each_state_change_kind_has_its_own_rule(chain) -> None:
    node = _funded_node(chain)
    h = chain.state.height + 1
    active = apply_state_change(node, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF, h, chain.params)
    assert active is not None and active.active and active.active_since == h
    with pytest.raises(InvalidStateChange, match="activated before"):
        apply_state_change(active, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF, h, chain.params)
    with pytest.raises(InvalidStateChange, match="not decommissioned"):
        apply_state_change(active, StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED, h, chain.params)
    down = apply_state_change(active, StateChangeKind.DECOMMISSION, Reason.MISSED_BLOCK_PRODUCTION, h + 1, chain.params)
    assert down is not None
    assert (down.active, down.decommission_count, down.last_decommission_reason) == (
        False, 1, Reason.MISSED_BLOCK_PRODUCTION)
    # A never-activated node is not "decommissioned": recommission is not its rule.
    with pytest.raises(InvalidStateChange, match="not decommissioned"):
        apply_state_change(node, StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED, h, chain.params)
    assert Reason.MISSED_BLOCK_PRODUCTION.label == "missed_block_production"


def test_the_frame_names_the_deregistration_kind() -> None:
    """`transactions` lets only a deregistration's state change carry outputs; it cannot import
    the kinds (a layer above), so its constant must stay equal to the kind."""
    assert DEREGISTER_KIND == StateChangeKind.DEREGISTER


def _funded_node(chain):
    from snode.devchain import key_from_label
    from tests.unit.conftest import REQUIREMENT

    sn = key_from_label("dispatch sn")
    chain.register(key_from_label("operator"), sn, REQUIREMENT)
    chain.mine()
    return chain.node(sn.public)
