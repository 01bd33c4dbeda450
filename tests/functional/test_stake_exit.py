"""Stakes come back, on regtest with real daemons (issue #13): an unlock request seen by the node's
own daemon and the network until the node leaves; a node stopped for good decommissioned, then
deregistered by the quorum when its downtime credit runs out, its stake locked for the penalty
and then spendable; an unfilled pool node expiring with its contributors refunded.

The wallet's side of the same flows (request_stake_unlock, stakes, balance, show_transfers) is in
test_wallet_unlock.py. Regtest numbers: unlock 30 blocks, deregistration lock 40, pool window 50,
10 confirmations; a node starts with 60 blocks of credit.
"""

from __future__ import annotations

import time

from snode.core.address import encode_address
from snode.core.blocks import Block
from snode.core.encoding import decode, encode
from snode.core.registration import sign_registration
from snode.core.transactions import OutPoint, Reservation, StakeReturn, StateChange, Transfer, TxOut
from snode.core.txbuilder import build_spend, build_unlock_request
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    narrator,
    send_spend,
    snode_cli,
    sync_blocks,
)
from tests.functional.sn_helpers import (
    POOL_MIN,
    SOLO,
    fund_and_unlock,
    mine_until,
    move_clocks,
    record,
    registered_solo,
    stake,
)

log = narrator(__name__)
CONFIRMATIONS = REGTEST.unlock_confirmations


def _address(key) -> str:
    return encode_address(REGTEST.address_prefix, key.public)


def _block(node, height: int) -> Block:
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block)


def _registered(node, pubkey: str) -> bool:
    return bool(node.get_service_nodes(service_node_pubkeys=[pubkey])["service_node_states"])


def _active_solo_node(nodes, label: str):
    """A hub, a service node connected to it, registered solo by `label`'s key and active."""
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    pubkey = registered_solo(hub, sn, label)
    return hub, sn, key_from_label(label), pubkey


def test_an_unlock_request_keeps_the_node_working_until_its_height_then_returns_the_stake(nodes):
    log.info("Start a hub and an active solo service node")
    hub, sn, operator, pubkey = _active_solo_node(nodes, "exit op unlock")
    log.info("The operator signs an unlock request; a stranger's is refused with the reason")
    stranger = key_from_label("exit stranger")
    assert_raises_rpc_error(None, "this address has no stake on service node", hub.send_raw_transaction,
                            tx_hex=encode(build_unlock_request(stranger, bytes.fromhex(pubkey), REGTEST)).hex())
    hub.send_raw_transaction(tx_hex=encode(build_unlock_request(operator, bytes.fromhex(pubkey), REGTEST)).hex())
    requested = hub.generate_blocks(blocks=1)["height"]
    unlock = requested + REGTEST.unlock_duration
    rec = record(hub, pubkey)
    assert_equal((rec["requested_unlock_height"], rec["leaves_at"], rec["state_height"]),
                 (unlock, unlock + 1, requested))
    assert_raises_rpc_error(None, f"already has an unlock request: it unlocks at height {unlock}",
                            hub.send_raw_transaction,
                            tx_hex=encode(build_unlock_request(operator, bytes.fromhex(pubkey), REGTEST)).hex())
    log.info("The node's own status line and snode-cli nodes show the unlock height")
    sync_blocks([hub, sn])
    assert f"SN: Active (unlocking at {unlock}), proof: " in sn.get_info()["status_line"]
    table = snode_cli(hub, "nodes").stdout
    assert any(pubkey[:12] in line and str(unlock) in line for line in table.splitlines()), table
    locked = hub.get_locked_stakes(address=_address(operator))["stakes"]
    assert_equal([(s["state"], s["amount"], s["unlock_height"]) for s in locked], [("unlocking", SOLO, unlock)])

    log.info("Mine to the unlock height: still registered and active; one block more removes it")
    hub.generate_blocks(blocks=unlock - requested)
    assert record(hub, pubkey)["active"]
    left = hub.generate_blocks(blocks=1)["height"]
    assert not _registered(hub, pubkey)
    returned = _block(hub, left).transactions[1]
    assert_equal(returned.payload, StakeReturn(bytes.fromhex(pubkey), 1))
    assert_equal(hub.get_transaction(txid=hub.get_block(height=left)["tx_ids"][1])["kind"], "stake_return")
    sync_blocks([hub, sn])
    assert (f", SN: unlocked at height {left}; stakes returned, spendable from height {left + CONFIRMATIONS}"
            in sn.get_info()["status_line"]), "not `not registered`: the chain knew the key (issue #38)"
    assert_equal(hub.get_locked_stakes(address=_address(operator))["stakes"], [])

    log.info("After %d confirmations the operator spends the whole stake", CONFIRMATIONS)
    hub.generate_blocks(blocks=CONFIRMATIONS - 1)
    send_spend(hub, operator, [TxOut(key_from_label("exit payee").public, SOLO - COIN)], Transfer())
    hub.generate_blocks(blocks=1)


def test_a_node_stopped_for_good_is_deregistered_and_its_stake_locked_for_the_penalty(nodes):
    log.info("Start a hub and an active solo service node, then stop the node for good")
    hub, sn, operator, pubkey = _active_solo_node(nodes, "exit op dereg")
    sn.stop()
    later = int(time.time()) + 40
    move_clocks([hub], later, proving=[], judges=[hub])
    mine_until(hub, lambda: not record(hub, pubkey)["active"], timeout=30, what="the node decommissioned")
    rec = record(hub, pubkey)
    credit = rec["earned_downtime_blocks"]
    assert_equal((rec["last_decommission_reason"], credit), ("missed_uptime_proofs", REGTEST.credit_initial))

    log.info("Its credit runs down a block per block: mine %d blocks, then the quorum deregisters it", credit)
    hub.generate_blocks(blocks=credit - 2)
    assert_equal(record(hub, pubkey)["earned_downtime_blocks"], 2)
    mine_until(hub, lambda: not _registered(hub, pubkey), timeout=30, what="the node deregistered")
    height = hub.get_info()["height"]
    change = None
    for h in range(height, height - 4, -1):
        for tx in _block(hub, h).transactions:
            if isinstance(tx.payload, StateChange) and tx.payload.kind == 4:
                change, at = tx.payload, h
    assert change is not None, "no block holds the deregistration"
    assert_equal(change.reason, 2)  # missed_uptime_proofs, on-chain
    locked_until = at + REGTEST.deregistration_lock
    (stake_row,) = hub.get_locked_stakes(address=_address(operator))["stakes"]
    assert_equal((stake_row["state"], stake_row["amount"], stake_row["unlock_height"], stake_row["reason"]),
                 ("deregistered", SOLO, locked_until, "missed_uptime_proofs"))

    log.info("Spending the returned stake is refused until height %d, then it goes through", locked_until)
    txid_hex, index = stake_row["output"].split(":")
    spend = build_spend([(OutPoint(bytes.fromhex(txid_hex), int(index)), _utxo(operator, SOLO, locked_until))],
                        operator, [TxOut(key_from_label("exit payee").public, SOLO - COIN)], Transfer(), REGTEST)
    assert_raises_rpc_error(None, f"locked until height {locked_until}", hub.send_raw_transaction,
                            tx_hex=encode(spend).hex())
    hub.generate_blocks(blocks=locked_until - 1 - hub.get_info()["height"])
    hub.send_raw_transaction(tx_hex=encode(spend).hex())
    hub.generate_blocks(blocks=1)
    assert_equal(hub.get_locked_stakes(address=_address(operator))["stakes"], [])


def _utxo(key, amount: int, unlock: int):
    from snode.core.state import UtxoEntry
    return UtxoEntry(key.public, amount, unlock)


def test_an_unfilled_pool_node_expires_and_its_contributors_are_refunded(nodes):
    log.info("Register a pool node with 100,000 coins; a contributor stakes 30,000; nobody fills it")
    hub = nodes.add()
    operator, contributor = key_from_label("exit pool op"), key_from_label("exit pool c1")
    sn_key = key_from_label("exit pool sn")
    fund_and_unlock(hub, {operator.public: POOL_MIN + COIN, contributor.public: 30_000 * COIN + COIN})
    reg = sign_registration(sn_key, REGTEST, 0, (Reservation(operator.public, POOL_MIN),),
                            int(time.time()) + REGTEST.registration_validity)
    send_spend(hub, operator, [], reg)
    registered = hub.generate_blocks(blocks=1)["height"]
    pubkey = sn_key.public.hex()
    stake(hub, contributor, pubkey, 30_000 * COIN)
    hub.generate_blocks(blocks=1)
    expires = registered + REGTEST.pool_fill_window + 1
    assert_equal(record(hub, pubkey)["leaves_at"], expires)
    (row,) = hub.get_locked_stakes(address=_address(contributor))["stakes"]
    assert_equal((row["state"], row["amount"], row["leaves_at"]), ("staked", 30_000 * COIN, expires))

    log.info("At height %d the pool expires: both stakes come back", expires)
    hub.generate_blocks(blocks=expires - 1 - hub.get_info()["height"])
    assert _registered(hub, pubkey)
    hub.generate_blocks(blocks=1)
    assert not _registered(hub, pubkey)
    returned = _block(hub, expires).transactions[1]
    assert_equal(returned.payload, StakeReturn(sn_key.public, 2))
    assert_equal(returned.outputs, (TxOut(operator.public, POOL_MIN), TxOut(contributor.public, 30_000 * COIN)))
    hub.generate_blocks(blocks=CONFIRMATIONS)
    send_spend(hub, contributor, [TxOut(operator.public, 30_000 * COIN)], Transfer())
    hub.generate_blocks(blocks=1)
