"""Stakes come back, through snode-wallet (issue #13): `request_stake_unlock`, `stakes`,
`balance` and `show_transfers` against real regtest daemons, run as an operator runs them
(`--command`, `--yes`).

A hub mines (every regtest node holds the authority key) and a service node proves its uptime to
it, so the quorum (the authority) activates it; wallets talk to the hub. Regtest: a node leaves
30 blocks after the request, its stakes are spendable 10 blocks after that.
"""

from __future__ import annotations

import pytest

from snode.params import COIN, REGTEST, REGTEST_FAUCET_WORDS
from tests.functional.framework import assert_equal, connect_nodes, narrator, sync_blocks
from tests.functional.sn_helpers import POOL_MIN, SOLO, mine_until, record
from tests.functional.wallet_helpers import Wallet, funded, mine, registration_cmd

log = narrator(__name__)
UNLOCK = REGTEST.unlock_duration
CONFIRMATIONS = REGTEST.unlock_confirmations


def _registered(node, pubkey: str) -> bool:
    return bool(node.get_service_nodes(service_node_pubkeys=[pubkey])["service_node_states"])


def _hub_and_sn(nodes):
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    return hub, sn, sn.get_service_node_key()["service_node_pubkey"]


@pytest.mark.slow
def test_a_solo_operator_unlocks_through_the_wallet_and_spends_the_stake(nodes, tmp_path):
    log.info("A hub, a service node, and an operator wallet paid 200,100 coins")
    hub, sn, pubkey = _hub_and_sn(nodes)
    wallets = funded(hub, tmp_path, {"operator": SOLO + 100 * COIN, "stranger": 10 * COIN})
    operator, stranger = wallets["operator"], wallets["stranger"]
    log.info("Register the node from the wallet and mine until the quorum activates it")
    operator.ok(registration_cmd(sn, operator.address, SOLO), yes=True)
    mine(hub)
    sync_blocks([hub, sn])
    mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=60, what="the node active")

    log.info("Refusals send nothing and say why: a stranger, an unknown node, a bad key")
    stranger.refused(f"request_stake_unlock {pubkey}", "this address has no stake on service node")
    operator.refused(f"request_stake_unlock {'ab' * 32}", "is not registered")
    operator.refused("request_stake_unlock 12345", "is not 64 hex characters")

    log.info("request_stake_unlock shows the node, the stake and the unlock height, and sends on Yes")
    asked = operator.ok(f"request_stake_unlock {pubkey}", yes=True)
    height = hub.get_height()["height"]
    unlock = height + 1 + UNLOCK
    assert f"Service node: {pubkey} (Active)" in asked.lines, asked.out
    assert "Your stake: 200000 coins of 200000 on the node" in asked.lines, asked.out
    assert any(line.startswith(f"It unlocks at height {unlock} (in {UNLOCK + 1} blocks)")
               for line in asked.lines), asked.out
    assert "Transaction sent. Transaction ID:" in asked.out
    mine(hub)
    assert_equal(record(hub, pubkey)["requested_unlock_height"], unlock)
    operator.refused(f"request_stake_unlock {pubkey}", f"already has an unlock request: it unlocks at height {unlock}")

    log.info("stakes and balance show the unlock in the same words and totals; the node stays "
             "active until its height")
    stakes = operator.ok("stakes").lines
    assert stakes[0].endswith(f"unlocking at height {unlock}, returned at height {unlock + 1} "
                              f"(in {unlock - height} blocks)"), stakes
    assert_equal(stakes[-1], "Total staked: 0 coins; unlocking: 200000 coins")
    balance = operator.ok("balance").lines
    assert "Staked: 0 coins on 0 service nodes" in balance, balance
    assert (f"Unlocking: 200000 coins on 1 service node (the first unlocking at height {unlock}, returned at "
            f"height {unlock + 1}, spendable from height {unlock + 1 + CONFIRMATIONS})") in balance, balance
    mine(hub, unlock - hub.get_height()["height"])
    assert record(hub, pubkey)["active"]
    mine(hub)
    assert not _registered(hub, pubkey)

    log.info("The stake came back: show_transfers lists it; %d blocks later the wallet spends it", CONFIRMATIONS)
    transfers = operator.ok("show_transfers").lines
    assert any("stake returned: unlock" in line and "+200000" in line for line in transfers), transfers
    assert any("unlock request" in line for line in transfers), transfers
    mine(hub, CONFIRMATIONS)
    before = operator.balances()
    assert before["unlocked"] >= SOLO, before
    faucet = Wallet(hub, tmp_path, "faucet", words=REGTEST_FAUCET_WORDS)
    operator.ok(f"transfer {faucet.address} 200000", yes=True)
    mine(hub)
    assert operator.balances()["balance"] < before["balance"] - SOLO + COIN  # the stake left, with its fee


@pytest.mark.slow
def test_one_contributor_unlocks_a_pool_and_all_three_get_their_stakes_back(nodes, tmp_path):
    log.info("A pool node: operator 100,000 coins, alice 60,000 and bob 40,000 fill it")
    hub, sn, pubkey = _hub_and_sn(nodes)
    wallets = funded(hub, tmp_path, {"operator": POOL_MIN + 100 * COIN, "alice": 60_100 * COIN,
                                     "bob": 40_100 * COIN})
    operator, alice, bob = wallets["operator"], wallets["alice"], wallets["bob"]
    operator.ok(registration_cmd(sn, operator.address, POOL_MIN, cut="5"), yes=True)
    mine(hub)
    log.info("An open pool cannot be unlocked: it comes back if it is not filled in time")
    operator.refused(f"request_stake_unlock {pubkey}", "is not fully funded: an open pool node cannot be unlocked")
    assert "unless filled by then" in operator.ok("stakes").out
    alice.ok(f"stake {pubkey} 60000", yes=True)
    mine(hub)
    bob.ok(f"stake {pubkey} 100%", yes=True)
    mine(hub)
    sync_blocks([hub, sn])
    mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=60, what="the pool node active")

    log.info("bob (a contributor, not the operator) requests the unlock")
    bob.ok(f"request_stake_unlock {pubkey}", yes=True)
    mine(hub)
    unlock = record(hub, pubkey)["requested_unlock_height"]
    for wallet in (operator, alice):
        assert f"unlocking at height {unlock}" in wallet.ok("stakes").out
    mine(hub, unlock + 1 - hub.get_height()["height"])
    assert not _registered(hub, pubkey)
    log.info("Each of the three sees its own stake returned")
    for wallet, amount in ((operator, 100_000), (alice, 60_000), (bob, 40_000)):
        transfers = wallet.ok("show_transfers").lines
        assert any("stake returned: unlock" in line and f"+{amount}" in line for line in transfers), transfers
    mine(hub, CONFIRMATIONS)
    assert alice.balances()["unlocked"] >= 60_000 * COIN
    assert "No stakes." in bob.ok("stakes").out
