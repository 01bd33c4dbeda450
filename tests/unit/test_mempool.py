"""The mempool (core/mempool.py): admission refusals, selection that skips what no longer
applies on top of what it already chose, and the pool's bounds (issue #33 item 4): eviction by
fee rate with an increment, the floor and its decay, expiry, the caps, the indexes a block's
recheck uses, a reorganisation's return, and the test hook that makes a daemon's pool small."""

from __future__ import annotations

import re

import pytest

from snode.app import config
from snode.common.endpoints import ConfigError
from snode.core import mempool as mp
from snode.core.encoding import encode
from snode.core.errors import InvalidStake, InvalidTransaction, MempoolRejection
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.transactions import OutPoint, Transfer, TxOut, outpoint_key, txid
from snode.core.transition import make_coinbase
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.unit.conftest import node_on

ALICE, BOB, CAROL, DAVE = (key_from_label(x) for x in ("alice", "bob", "carol", "dave"))


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


# --- bounds: eviction by fee rate, the floor, expiry, the caps (issue #33 item 4) -------------

MIN = REGTEST.fee_per_byte
"""The chain's minimum fee rate, atomic units a byte (and the pool's increment)."""


def _coins(chain, key, count: int, amount: int = COIN) -> list:
    """`count` unlocked outputs of `amount` for `key`: one split, mined, then the unlock wait."""
    split = chain.spend(key, Transfer(), [TxOut(key.public, amount)] * count)
    chain.mine_with([split])
    chain.mine(chain.params.unlock_confirmations)
    sid = txid(split)
    return [(OutPoint(sid, i), chain.state.utxos[outpoint_key(sid, i)]) for i in range(count)]


def _paying(chain, key, coin, rate: int):
    """A transfer of `coin` (one of `key`'s) to CAROL paying exactly `rate` atomic units a byte."""
    outpoint, held = coin
    fee = rate * 150
    while True:
        tx = chain.signed([outpoint], [TxOut(CAROL.public, held.amount - fee)], Transfer(), [key])
        if fee == rate * len(encode(tx)):
            return tx
        fee = rate * len(encode(tx))


def _limited(chain, **limits) -> None:
    chain.pool = mp.Mempool(limits=mp.PoolLimits(**limits))


def test_a_full_pool_takes_a_transfer_paying_100x_by_evicting_the_lowest_fee_rate(chain):
    coins = _coins(chain, ALICE, 5)
    _limited(chain, max_entries=4)
    cheap = [chain.submit(_paying(chain, ALICE, c, MIN)) for c in coins[:3]]
    better = chain.submit(_paying(chain, ALICE, coins[3], 3 * MIN))
    with pytest.raises(MempoolRejection, match=f"mempool is full: .* pays {MIN} .* at least {2 * MIN}"):
        chain.submit(_paying(chain, ALICE, coins[4], MIN))
    rich = chain.submit(_paying(chain, ALICE, coins[4], 100 * MIN))
    pool = chain.pool
    assert len(pool) == 4 and rich in pool and better in pool
    assert sum(tx_id in pool for tx_id in cheap) == 2, "one transaction at the minimum made room"
    assert pool.floor.rate == 2 * MIN, "the floor: the evicted rate plus the increment"
    assert pool.total_bytes == sum(e.size for e in pool.entries.values())
    assert len(pool.spent) == 4, "the evicted one's output is free again"


def test_an_arrival_must_beat_each_rate_it_evicts_by_the_increment(chain):
    coins = _coins(chain, ALICE, 4)
    _limited(chain, max_entries=2)
    for c in coins[:2]:
        chain.submit(_paying(chain, ALICE, c, 3 * MIN))
    with pytest.raises(MempoolRejection, match=f"pays {3 * MIN + MIN // 2} .* at least {4 * MIN}"):
        chain.submit(_paying(chain, ALICE, coins[2], 3 * MIN + MIN // 2))
    assert chain.pool.floor.rate == 0, "a refusal evicts nothing and raises nothing"
    chain.submit(_paying(chain, ALICE, coins[2], 4 * MIN))
    assert chain.pool.floor.rate == 4 * MIN


def test_the_byte_cap_evicts_as_many_as_the_arrival_needs(chain):
    coins = _coins(chain, ALICE, 4)
    small = [_paying(chain, ALICE, c, MIN) for c in coins[:3]]
    size = max(len(encode(tx)) for tx in small)
    _limited(chain, max_bytes=3 * size)
    small_ids = [chain.submit(tx) for tx in small]
    # Three outputs of a quarter coin each and the rest as fee: about twice a small one's size.
    big = chain.signed([coins[3][0]], [TxOut(CAROL.public, COIN // 4)] * 3, Transfer(), [ALICE])
    assert 2 * size > len(encode(big)) > size
    chain.submit(big)
    assert txid(big) in chain.pool and chain.pool.total_bytes <= 3 * size
    assert sum(tx_id in chain.pool for tx_id in small_ids) == 1, "two went to make room"


def test_the_floor_holds_until_a_block_comes_then_halves_every_half_life(chain):
    coins = _coins(chain, ALICE, 4)
    _limited(chain, max_entries=2)
    for c in coins[:2]:
        chain.submit(_paying(chain, ALICE, c, MIN))
    chain.submit(_paying(chain, ALICE, coins[2], 10 * MIN))  # evicts one at MIN: the floor is 2 MIN
    pool, now, consensus = chain.pool, chain.now, chain.consensus
    assert mp.floor_rate(pool, consensus, now + 30 * 3600) == 2 * MIN, "no block yet: no decay"
    pool = mp.remove(pool, [e.txid for e in pool.entries.values() if e.rate == MIN])  # room for one
    below = _paying(chain, ALICE, coins[3], 2 * MIN - 1)
    with pytest.raises(MempoolRejection, match=f"needs at least {2 * MIN} .*pool's minimum"):
        mp.admit(pool, below, chain.state, consensus, now=now + 3600)  # there is room: the floor refuses
    pool, _ = mp.after_block(pool, mined=[], spent=[], nodes=[], now=now)
    half = mp.FLOOR_HALFLIFE  # the pool is half full (1 of 2): the whole half-life
    assert mp.floor_rate(pool, consensus, now + half) == pytest.approx(MIN)
    assert mp.floor_rate(pool, consensus, now + 2 * half) == pytest.approx(MIN / 2)
    assert mp.floor_rate(pool, consensus, now + 2 * half + 1) == 0, "below half the increment: gone"
    pool, entry = mp.admit(pool, below, chain.state, consensus, now=now + half)
    assert entry.txid in pool
    emptier = mp.remove(pool, list(pool.entries))  # under a quarter full: a quarter of the half-life
    assert mp.floor_rate(emptier, consensus, now + half // 4) == pytest.approx(MIN)


def test_entries_expire_after_the_expiry_at_the_next_admission_or_block(chain):
    coins = _coins(chain, ALICE, 3)
    old = chain.submit(_paying(chain, ALICE, coins[0], MIN))
    chain.now += mp.POOL_EXPIRY
    kept = chain.submit(_paying(chain, ALICE, coins[1], MIN))
    assert old in chain.pool, "exactly the expiry old: still in"
    chain.now += 1
    chain.submit(_paying(chain, ALICE, coins[2], MIN))
    assert old not in chain.pool and kept in chain.pool
    assert outpoint_key(coins[0][0].txid, coins[0][0].index) not in chain.pool.spent
    pool, _ = mp.after_block(chain.pool, mined=[], spent=[], nodes=[], now=chain.now + mp.POOL_EXPIRY + 1)
    assert len(pool) == 0 and pool.total_bytes == 0 and not pool.by_rate and pool.steps == ()


def test_state_changes_are_neither_evicted_nor_refused_for_room(chain):
    pubkey = chain.new_node()
    coins = _coins(chain, ALICE, 3)
    _limited(chain, max_entries=1)
    cheap = chain.submit(_paying(chain, ALICE, coins[0], MIN))
    vote = chain.state_change(pubkey, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    assert len(chain.pool) == 2 and vote in chain.pool, "over the cap: a state change keeps the network honest"
    with pytest.raises(MempoolRejection, match="full of transactions that cannot be evicted"):
        chain.submit(_paying(chain, ALICE, coins[1], 100 * MIN))  # two would have to go; one can
    assert cheap in chain.pool and vote in chain.pool


def test_after_a_block_double_spends_leave_by_the_index_and_only_what_names_a_changed_node_is_rechecked(chain):
    sn = key_from_label("sn-1")
    chain.new_node(amount=REGTEST.pool_operator_min)
    transfer_tx = chain.transfer_tx(ALICE, CAROL.public, COIN)
    transfer = chain.submit(transfer_tx)
    stake = chain.submit(chain.stake_tx(BOB, sn.public, 60_000 * COIN))
    other = chain.submit(chain.transfer_tx(CAROL, BOB.public, COIN))
    registration = chain.register(key_from_label("contributor-1"), key_from_label("sn-2"), REGTEST.staking_requirement)
    spent = [op.key() for op in transfer_tx.inputs]
    pool, recheck = mp.after_block(chain.pool, mined=[], spent=spent, nodes=[sn.public], now=chain.now)
    assert transfer not in pool and other in pool
    assert sorted(recheck) == sorted([stake, registration]), "the node's stake and the dated registration"
    assert mp.recheck(pool, recheck, chain.state, chain.consensus, now=chain.now) is pool, "all still valid"
    # A block made elsewhere fills the node and spends the transfer's input another way.
    rival = chain.signed(list(transfer_tx.inputs), [TxOut(BOB.public, COIN)], Transfer(), [ALICE])
    chain.mine_with([chain.stake_tx(DAVE, sn.public, 100_000 * COIN), rival])
    assert transfer not in chain.pool and stake not in chain.pool
    assert other in chain.pool and registration in chain.pool


def test_no_pooled_transaction_spends_another_pooled_ones_output(chain):
    parent_tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    parent = chain.submit(parent_tx)
    child_of = lambda: chain.signed([OutPoint(parent, 0)], [TxOut(CAROL.public, COIN // 2)], Transfer(), [BOB])  # noqa: E731
    with pytest.raises(InvalidTransaction, match="does not exist or is already spent"):
        chain.submit(child_of())
    chain.mine()
    assert parent not in chain.pool
    with pytest.raises(InvalidTransaction, match="locked until height"):
        chain.submit(child_of())
    chain.mine(chain.params.unlock_confirmations)
    assert chain.submit(child_of()) in chain.pool


def test_the_rate_index_lists_every_evictable_entry_in_its_step_lowest_first(chain):
    pubkey = chain.new_node()
    coins = _coins(chain, ALICE, 3)
    ids = [chain.submit(_paying(chain, ALICE, c, r * MIN)) for c, r in zip(coins, (7, 1, 3))]
    chain.state_change(pubkey, StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
    pool = chain.pool
    by_step = [list(pool.by_rate[s]) for s in pool.steps]
    assert by_step == [[ids[1]], [ids[2]], [ids[0]]], "state changes are not in it"
    pool = mp.remove(pool, [ids[2]])
    assert [list(pool.by_rate[s]) for s in pool.steps] == [[ids[1]], [ids[0]]]


def test_a_reorganisation_gives_back_what_it_undid_and_rechecks_the_rest_a_few_at_a_time(chain):
    sn = key_from_label("sn-1")
    chain.new_node(amount=REGTEST.pool_operator_min)
    other = chain.fork(at=chain.state.height)  # a second branch from the same tip
    undone = chain.transfer_tx(ALICE, CAROL.public, COIN)
    chain.mine_with([undone])
    node = node_on(chain)
    node.defer_rechecks = True  # as a daemon's writer runs them
    stake = node.submit_transaction(chain.stake_tx(BOB, sn.public, 60_000 * COIN), chain.now)
    spender_tx = chain.transfer_tx(CAROL, BOB.public, COIN)
    spender = node.submit_transaction(spender_tx, chain.now)
    kept = node.submit_transaction(chain.transfer_tx(key_from_label("contributor-2"), BOB.public, COIN), chain.now)
    # The other branch fills the node, spends the pooled spender's input another way, and is longer.
    rival = other.signed(list(spender_tx.inputs), [TxOut(ALICE.public, COIN)], Transfer(), [CAROL])
    other.mine_with([other.stake_tx(DAVE, sn.public, 100_000 * COIN), rival])
    other.mine()
    assert node.reorganize(other.blocks[-2:], other.now)
    pool = node.pool
    assert txid(undone) in pool, "the undone block's transfer is back"
    assert spender not in pool, "a double spend of the new branch leaves at once"
    assert stake in pool and kept in pool, "the rest waits for its recheck"
    assert node.recheck_pool(1) == 1 and node.recheck_pool() == 0, "the two held ones, one at a time"
    assert stake not in node.pool, "the node is full on the new branch"
    assert kept in node.pool and txid(undone) in node.pool


@pytest.mark.parametrize("network, value, message", [
    ("mainnet", "8", "SNODE_MEMPOOL_MAX_ENTRIES is for devnet and regtest tests; unset it to run on mainnet"),
    ("testnet", "8", "unset it to run on testnet"),
    ("regtest", "eight", "'eight' is not a number of transactions"),
    ("devnet", "0", "'0' is not a number of transactions (1 to 1000000)"),
])
def test_the_test_pool_limit_is_one_line_when_wrong_and_refused_where_coins_have_value(
    monkeypatch, network, value, message,
):
    monkeypatch.setenv(config.MEMPOOL_ENTRIES_VARIABLE, value)
    with pytest.raises(ConfigError, match=re.escape(message)):
        config._mempool_max_entries(network)


def test_the_test_pool_limit_sets_the_count_only(monkeypatch):
    monkeypatch.setenv(config.MEMPOOL_ENTRIES_VARIABLE, "8")
    assert config._mempool_max_entries("regtest") == 8
    monkeypatch.delenv(config.MEMPOOL_ENTRIES_VARIABLE)
    assert config._mempool_max_entries("mainnet") is None
