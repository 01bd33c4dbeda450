"""The mempool (core/mempool.py): admission refusals, and selection that skips what no longer
applies on top of what it already chose."""

from __future__ import annotations

import pytest

from snode.core import mempool as mp
from snode.core.errors import InvalidStake, InvalidTransaction, MempoolRejection
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.transactions import OutPoint, Transfer, TxOut, txid
from snode.core.transition import make_coinbase
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST

ALICE, BOB, CAROL = (key_from_label(x) for x in ("alice", "bob", "carol"))


def _select(chain, max_bytes: int = 1_000_000):
    return mp.select(chain.pool, chain.state, chain.consensus, block_time=chain.now + 2, max_bytes=max_bytes)


def test_admitted_transaction_is_in_the_pool_with_its_fee(chain):
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    tx_id = chain.submit(tx)
    assert tx_id in chain.pool and len(chain.pool) == 1
    entry = chain.pool.entries[tx_id]
    assert entry.fee == 1_000_000 * COIN - sum(o.amount for o in tx.outputs)
    assert chain.pool.total_bytes == entry.size


def test_double_spend_in_the_pool_is_refused(chain):
    chain.submit(chain.transfer_tx(ALICE, BOB.public, COIN))
    rival = chain.transfer_tx(ALICE, CAROL.public, COIN, from_pool_spent=True)
    with pytest.raises(MempoolRejection, match="which mempool transaction [0-9a-f]{16} already spends"):
        chain.submit(rival)
    assert len(chain.pool) == 1


def test_spent_output_is_free_again_once_the_spender_leaves_the_pool(chain):
    first = chain.submit(chain.transfer_tx(ALICE, BOB.public, COIN))
    rival = chain.transfer_tx(ALICE, CAROL.public, COIN, from_pool_spent=True)
    chain.pool = mp.remove(chain.pool, [first])
    assert len(chain.pool) == 0 and chain.pool.total_bytes == 0
    chain.submit(rival)


def test_same_transaction_twice_is_refused(chain):
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    chain.submit(tx)
    with pytest.raises(MempoolRejection, match="already in the mempool"):
        chain.submit(tx)


def test_coinbase_alone_is_refused(chain):
    coinbase = make_coinbase(chain.state, chain.authority.public, 0, chain.consensus)
    with pytest.raises(InvalidTransaction, match="coinbase cannot be sent on its own"):
        chain.submit(coinbase)


def test_invalid_transaction_is_refused_with_the_chain_reason(chain):
    missing = chain.signed([OutPoint(bytes(32), 0)], [TxOut(BOB.public, COIN)], Transfer(), [ALICE])
    with pytest.raises(InvalidTransaction, match="spends output 0{16}:0, which does not exist"):
        chain.submit(missing)


def test_duplicate_state_change_in_the_pool_is_refused(chain):
    pubkey = chain.new_node()
    chain.state_change(pubkey, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    with pytest.raises(MempoolRejection, match="state change for this node is already in the mempool"):
        chain.state_change(pubkey, StateChangeKind.ACTIVATE, Reason.NONE)


def test_select_skips_two_stakes_that_together_over_fill_a_node(chain):
    sn = key_from_label("sn-1")
    chain.new_node(amount=REGTEST.pool_operator_min)
    # Each stake is valid against the tip on its own; together they need 120,000 of 100,000.
    first = chain.submit(chain.stake_tx(ALICE, sn.public, 60_000 * COIN))
    second = chain.submit(chain.stake_tx(BOB, sn.public, 60_000 * COIN))
    chosen, fees, stale = _select(chain)
    assert [txid(tx) for tx in chosen] == [first]
    assert stale == [second]
    assert fees == chain.pool.entries[first].fee
    chain.mine()
    assert len(chain.pool) == 0, "the stale stake is dropped once the first is mined"
    assert chain.node(sn.public).total_contributed == 160_000 * COIN
    with pytest.raises(InvalidStake, match="more than the node still needs"):
        chain.submit(chain.stake_tx(BOB, sn.public, 60_000 * COIN))


def test_select_skips_a_second_registration_of_the_same_key(chain):
    sn = key_from_label("sn-1")
    chain.register(key_from_label("operator"), sn, REGTEST.staking_requirement)
    chain.register(ALICE, sn, REGTEST.staking_requirement)
    chosen, _, stale = _select(chain)
    assert len(chosen) == 1 and len(stale) == 1
    chain.mine()
    assert chain.node(sn.public).operator == key_from_label("operator").public
    assert len(chain.pool) == 0


def test_select_prefers_state_changes_then_higher_fee_rate(chain):
    pubkey = chain.new_node()
    cheap = chain.submit(chain.transfer_tx(ALICE, CAROL.public, COIN))
    ((outpoint, coin),) = chain.spendable(BOB.public)
    generous = [TxOut(CAROL.public, COIN), TxOut(BOB.public, coin.amount - 2 * COIN)]
    rich_tx = chain.signed([outpoint], generous, Transfer(), [BOB])
    rich = chain.submit(rich_tx)
    vote = chain.state_change(pubkey, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    chosen, _, stale = _select(chain)
    assert [txid(tx) for tx in chosen] == [vote, rich, cheap]
    assert stale == []


def test_select_stops_adding_at_the_byte_budget(chain):
    a = chain.submit(chain.transfer_tx(ALICE, CAROL.public, COIN))
    chain.submit(chain.transfer_tx(BOB, CAROL.public, COIN))
    size = chain.pool.entries[a].size
    chosen, _, stale = _select(chain, max_bytes=size)
    assert len(chosen) == 1 and stale == []


def test_revalidate_drops_what_a_new_tip_made_invalid(chain):
    sn = key_from_label("sn-1")
    chain.new_node(amount=REGTEST.pool_operator_min)
    stake = chain.submit(chain.stake_tx(BOB, sn.public, 60_000 * COIN))
    transfer = chain.submit(chain.transfer_tx(CAROL, ALICE.public, COIN))
    # A block made elsewhere fills the node first.
    chain.mine_with([chain.stake_tx(ALICE, sn.public, 100_000 * COIN)])
    assert stake not in chain.pool
    assert transfer in chain.pool
