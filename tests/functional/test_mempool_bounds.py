"""A full mempool takes an honest transfer that pays more (issue #33 item 4), against real daemons.

Issue #33: a pool filled at the minimum fee refused an honest transfer paying 100 times the
minimum. Here node0 runs with a pool of 8 transactions (`SNODE_MEMPOOL_MAX_ENTRIES`, regtest and
devnet only) and is filled with 8 transfers at the minimum fee rate; a ninth at the minimum is
refused with the rate it would need, and a transfer paying 100x the minimum, sent to its peer
node1 (default limits) and relayed over P2P, takes the place of one of them on node0. Both
daemons' `get_info` and `get_mempool` agree with what happened, and the next block mines the
rich transfer first.
"""

from __future__ import annotations

from snode.api import errors as E
from snode.core.encoding import encode
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_spend, transfer_at_rate
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    fund,
    narrator,
    spendable_outputs,
    wait_until,
)

POOL_ENTRIES = 8
log = narrator(__name__)


def test_a_full_pool_takes_a_transfer_paying_100x_the_minimum(nodes):
    full = nodes.add(start=False)
    full.start(env={"SNODE_MEMPOOL_MAX_ENTRIES": str(POOL_ENTRIES)})
    peer = nodes.add()
    connect_nodes(peer, full)
    sender, payee = key_from_label("pool sender"), key_from_label("pool payee")
    log.info("Give the sender 10 outputs and wait for them to unlock")
    fund(full, {key_from_label(f"pool coin {i}").public: 2 * COIN for i in range(POOL_ENTRIES + 2)})
    full.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    coins = [spendable_outputs(full, key_from_label(f"pool coin {i}")) for i in range(POOL_ENTRIES + 2)]
    log.info("Fill node0's pool of %d with transfers at the minimum fee", POOL_ENTRIES)
    for i in range(POOL_ENTRIES):
        cheap = build_spend(coins[i], key_from_label(f"pool coin {i}"), [TxOut(payee.public, COIN)], Transfer(),
                            REGTEST)
        full.send_raw_transaction(tx_hex=encode(cheap).hex())
    assert_equal(full.get_info()["mempool_size"], POOL_ENTRIES)
    wait_until(lambda: peer.get_info()["mempool_size"] == POOL_ENTRIES, what="node1 has the 8 relayed")
    ninth = build_spend(coins[POOL_ENTRIES], key_from_label(f"pool coin {POOL_ENTRIES}"),
                        [TxOut(payee.public, COIN)], Transfer(), REGTEST)
    assert_raises_rpc_error(E.TX_REJECTED, "mempool is full: the transaction pays", full.send_raw_transaction,
                            tx_hex=encode(ninth).hex())
    log.info("A transfer paying 100x the minimum, sent to node1, reaches node0 over P2P and is taken")
    last = POOL_ENTRIES + 1
    rich = transfer_at_rate(coins[last][0], key_from_label(f"pool coin {last}"), sender.public,
                            100 * REGTEST.fee_per_byte, REGTEST)
    rich_id = peer.send_raw_transaction(tx_hex=encode(rich).hex())["txid"]
    wait_until(lambda: any(t["txid"] == rich_id for t in full.get_mempool()["transactions"]),
               what="the 100x transfer in node0's full pool")
    pooled = full.get_mempool()["transactions"]
    assert_equal((len(pooled), full.get_info()["mempool_size"]), (POOL_ENTRIES, POOL_ENTRIES))
    assert_equal(peer.get_info()["mempool_size"], POOL_ENTRIES + 1, "node1's pool has room for all")
    log.info("The next block mines it first; both pools lose what the block holds")
    block = full.get_block(hash=full.generate_blocks(blocks=1)["blocks"][0])
    assert_equal(block["tx_ids"][1], rich_id)
    wait_until(lambda: peer.get_info()["height"] == full.get_info()["height"], what="node1 has the block")
    assert_equal(full.get_info()["mempool_size"], 0)
    assert_equal(peer.get_info()["mempool_size"], 1, "the cheap one node0 evicted waits on node1")
