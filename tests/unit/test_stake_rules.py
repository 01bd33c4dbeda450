"""Contribution rules of DESIGN.md section 4 on a real chain: slots, minimum contribution,
reservations, over-contribution and nodes that cannot take a stake."""

from __future__ import annotations

import pytest

from snode.core.errors import InvalidStake, InvalidTransaction
from snode.core.service_nodes import min_contribution, open_for_others
from snode.core.transactions import Stake, TxOut
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST

REQUIREMENT = REGTEST.staking_requirement
POOL_MINIMUM = REGTEST.pool_operator_min

OPERATOR, ALICE, BOB, CAROL = (key_from_label(x) for x in ("operator", "alice", "bob", "carol"))
SN = key_from_label("sn-1")
CONTRIBUTORS = [key_from_label(f"contributor-{i}") for i in range(1, 12)]


def _pool_node(chain, reserved=()) -> bytes:
    """Register SN with the operator's pool minimum and `reserved` ((key, amount), ...)."""
    return chain.new_node(amount=POOL_MINIMUM, reserved=reserved)


def _stake(chain, staker, amount) -> None:
    chain.submit(chain.stake_tx(staker, SN.public, amount))


def test_stake_counts_towards_the_node(chain):
    _pool_node(chain)
    _stake(chain, ALICE, 30_000 * COIN)
    chain.mine()
    node = chain.node(SN.public)
    assert [(c.owner, c.amount, c.reserved) for c in node.contributors] == [
        (OPERATOR.public, POOL_MINIMUM, POOL_MINIMUM), (ALICE.public, 30_000 * COIN, 0),
    ]
    assert node.total_contributed == 130_000 * COIN


def test_stake_from_an_eleventh_non_operator_contributor_is_refused(chain):
    # The operator and ten reserved contributors take every slot while 99,990 coins are open.
    reserved = [(c, COIN) for c in CONTRIBUTORS[:10]]
    _pool_node(chain, reserved)
    assert open_for_others(chain.node(SN.public)) == 99_990 * COIN
    with pytest.raises(InvalidStake, match="has 11 contributors already; no slot is free"):
        _stake(chain, ALICE, 99_990 * COIN)
    # A contributor who holds a slot may still pay in.
    _stake(chain, CONTRIBUTORS[0], COIN)
    chain.mine()
    assert chain.node(SN.public).contributors[1].amount == COIN


def test_last_free_slot_must_fill_the_remainder(chain):
    # Operator + 9 reserved: one slot left, so the minimum is everything still open.
    _pool_node(chain, [(c, COIN) for c in CONTRIBUTORS[:9]])
    remainder = 99_991 * COIN
    assert min_contribution(chain.node(SN.public), ALICE.public) == remainder
    with pytest.raises(InvalidStake, match="below the minimum contribution of 99991 coins"):
        _stake(chain, ALICE, remainder - 1)
    _stake(chain, ALICE, remainder)
    chain.mine()
    assert chain.node(SN.public).total_contributed == POOL_MINIMUM + remainder


def test_stake_below_the_minimum_contribution_is_refused(chain):
    # (200,000 - 100,000 contributed - 0 reserved) // 10 free slots = 10,000 coins.
    _pool_node(chain)
    rule = "stake of 9999.999999999 coins is below the minimum contribution of 10000 coins"
    with pytest.raises(InvalidStake, match=rule):
        _stake(chain, ALICE, 10_000 * COIN - 1)
    _stake(chain, ALICE, 10_000 * COIN)
    chain.mine()
    assert chain.node(SN.public).total_contributed == 110_000 * COIN


def test_minimum_contribution_leaves_out_what_is_reserved_for_others(chain):
    # (200,000 - 100,000 - 30,000 reserved for bob) // 9 free slots = 7777.777777777 coins.
    _pool_node(chain, [(BOB, 30_000 * COIN)])
    minimum = 70_000 * COIN // 9
    assert minimum == 7_777_777_777_777
    # Shown as people type an amount: rounded up to the cent (itself enough), and "1 coin".
    with pytest.raises(InvalidStake, match="^stake of 1 coin is below the minimum contribution of 7777.78 coins$"):
        _stake(chain, ALICE, COIN)
    with pytest.raises(InvalidStake, match="below the minimum contribution of 7777.78 coins$"):
        _stake(chain, ALICE, minimum - 1)
    _stake(chain, ALICE, minimum)
    chain.mine()
    assert chain.node(SN.public).contributors[2].amount == minimum


def test_stake_that_fills_a_small_remainder_is_accepted(chain):
    _pool_node(chain)
    _stake(chain, ALICE, POOL_MINIMUM - 1)
    chain.mine()
    _stake(chain, BOB, 1)
    chain.mine()
    assert chain.node(SN.public).funded


def test_reserved_contributor_must_fill_its_reservation_in_one_transaction(chain):
    _pool_node(chain, [(BOB, 30_000 * COIN)])
    for amount in (10_000 * COIN, 30_000 * COIN - 1, 30_000 * COIN + 1):
        with pytest.raises(InvalidStake, match="reserved 30000 coins on the node and must contribute exactly"):
            _stake(chain, BOB, amount)
    _stake(chain, BOB, 30_000 * COIN)
    chain.mine()
    assert chain.node(SN.public).contributors[1].amount == 30_000 * COIN


def test_over_contribution_is_refused(chain):
    _pool_node(chain, [(BOB, 30_000 * COIN)])
    with pytest.raises(InvalidStake, match=r"more than the node still needs \(70000 coins\)"):
        _stake(chain, ALICE, 70_000 * COIN + 1)
    _stake(chain, ALICE, 70_000 * COIN)
    chain.mine()
    assert open_for_others(chain.node(SN.public)) == 0


def test_stake_to_an_unknown_node_is_refused(chain):
    stranger = key_from_label("not registered").public
    with pytest.raises(InvalidStake, match=f"service node {stranger.hex()} is not registered"):
        chain.submit(chain.stake_tx(ALICE, stranger, 50_000 * COIN))


def test_stake_to_a_full_node_is_refused(chain):
    pubkey = chain.new_node()
    with pytest.raises(InvalidStake, match="is already full"):
        chain.submit(chain.stake_tx(ALICE, pubkey, 50_000 * COIN))


def test_stake_of_zero_is_refused(chain):
    _pool_node(chain)
    with pytest.raises(InvalidStake, match="above 0"):
        _stake(chain, ALICE, 0)


def test_stake_paid_by_two_addresses_is_refused(chain):
    _pool_node(chain)
    (mine,), (theirs,) = chain.spendable(ALICE.public), chain.spendable(BOB.public)
    change = mine[1].amount + theirs[1].amount - 50_000 * COIN - COIN
    tx = chain.signed(
        [mine[0], theirs[0]], [TxOut(ALICE.public, change)], Stake(SN.public, 50_000 * COIN),
        [ALICE, BOB],
    )
    with pytest.raises(InvalidTransaction, match="all inputs of a stake must belong to one address"):
        chain.submit(tx)
