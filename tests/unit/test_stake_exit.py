"""Stakes come back (issue #13): unlock requests, the exit of a node, pool expiry, downtime credit
and deregistration, each with its refusals and an exact undo; every block is made and checked
by the real core (regtest numbers: unlock 30 blocks, deregistration lock 40, pool window 50,
credit 60 at activation, one block earned per 30 up)."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.credit import credit_after_recommission, credit_at
from snode.core.errors import BadSignature, InvalidBlock, InvalidStateChange, InvalidTransaction, MempoolRejection
from snode.core.service_nodes import Reason, StateChangeKind, reward_winner_from_queue, status_words
from snode.core.stake_exit import ReturnReason, stake_return_tx, stake_returns
from snode.core.state import registry_index, undo_block
from snode.core.transactions import StakeReturn, StateChange, Transaction, TxOut, UnlockRequest, txid
from snode.core.transition import apply_block
from snode.core.txbuilder import build_unlock_request
from snode.devchain import key_from_label
from snode.params import COIN, MAINNET, REGTEST
from tests.unit.conftest import POOL_MINIMUM, REQUIREMENT
from tests.unit.conftest import credit_record as _record

OPERATOR, ALICE, BOB, CAROL = (key_from_label(x) for x in ("operator", "alice", "bob", "carol"))
UNLOCK = REGTEST.unlock_duration
CONFIRMATIONS = REGTEST.unlock_confirmations


def active_node(chain, operator=OPERATOR, label="sn-1", amount=REQUIREMENT, reserved=()):
    pubkey = chain.new_node(operator=_label(operator), sn_label=label, amount=amount, reserved=reserved)
    for key, share in reserved:
        chain.stake(key, pubkey, share)
    chain.mine()
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    return pubkey


def _label(key) -> str:
    return {OPERATOR.public: "operator", ALICE.public: "alice", BOB.public: "bob", CAROL.public: "carol"}[key.public]


def outputs_of(chain, owner: bytes, tx: Transaction) -> list[tuple[int, int]]:
    """(amount, unlock height) of tx's outputs to owner, as the state holds them."""
    tx_id = txid(tx)
    found = []
    for i, out in enumerate(tx.outputs):
        entry = chain.state.utxos.get(tx_id + i.to_bytes(2, "big"))
        if out.owner == owner and entry is not None:
            found.append((entry.amount, entry.unlock_height))
    return found


# --- unlock requests ----------------------------------------------------------------------

def test_a_solo_operator_unlocks_the_node_leaves_after_the_unlock_duration_and_the_stake_comes_back(chain):
    pubkey = active_node(chain)
    chain.request_unlock(OPERATOR, pubkey)
    chain.mine()
    requested_at = chain.state.height
    node = chain.node(pubkey)
    assert node.requested_unlock_height == requested_at + UNLOCK
    assert node.leaves_at == requested_at + UNLOCK + 1
    chain.mine_to(requested_at + UNLOCK)
    assert chain.node(pubkey).active  # working (and earning) until its unlock height
    block = chain.mine()[0]
    assert pubkey not in chain.state.service_nodes
    returned = block.transactions[1]
    assert returned.payload == StakeReturn(pubkey, ReturnReason.UNLOCK)
    assert outputs_of(chain, OPERATOR.public, returned) == [(REQUIREMENT, block.header.height + CONFIRMATIONS)]
    # Spendable after the usual confirmations: the operator sends the whole stake on.
    chain.mine(CONFIRMATIONS)
    chain.transfer(OPERATOR, BOB.public, REQUIREMENT - 10 * COIN)
    chain.mine()


def test_rewards_are_never_paid_to_a_node_past_its_unlock_height(chain):
    pubkey = active_node(chain)
    chain.request_unlock(OPERATOR, pubkey)
    chain.mine()
    unlock = chain.node(pubkey).requested_unlock_height
    chain.mine_to(unlock - 1)
    assert _winner(chain, unlock) == pubkey  # the parent of block `unlock`: still paid
    chain.mine()
    assert _winner(chain, unlock + 1) is None  # the block that removes it pays nobody's stake
    coinbase = chain.mine()[0].transactions[0]
    assert [o.owner for o in coinbase.outputs] == [chain.authority.public]


def _winner(chain, height: int) -> bytes | None:
    state = chain.state
    sn = reward_winner_from_queue(registry_index(state).reward_queue, state.service_nodes, height, chain.params)
    return sn.pubkey if sn is not None else None


def test_a_pool_node_with_three_contributors_returns_every_stake_when_one_asks(chain):
    pubkey = active_node(chain, amount=POOL_MINIMUM, reserved=((ALICE, 60_000 * COIN), (BOB, 40_000 * COIN)))
    chain.request_unlock(BOB, pubkey)
    chain.mine()
    chain.mine_to(chain.node(pubkey).leaves_at)
    returned = chain.blocks[-1].transactions[1]
    assert returned.outputs == (
        TxOut(OPERATOR.public, POOL_MINIMUM), TxOut(ALICE.public, 60_000 * COIN), TxOut(BOB.public, 40_000 * COIN),
    )
    assert pubkey not in chain.state.service_nodes


def test_a_second_unlock_request_for_a_node_is_refused_while_the_first_waits_in_the_mempool(chain):
    pubkey = active_node(chain, amount=POOL_MINIMUM, reserved=((ALICE, 60_000 * COIN), (BOB, 40_000 * COIN)))
    first = chain.request_unlock(BOB, pubkey)
    with pytest.raises(MempoolRejection, match=(
            f"an unlock request for this service node is already in the mempool \\(transaction "
            f"{first.hex()[:16]}\\); once it is mined every stake on the node comes back")):
        chain.request_unlock(ALICE, pubkey)
    chain.mine()
    assert chain.node(pubkey).requested_unlock_height > 0


@pytest.mark.parametrize("who", ["stranger", "second", "unregistered", "unfunded"])
def test_unlock_refusals_say_why(chain, who):
    if who == "unfunded":
        pubkey = chain.new_node(amount=POOL_MINIMUM)
    else:
        pubkey = active_node(chain)
    key = OPERATOR
    if who == "stranger":
        key = CAROL
    elif who == "second":
        chain.request_unlock(OPERATOR, pubkey)
        chain.mine()
    elif who == "unregistered":
        pubkey = key_from_label("nobody").public
    expected = {
        "stranger": "this address has no stake on service node",
        "second": f"already has an unlock request: it unlocks at height {chain.state.height + UNLOCK}",
        "unregistered": "is not registered",
        "unfunded": "is not fully funded: an open pool node cannot be unlocked",
    }[who]
    with pytest.raises(InvalidTransaction, match=expected):
        chain.request_unlock(key, pubkey)


def test_an_unlock_request_signed_by_another_key_or_carrying_coins_is_refused(chain):
    pubkey = active_node(chain)
    forged = msgspec.structs.replace(build_unlock_request(CAROL, pubkey, chain.params),
                                     payload=UnlockRequest(pubkey, OPERATOR.public))
    with pytest.raises(BadSignature):
        chain.submit(forged)
    with pytest.raises(InvalidBlock, match="bad signature|signature"):
        chain.mine_with([forged])
    padded = msgspec.structs.replace(build_unlock_request(OPERATOR, pubkey, chain.params),
                                     outputs=(TxOut(OPERATOR.public, COIN),))
    with pytest.raises(InvalidTransaction, match="no inputs and no outputs"):
        chain.submit(padded)


def test_a_stake_return_cannot_be_sent_and_a_block_must_carry_each_one_due(chain):
    pubkey = active_node(chain)
    chain.request_unlock(OPERATOR, pubkey)
    chain.mine()
    node = chain.node(pubkey)
    with pytest.raises(InvalidTransaction, match="made by the block rules"):
        chain.submit(stake_return_tx(node))
    chain.mine_to(node.leaves_at - 2)
    assert stake_returns(chain.state, chain.state.height + 1) == []
    with pytest.raises(InvalidBlock, match="made by the block rules"):
        chain.mine_with([stake_return_tx(node)])  # one block too early
    chain.mine()
    with pytest.raises(InvalidBlock, match="does not return the stakes of service node"):
        chain.mine_with([])  # the due return left out
    assert stake_returns(chain.state, chain.state.height + 1) == [stake_return_tx(chain.node(pubkey))]


def test_each_exit_is_undone_exactly(chain):
    pubkey = active_node(chain, amount=POOL_MINIMUM, reserved=((ALICE, POOL_MINIMUM),))
    chain.request_unlock(ALICE, pubkey)
    chain.mine()
    chain.mine_to(chain.node(pubkey).leaves_at - 1)
    parent = chain.state
    chain.mine()
    assert pubkey not in chain.state.service_nodes
    restored = undo_block(chain.state, chain.undos[-1])
    assert restored == parent
    assert restored.index is not None and restored.index.leaving == registry_index(parent).leaving
    # Applied again on the restored state, the same block gives the same state.
    again, _ = apply_block(restored, chain.blocks[-1], chain.consensus)
    assert again == chain.state


# --- pool expiry --------------------------------------------------------------------------

def test_an_unfilled_pool_node_expires_and_its_contributors_are_refunded(chain):
    pubkey = chain.new_node(amount=POOL_MINIMUM, reserved=((ALICE, 20_000 * COIN),))
    chain.stake(ALICE, pubkey, 20_000 * COIN)
    chain.mine()
    node = chain.node(pubkey)
    assert node.leaves_at == node.registration_height + REGTEST.pool_fill_window + 1
    chain.mine_to(node.leaves_at - 1)
    parent = chain.state
    block = chain.mine()[0]
    returned = block.transactions[1]
    assert returned.payload == StakeReturn(pubkey, ReturnReason.POOL_EXPIRED)
    assert returned.outputs == (TxOut(OPERATOR.public, POOL_MINIMUM), TxOut(ALICE.public, 20_000 * COIN))
    assert undo_block(chain.state, chain.undos[-1]) == parent


def test_a_pool_filled_in_time_does_not_expire(chain):
    pubkey = chain.new_node(amount=POOL_MINIMUM)
    chain.mine(REGTEST.pool_fill_window - 3)
    chain.stake(ALICE, pubkey, POOL_MINIMUM)
    chain.mine()
    node = chain.node(pubkey)
    assert node.funded and node.leaves_at == 0
    chain.mine(10)
    assert pubkey in chain.state.service_nodes


# --- downtime credit ----------------------------------------------------------------------

@pytest.mark.parametrize(("active", "credit", "since", "height", "expected"), [
    # Active on mainnet: +1 block per 30 up (24 a day of 720), capped at 1,440.
    (True, 60, 100, 100, 60), (True, 60, 100, 129, 60), (True, 60, 100, 130, 61),
    (True, 60, 100, 100 + 720, 84), (True, 60, 100, 100 + 30 * 720, 780),
    (True, 60, 100, 100 + 60 * 720, 1_440), (True, 1_440, 0, 10**6, 1_440),
    # Decommissioned: one block per block, never below 0.
    (False, 84, 1_000, 1_000, 84), (False, 84, 1_000, 1_050, 34), (False, 84, 1_000, 1_084, 0),
    (False, 84, 1_000, 5_000, 0),
])
def test_credit_against_a_hand_computed_table(active, credit, since, height, expected):
    assert credit_at(_record(active=active, credit=credit, since=since), height, MAINNET) == expected


@pytest.mark.parametrize(("credit", "since", "height", "expected"), [
    (84, 1_000, 1_000, 84), (84, 1_000, 1_010, 64), (84, 1_000, 1_042, 0), (84, 1_000, 1_100, 0),
])
def test_recommission_charges_twice_the_blocks_decommissioned(credit, since, height, expected):
    assert credit_after_recommission(_record(active=False, credit=credit, since=since), height) == expected


def test_credit_runs_out_only_while_decommissioned():
    decommissioned = _record(active=False, credit=84, since=1_000)
    assert [credit_at(decommissioned, h, MAINNET) for h in (1_083, 1_084, 2_000)] == [1, 0, 0]
    assert credit_at(_record(active=True, credit=84, since=1_000), 1_300, MAINNET) == 94  # earns instead
    assert credit_at(_record(active=False, credit=60, since=5, funded=False), 11_000, MAINNET) == 60
    assert credit_at(_record(active=False, credit=60, since=5, activated=False), 11_000, MAINNET) == 60


def test_the_status_line_state_is_the_node_tables_word_with_its_qualifiers():
    """Issue #24 item 5: one vocabulary (Active, Decomm, Await) on the status line and in the
    node table; a note in parentheses for a node not activated yet and for an unlock request."""
    assert status_words(_record(active=True, credit=60, since=1)) == "Active"
    assert status_words(_record(active=False, credit=60, since=1)) == "Decomm"
    assert status_words(_record(active=False, credit=60, since=1, activated=False)) == "Decomm (not activated yet)"
    assert status_words(_record(active=False, credit=60, since=1, funded=False, activated=False)) == "Await"
    unlocking = msgspec.structs.replace(_record(active=True, credit=60, since=1), requested_unlock_height=500)
    assert status_words(unlocking) == "Active (unlocking at 500)"


def test_a_funded_node_never_activated_spends_no_credit_before_its_activation():
    """Issue #24 item 5: a funded node waiting for the quorum to see its first proof is not down
    (its credit fell to 59 the block after funding, and it would have been deregistered)."""
    waiting = _record(active=False, credit=60, since=5, activated=False)
    assert credit_at(waiting, 5 + 10_000, MAINNET) == 60
    assert credit_at(_record(active=False, credit=60, since=5), 5 + 1, MAINNET) == 59  # decommissioned: spends


def test_state_changes_keep_the_credit_books(chain):
    pubkey = active_node(chain)
    activated = chain.state.height
    assert (chain.node(pubkey).credit, chain.node(pubkey).credit_height) == (60, activated)
    chain.mine(90)
    height = chain.change_state(pubkey, StateChangeKind.DECOMMISSION)
    node = chain.node(pubkey)
    assert (node.credit, node.credit_height) == (60 + (height - activated) // 30, height)
    chain.mine(9)
    back = chain.change_state(pubkey, StateChangeKind.RECOMMISSION)
    assert chain.node(pubkey).credit == node.credit - 2 * (back - height)


# --- deregistration -----------------------------------------------------------------------

def test_a_decommissioned_node_is_deregistered_when_its_credit_runs_out_and_its_stakes_stay_locked(chain):
    pubkey = active_node(chain, amount=POOL_MINIMUM, reserved=((ALICE, POOL_MINIMUM),))
    chain.change_state(pubkey, StateChangeKind.DECOMMISSION)
    node = chain.node(pubkey)
    runs_out = node.credit_height + 60
    assert credit_at(node, runs_out - 1, chain.params) == 1 and credit_at(node, runs_out, chain.params) == 0
    chain.mine_to(runs_out - 2)
    with pytest.raises(InvalidStateChange, match="still has 1 blocks of downtime credit"):
        chain.state_change(pubkey, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    chain.mine()
    parent = chain.state
    chain.state_change(pubkey, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    block = chain.mine()[0]
    height = block.header.height
    assert pubkey not in chain.state.service_nodes
    (change,) = [tx for tx in block.transactions if isinstance(tx.payload, StateChange)]
    assert change.payload.reason == Reason.MISSED_UPTIME_PROOFS
    locked_until = height + REGTEST.deregistration_lock
    assert outputs_of(chain, ALICE.public, change) == [(POOL_MINIMUM, locked_until)]
    assert undo_block(chain.state, chain.undos[-1]) == parent
    chain.mine_to(locked_until - 2)
    with pytest.raises(InvalidTransaction, match=f"locked until height {locked_until}"):
        chain.submit(chain.signed([_outpoint(change, 1)], [TxOut(BOB.public, COIN)], _transfer(), [ALICE]))
    chain.mine()
    chain.submit(chain.signed([_outpoint(change, 1)], [TxOut(BOB.public, POOL_MINIMUM - COIN)], _transfer(), [ALICE]))
    chain.mine()


def test_an_active_node_without_the_minimum_credit_is_deregistered_not_decommissioned(chain):
    pubkey = active_node(chain)
    chain.change_state(pubkey, StateChangeKind.DECOMMISSION)
    chain.mine(5)
    chain.change_state(pubkey, StateChangeKind.RECOMMISSION)  # 60 - 2 x 6 = 48 blocks left
    assert chain.node(pubkey).credit == 48
    with pytest.raises(InvalidStateChange, match="below the minimum of 60 for a decommission"):
        chain.state_change(pubkey, StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)
    chain.state_change(pubkey, StateChangeKind.DEREGISTER, Reason.MISSED_BLOCK_PRODUCTION)
    chain.mine()
    assert pubkey not in chain.state.service_nodes


def test_a_deregistration_must_return_exactly_the_stakes(chain):
    pubkey = active_node(chain)
    chain.change_state(pubkey, StateChangeKind.DECOMMISSION)
    chain.mine(60)
    chain.state_change(pubkey, StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    (entry,) = chain.pool.entries.values()
    chain.pool = type(chain.pool)()
    stolen = msgspec.structs.replace(entry.tx, outputs=(TxOut(CAROL.public, REQUIREMENT),))
    with pytest.raises(InvalidTransaction, match="must return each contribution to its owner"):
        chain.submit(stolen)
    with pytest.raises(InvalidStateChange, match="needs a failure as its reason"):
        chain.state_change(pubkey, StateChangeKind.DEREGISTER, Reason.UPTIME_PROOFS_RESUMED)
    with pytest.raises(InvalidTransaction, match="only a deregistration's state change has outputs"):
        chain.submit(msgspec.structs.replace(entry.tx, payload=msgspec.structs.replace(
            entry.tx.payload, kind=StateChangeKind.RECOMMISSION)))


def _outpoint(tx: Transaction, index: int):
    from snode.core.transactions import OutPoint
    return OutPoint(txid(tx), index)


def _transfer():
    from snode.core.transactions import Transfer
    return Transfer()
