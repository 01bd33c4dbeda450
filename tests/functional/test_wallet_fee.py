"""A wallet pays what its daemon's pool takes after a spam wave (issue #33 follow-up), against a
real daemon and the real `snode-wallet`.

The hostile bench found every pool's floor at about twice the minimum after one eviction, falling
back over a quarter of an hour, while snode-wallet paid the chain's minimum: no transfer, stake or
registration was taken meanwhile. Here a regtest daemon with a pool of 8 (`SNODE_MEMPOOL_MAX_ENTRIES`)
is filled with transfers at the minimum and one paying 100x evicts one, so its floor rises;
`get_info` says the pool's minimum, a transfer at the chain's minimum is refused with it, and a
plain `snode-wallet transfer` pays that rate plus the wallet's margin, is taken into the full pool
and mined by the next block. An operator's registration is taken likewise; a pool that rises
between the wallet's question and the Yes gets one Error line with its rate, nothing sent, and the
same command run again is taken.
"""

from __future__ import annotations

import subprocess
import sys

from snode.api import errors as E
from snode.core.encoding import encode
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_spend, transfer_at_rate
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from snode.wallet.logic import fee_rate
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    fund,
    narrator,
    scaled,
    spendable_outputs,
    wait_until,
)
from tests.functional.sn_helpers import SOLO
from tests.functional.wallet_helpers import Wallet, registration_cmd

POOL_ENTRIES = 8
log = narrator(__name__)
PAYEE = key_from_label("fee payee")


def _coin(node, i: int):
    return spendable_outputs(node, key_from_label(f"fee coin {i}"))


def _cheap(node, i: int):
    """Spam coin i's transfer at the chain's minimum fee rate."""
    return build_spend(_coin(node, i), key_from_label(f"fee coin {i}"), [TxOut(PAYEE.public, COIN)], Transfer(),
                       REGTEST)


def _fill_and_raise(node) -> None:
    """Fill node's pool with transfers at the minimum, then evict one with a transfer paying 100x."""
    for i in range(POOL_ENTRIES):
        node.send_raw_transaction(tx_hex=encode(_cheap(node, i)).hex())
    (coin,) = _coin(node, POOL_ENTRIES)
    rich = transfer_at_rate(coin, key_from_label(f"fee coin {POOL_ENTRIES}"), PAYEE.public,
                            100 * REGTEST.fee_per_byte, REGTEST)
    node.send_raw_transaction(tx_hex=encode(rich).hex())


def _small_pool_and_wallets(nodes, tmp_path, extra_args=None, paid=10 * COIN):
    """A regtest daemon with a pool of POOL_ENTRIES, the spam coins and a wallet paid `paid`, unlocked."""
    node = nodes.add(start=False, extra_args=extra_args)
    node.start(env={"SNODE_MEMPOOL_MAX_ENTRIES": str(POOL_ENTRIES)})
    assert_equal(node.get_info()["mempool_min_fee_rate"], REGTEST.fee_per_byte, "an empty pool: the minimum")
    payer, other = Wallet(node, tmp_path, "payer"), Wallet(node, tmp_path, "other")
    log.info("Fund %d spam coins and the wallet, and wait for them to unlock", POOL_ENTRIES + 2)
    fund(node, {**{key_from_label(f"fee coin {i}").public: 2 * COIN for i in range(POOL_ENTRIES + 2)},
                payer.public: paid})
    node.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    return node, payer, other


def test_a_wallet_transfer_is_taken_and_mined_while_the_pool_floor_is_raised(nodes, tmp_path):
    node, payer, other = _small_pool_and_wallets(nodes, tmp_path)
    log.info("Fill the pool of %d at the minimum fee; one paying 100x evicts one and raises the floor", POOL_ENTRIES)
    _fill_and_raise(node)
    info = node.get_info()
    rate = info["mempool_min_fee_rate"]
    assert_equal(info["mempool_size"], POOL_ENTRIES)
    assert rate >= 2 * REGTEST.fee_per_byte, f"the raised floor: {rate}"
    log.info("get_info says %d a byte; a transfer at the chain's minimum is refused (what the wallet paid before)",
             rate)
    assert_raises_rpc_error(E.TX_REJECTED, "needs at least", node.send_raw_transaction,
                            tx_hex=encode(_cheap(node, POOL_ENTRIES + 1)).hex())
    log.info("A plain snode-wallet transfer pays the pool's rate plus the margin and is taken")
    sent = payer.ok(f"transfer {other.address} 1", yes=True)
    tx_id = sent.txid()
    pooled = {t["txid"]: t for t in node.get_mempool()["transactions"]}
    assert tx_id in pooled, sent.out
    paid = pooled[tx_id]["fee"] / pooled[tx_id]["size"]
    assert fee_rate(rate, REGTEST.fee_per_byte) <= paid < 1.1 * fee_rate(rate, REGTEST.fee_per_byte), paid
    assert any(line.startswith("Fee: ") for line in sent.lines), sent.out
    log.info("The next block mines it")
    block = node.get_block(hash=node.generate_blocks(blocks=1)["blocks"][0])
    assert tx_id in block["tx_ids"]
    assert_equal(other.balances()["balance"], COIN)


def test_a_pool_that_rises_between_the_prompt_and_yes_gets_one_line_and_the_next_try_is_taken(nodes, tmp_path):
    node, payer, other = _small_pool_and_wallets(nodes, tmp_path)
    log.info("The wallet builds a transfer at the chain's minimum (the pool is empty) and asks")
    out_path = tmp_path / "transfer.out"
    with open(out_path, "w") as out:
        wallet = subprocess.Popen(
            [sys.executable, "-m", "snode.wallet", *payer.args(), "--command", f"transfer {other.address} 1"],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        wait_until(lambda: "(Yes/No)" in out_path.read_text(), what="the wallet's question")
        log.info("Before the Yes, a spam wave fills the pool and raises its floor")
        _fill_and_raise(node)
        rate = node.get_info()["mempool_min_fee_rate"]
        assert wallet.stdin is not None
        wallet.stdin.write("Yes\n")
        wallet.stdin.close()
        assert_equal(wallet.wait(timeout=scaled(60)), 1)
    finally:
        if wallet.poll() is None:
            wallet.kill()
            wallet.wait()
    errors = [line for line in out_path.read_text().splitlines() if line.startswith("Error:")]
    log.info("The refusal: %s", errors)
    assert len(errors) == 1 and "the daemon's mempool now asks at least" in errors[0], out_path.read_text()
    assert "nothing was sent: run the command again" in errors[0] and "Traceback" not in out_path.read_text()
    assert_equal(node.get_info()["mempool_size"], POOL_ENTRIES)
    log.info("Run again, the transfer pays the pool's %d a byte plus the margin and is taken", rate)
    tx_id = payer.ok(f"transfer {other.address} 1", yes=True).txid()
    assert tx_id in {t["txid"] for t in node.get_mempool()["transactions"]}


def test_an_operator_registers_right_after_a_spam_wave(nodes, tmp_path):
    sn, operator, _ = _small_pool_and_wallets(nodes, tmp_path, ["--service-node"], SOLO + 10 * COIN)
    log.info("A spam wave fills the service node daemon's pool and raises its floor")
    _fill_and_raise(sn)
    rate = sn.get_info()["mempool_min_fee_rate"]
    assert rate >= 2 * REGTEST.fee_per_byte, rate
    log.info("The operator pastes the registration command: it pays %d a byte plus the margin", rate)
    done = operator.ok(registration_cmd(sn, operator.address, SOLO), yes=True)
    tx_id = done.txid()
    pooled = {t["txid"]: t for t in sn.get_mempool()["transactions"]}
    assert tx_id in pooled and pooled[tx_id]["kind"] == "registration", done.out
    assert pooled[tx_id]["fee"] / pooled[tx_id]["size"] >= fee_rate(rate, REGTEST.fee_per_byte)
    assert any(line.startswith("Transaction fee: ") for line in done.lines), done.out
    log.info("The next block mines it: the node is registered")
    sn.generate_blocks(blocks=1)
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    listed = sn.get_service_nodes(service_node_pubkeys=[pubkey])["service_node_states"]
    assert_equal([r["service_node_pubkey"] for r in listed], [pubkey])
