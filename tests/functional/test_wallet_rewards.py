"""The wallet's `rewards`: what a service node paid, read back by the daemon
(`get_service_node_rewards`), equals the coinbase outputs its operator's address got, block by
block, on a real regtest daemon."""

from __future__ import annotations

from snode.core.blocks import Block
from snode.core.encoding import decode
from snode.core.units import format_coins
from snode.params import COIN
from tests.functional.framework import assert_equal, narrator
from tests.functional.sn_helpers import SOLO, mine_until, record
from tests.functional.wallet_helpers import funded, mine, registration_cmd

log = narrator(__name__)


def test_rewards_are_the_coinbase_outputs_the_operator_got(sn, tmp_path):
    log.info("Register the daemon as a solo node (5%% fee) from a funded wallet; mine until it is paid")
    operator = funded(sn, tmp_path, {"operator": SOLO + 100 * COIN})["operator"]
    operator.ok(registration_cmd(sn, operator.address, SOLO, cut="5"), yes=True)
    mine(sn)
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    mine_until(sn, lambda: record(sn, pubkey)["payable"], timeout=60, what="the node payable")
    log.info("A 1,000-block regtest run (issue #38 item 8): mined on to height 1,000")
    mine(sn, 1_000 - sn.get_height()["height"])

    log.info("Every coinbase output to the operator, read from the blocks themselves")
    tip = sn.get_height()["height"]
    assert_equal(tip, 1_000, "the run's height")
    paid = {}
    for height in range(1, tip + 1):
        coinbase = decode(bytes.fromhex(sn.get_block(height=height)["block_hex"]), Block).transactions[0]
        to_operator = sum(o.amount for o in coinbase.outputs if o.owner == operator.public)
        if to_operator:
            paid[height] = to_operator
    assert len(paid) >= 40, paid

    log.info("get_service_node_rewards lists exactly those, and the wallet's rewards says the same")
    found = sn.get_service_node_rewards(service_node_pubkey=pubkey)
    assert_equal({r["height"]: r["amount"] for r in found["rewards"]}, paid)
    assert_equal(found["totals"], [{"address": operator.address, "amount": sum(paid.values())}])
    assert_equal(found["complete"], True)
    lines = operator.ok("rewards").lines
    total = format_coins(sum(paid.values()))
    first, last = min(paid), max(paid)
    assert_equal(lines[0], f"Node {pubkey}: {len(paid)} rewards from height {first} to {last}, {total} coins "
                           f"in all, {total} coins to this wallet.")
    shown = sorted(paid)[-10:]
    assert_equal(lines[1:], [f"  height {h}: {format_coins(paid[h])} coins, {format_coins(paid[h])} coins "
                             "to this wallet" for h in shown])
    log.info("A node that is not registered: one Error line")
    assert operator.refused("rewards " + "11" * 32, "is not a registered service node")
    log.info("A key that is no key: named as stake names it, not in the RPC's words")
    assert operator.refused("rewards abc", "service node public key 'abc' is not 64 hex characters: copy it from "
                                           "get_service_node_key")
