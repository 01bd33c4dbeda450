"""A service node's life on a real chain: funded, activated, payable, decommissioned,
recommissioned, and the Active / Decomm / Await status derived from it (DESIGN.md section 4)."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.errors import InvalidStateChange
from snode.core.service_nodes import (
    Reason,
    StateChangeKind,
    Status,
    apply_state_change,
    is_payable,
    next_reward_winner,
    status,
)
from snode.core.state import NO_HEIGHT
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST

ACTIVATE, DECOMMISSION, RECOMMISSION = (
    StateChangeKind.ACTIVATE, StateChangeKind.DECOMMISSION, StateChangeKind.RECOMMISSION,
)
GRACE = REGTEST.payable_grace
OPERATOR, ALICE, BOB = (key_from_label(x) for x in ("operator", "alice", "bob"))


def test_node_is_funded_exactly_when_contributions_reach_the_requirement(chain):
    pubkey = chain.new_node(amount=REGTEST.pool_operator_min)
    chain.submit(chain.stake_tx(ALICE, pubkey, 60_000 * COIN))
    chain.mine()
    node = chain.node(pubkey)
    assert not node.funded and node.funded_height == NO_HEIGHT
    assert status(node) is Status.AWAIT
    chain.submit(chain.stake_tx(BOB, pubkey, 40_000 * COIN))
    chain.mine()
    node = chain.node(pubkey)
    assert node.total_contributed == node.staking_requirement
    assert node.funded and node.funded_height == chain.state.height
    assert not node.active and node.decommission_count == 0
    assert status(node) is Status.DECOMM


def test_funded_is_total_contributed_at_least_the_requirement(chain):
    node = chain.node(chain.new_node())
    operator = msgspec.structs.replace(node.contributors[0], amount=REGTEST.staking_requirement - 1)
    short = msgspec.structs.replace(node, contributors=(operator,))
    assert node.funded and not short.funded


def test_funded_node_becomes_active_only_with_an_activation(chain):
    pubkey = chain.new_node()
    chain.mine(20)
    assert not chain.node(pubkey).active
    assert not is_payable(chain.node(pubkey), chain.state.height, chain.params)
    height = chain.change_state(pubkey, ACTIVATE)
    node = chain.node(pubkey)
    assert node.active and node.active_since == height
    assert node.last_state_change_reason == Reason.FIRST_UPTIME_PROOF
    assert status(node) is Status.ACTIVE


def test_unfunded_node_cannot_be_activated(chain):
    pubkey = chain.new_node(amount=REGTEST.pool_operator_min)
    with pytest.raises(InvalidStateChange, match="not funded yet"):
        chain.state_change(pubkey, ACTIVATE, Reason.FIRST_UPTIME_PROOF)


def test_node_is_activated_once(chain):
    pubkey = chain.new_node()
    chain.change_state(pubkey, ACTIVATE)
    with pytest.raises(InvalidStateChange, match="activated before"):
        chain.state_change(pubkey, ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    chain.change_state(pubkey, DECOMMISSION)
    with pytest.raises(InvalidStateChange, match="activated before"):
        chain.state_change(pubkey, ACTIVATE, Reason.FIRST_UPTIME_PROOF)


def test_payable_exactly_four_blocks_after_activation(chain):
    pubkey = chain.new_node()
    activated = chain.change_state(pubkey, ACTIVATE)
    node = chain.node(pubkey)
    assert GRACE == 4
    assert not is_payable(node, activated + GRACE - 1, chain.params)
    assert is_payable(node, activated + GRACE, chain.params)
    # The registry of height h decides who block h + 1 pays: the authority takes every reward
    # up to and including block activated + 4; block activated + 5 is the node's first.
    chain.mine_to(activated + GRACE + 1)
    paid = [chain.blocks[h].transactions[0].outputs[0].owner for h in range(activated, activated + GRACE + 2)]
    assert paid == [chain.authority.public] * (GRACE + 1) + [OPERATOR.public]
    assert chain.node(pubkey).last_reward_height == activated + GRACE + 1


def test_decommission_clears_active_and_payable_and_counts(chain):
    pubkey = chain.new_node()
    chain.change_state(pubkey, ACTIVATE)
    chain.mine(GRACE)
    assert is_payable(chain.node(pubkey), chain.state.height, chain.params)
    for count in (1, 2):
        chain.change_state(pubkey, DECOMMISSION)
        node = chain.node(pubkey)
        assert not node.active
        assert not is_payable(node, chain.state.height + 1000, chain.params)
        assert node.decommission_count == count
        assert node.last_decommission_reason == Reason.MISSED_UPTIME_PROOFS
        assert status(node) is Status.DECOMM
        chain.change_state(pubkey, RECOMMISSION)
        # Recommissioned at once, it paid twice its blocks down from its credit: it earns back
        # the minimum a decommission needs (`core.credit`) before it can be decommissioned again.
        chain.mine(2 * chain.params.credit_earn_blocks)


def test_decommission_needs_an_active_node(chain):
    pubkey = chain.new_node()
    with pytest.raises(InvalidStateChange, match="not active"):
        chain.state_change(pubkey, DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)


def test_recommission_works_only_for_a_decommissioned_node(chain):
    pubkey = chain.new_node()
    with pytest.raises(InvalidStateChange, match="not decommissioned"):  # never activated
        chain.state_change(pubkey, RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED)
    chain.change_state(pubkey, ACTIVATE)
    with pytest.raises(InvalidStateChange, match="not decommissioned"):  # active
        chain.state_change(pubkey, RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED)
    chain.change_state(pubkey, DECOMMISSION)
    height = chain.change_state(pubkey, RECOMMISSION)
    node = chain.node(pubkey)
    assert node.active and node.active_since == height
    assert node.decommission_count == 1
    assert not is_payable(node, height + GRACE - 1, chain.params)
    assert is_payable(node, height + GRACE, chain.params)


def test_recommissioned_node_goes_to_the_back_of_the_reward_queue(chain):
    pubkey = chain.new_node()
    chain.change_state(pubkey, ACTIVATE)
    chain.change_state(pubkey, DECOMMISSION)
    decommissioned = chain.node(pubkey)
    # Two payable nodes paid at heights 50 and 60; the decommissioned node was paid long before.
    others = [
        msgspec.structs.replace(
            decommissioned, pubkey=bytes([i]) * 32, active=True, active_since=0,
            last_reward_height=paid,
        )
        for i, paid in ((1, 50), (2, 60))
    ]
    assert decommissioned.last_reward_height < 50
    recommissioned = apply_state_change(decommissioned, RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED, 100, chain.params)
    assert recommissioned is not None
    assert recommissioned.last_reward_height == 100
    nodes = [recommissioned, *others]
    order = []
    for height in range(200, 203):
        winner = next_reward_winner(nodes, height, chain.params)
        assert winner is not None
        order.append(winner.pubkey)
        nodes = [msgspec.structs.replace(n, last_reward_height=height) if n is winner else n for n in nodes]
    assert order == [bytes([1]) * 32, bytes([2]) * 32, pubkey]


def test_unknown_state_change_kind_is_refused(chain):
    node = chain.node(chain.new_node())
    with pytest.raises(InvalidStateChange, match="unknown state change kind 9"):
        apply_state_change(node, 9, Reason.NONE, chain.state.height, chain.params)


def test_state_change_for_an_unregistered_node_is_refused(chain):
    with pytest.raises(InvalidStateChange, match="is not registered"):
        chain.state_change(key_from_label("nobody").public, ACTIVATE, Reason.FIRST_UPTIME_PROOF)


@pytest.mark.parametrize(
    ("active", "contributed", "expected"),
    [
        (True, REGTEST.staking_requirement, Status.ACTIVE),
        (False, REGTEST.staking_requirement, Status.DECOMM),
        (False, REGTEST.staking_requirement - 1, Status.AWAIT),
        (False, REGTEST.pool_operator_min, Status.AWAIT),
    ],
)
def test_status_derivation(chain, active, contributed, expected):
    node = chain.node(chain.new_node())
    node = msgspec.structs.replace(
        node, active=active,
        contributors=(msgspec.structs.replace(node.contributors[0], amount=contributed),),
    )
    assert status(node) is expected
