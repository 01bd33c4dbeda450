"""The wallet pays what its daemon's pool asks (issue #33 follow-up): get_info's
`mempool_min_fee_rate` (rpc/answers.py), the fee at a rate (core/txbuilder.py), the wallet's
margin above a raised pool (wallet/logic.py), and what the wallet does with an older daemon and
with a refusal by the pool at submit (wallet/service.py)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from snode.api.types import OutputsResult
from snode.core import mempool as mp
from snode.core.address import encode_address
from snode.core.encoding import encode
from snode.core.errors import InvalidTransaction, MempoolRejection
from snode.core.transactions import OutPoint, Transfer, TxOut, outpoint_key, txid
from snode.core.txbuilder import build_spend, estimate_fee, transfer_at_rate
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from snode.rpc.answers import mempool_min_fee_rate
from snode.wallet.daemon import DaemonClient
from snode.wallet.errors import DaemonError
from snode.wallet.logic import FEE_MARGIN_PERCENT, MAX_FEE_MULTIPLE, fee_rate
from snode.wallet.service import WalletService

ALICE, BOB = key_from_label("alice"), key_from_label("bob")
MIN = REGTEST.fee_per_byte


def _paid_rate(tx, coins) -> float:
    held = {op: entry.amount for op, entry in coins}
    return (sum(held[op] for op in tx.inputs) - sum(o.amount for o in tx.outputs)) / len(encode(tx))


def test_build_spend_pays_the_rate_it_is_given_and_the_minimum_without_one(chain):
    coins = chain.spendable(ALICE.public)
    outputs = [TxOut(BOB.public, COIN)]
    plain = build_spend(coins, ALICE, outputs, Transfer(), chain.params)
    raised = build_spend(coins, ALICE, outputs, Transfer(), chain.params, rate=2_200)
    assert MIN <= _paid_rate(plain, coins) < 1.1 * MIN, "no rate: the chain's minimum, as before"
    assert 2_200 <= _paid_rate(raised, coins) < 1.1 * 2_200
    assert estimate_fee(1, outputs, Transfer(), chain.params, rate=2_200) * 10 == 22 * estimate_fee(
        1, outputs, Transfer(), chain.params)
    chain.submit(raised)


@pytest.mark.parametrize(("pool", "paid"), [
    (0, MIN), (MIN - 1, MIN), (MIN, MIN), (2 * MIN, 2_200), (1_795, 1_975), (1_001, 1_102),
])
def test_the_wallet_pays_the_minimum_or_the_raised_pool_rate_plus_the_margin(pool, paid):
    assert FEE_MARGIN_PERCENT == 10
    assert fee_rate(pool, MIN) == paid


def _coins(chain, count: int) -> list:
    split = chain.spend(ALICE, Transfer(), [TxOut(ALICE.public, COIN)] * count)
    chain.mine_with([split])
    chain.mine(chain.params.unlock_confirmations)
    sid = txid(split)
    return [(OutPoint(sid, i), chain.state.utxos[outpoint_key(sid, i)]) for i in range(count)]


def test_get_info_rate_is_the_minimum_then_the_raised_floor_then_decays(chain):
    coins = _coins(chain, 4)
    chain.pool = mp.Mempool(limits=mp.PoolLimits(max_entries=3))
    assert mempool_min_fee_rate(chain.pool, chain.consensus, chain.now) == MIN, "an empty pool: the minimum"
    for coin in coins[:3]:
        chain.submit(transfer_at_rate(coin, ALICE, BOB.public, MIN, REGTEST))
    full = mempool_min_fee_rate(chain.pool, chain.consensus, chain.now)
    assert 2 * MIN <= full <= 2 * MIN + 12, "full at the minimum: the increment more, to a rate step"
    with pytest.raises(MempoolRejection, match=f"needs at least {2 * MIN}"):
        chain.submit(transfer_at_rate(coins[3], ALICE, BOB.public, 2 * MIN - 1, REGTEST))
    chain.submit(transfer_at_rate(coins[3], ALICE, BOB.public, full, REGTEST))  # the rate said is taken
    pool, now = chain.pool, chain.now
    assert pool.floor.rate == 2 * MIN
    pool = mp.remove(pool, [e.txid for e in pool.entries.values() if e.rate < 2 * MIN])  # room again
    assert mempool_min_fee_rate(pool, chain.consensus, now + 3600) == 2 * MIN, "no block yet: the floor holds"
    pool, _ = mp.after_block(pool, mined=[], spent=[], nodes=[], now=now)
    half = mp.FLOOR_HALFLIFE // 2  # a third full: the half-life halved
    assert mempool_min_fee_rate(pool, chain.consensus, now + half) == MIN
    assert mempool_min_fee_rate(pool, chain.consensus, now + half // 2) == 1_415, "ceil(2000 / sqrt 2)"


def test_a_full_pool_of_high_rates_asks_their_price_without_a_floor(chain):
    coins = _coins(chain, 3)
    chain.pool = mp.Mempool(limits=mp.PoolLimits(max_entries=2))
    for coin in coins[:2]:
        chain.submit(transfer_at_rate(coin, ALICE, BOB.public, 5 * MIN, REGTEST))
    asked = mempool_min_fee_rate(chain.pool, chain.consensus, chain.now)
    assert chain.pool.floor.rate == 0 and 6 * MIN <= asked <= 6 * MIN + 70
    chain.submit(transfer_at_rate(coins[2], ALICE, BOB.public, asked, REGTEST))


class _Daemon(DaemonClient):
    """A daemon's answers from the lab chain (a unit test: the functional test runs real ones)."""

    def __init__(self, chain: Any, info: dict[str, Any] | None, refusal: str | None = None) -> None:
        super().__init__("127.0.0.1:1")
        self.chain, self.info, self.refusal = chain, info, refusal
        self.sent: list[str] = []

    def call(self, method: str, result_type: Any, params: Any = None) -> Any:
        if method == "get_info":
            if self.info is None:
                raise DaemonError("Method not found", -32601)
            return msgspec.convert(self.info, result_type)
        if method == "get_outputs":
            outs = [{"txid": op.txid.hex(), "index": op.index, "amount": e.amount, "unlock_height": e.unlock_height}
                    for op, e in self.chain.spendable(ALICE.public)]
            return msgspec.convert({"height": self.chain.state.height, "outputs": outs}, OutputsResult)
        if method == "get_mempool":
            return msgspec.convert({"transactions": []}, result_type)
        assert method == "send_raw_transaction"
        if self.refusal is not None:
            raise DaemonError(self.refusal, -4)
        self.sent.append(params["tx_hex"])
        return msgspec.convert({"txid": "00" * 32}, result_type)


OLD_INFO = {"height": 1, "target_height": 0, "status_line": "", "network": "regtest", "version": "0",
            "top_block_hash": "", "genesis_hash": "", "mempool_size": 0, "service_node": False,
            "service_node_count": 0, "peer_count": 0, "last_uptime_proof_rejection": ""}
"""A get_info of a daemon older than `mempool_min_fee_rate`."""


def _transfer(chain, daemon: _Daemon) -> Any:
    service = WalletService(ALICE, REGTEST, daemon)
    return service, service.prepare_transfer(encode_address(REGTEST.address_prefix, BOB.public), COIN)


@pytest.mark.parametrize("info", [None, OLD_INFO, {**OLD_INFO, "mempool_min_fee_rate": MIN}])
def test_an_older_or_silent_daemon_gets_the_chain_minimum(chain, info):
    _, pending = _transfer(chain, _Daemon(chain, info))
    assert MIN <= pending.fee / len(encode(pending.tx)) < 1.1 * MIN


def test_a_raised_pool_gets_its_rate_plus_the_margin_and_the_prompt_shows_that_fee(chain):
    _, pending = _transfer(chain, _Daemon(chain, {**OLD_INFO, "mempool_min_fee_rate": 1_795}))
    assert 1_975 <= pending.fee / len(encode(pending.tx)) < 1.1 * 1_975
    assert any(line.startswith("Fee: ") for line in pending.lines)
    assert "plus a fee of" in pending.question
    chain.submit(pending.tx)


def test_a_refusal_by_the_pool_at_submit_is_one_line_with_its_rate_and_what_to_do(chain):
    refusal = ("transaction rejected: mempool is full: the transaction pays 1100 atomic units a byte; it needs at "
               "least 2400 (the pool's minimum since it evicted; it falls back over time)")
    daemon = _Daemon(chain, {**OLD_INFO, "mempool_min_fee_rate": MIN}, refusal)
    service, pending = _transfer(chain, daemon)
    paid = pending.fee // len(encode(pending.tx))
    with pytest.raises(DaemonError, match=rf"mempool now asks at least 2400 atomic units a byte and this "
                                          rf"transaction pays {paid} .*nothing was sent: run the command again"
                       ) as err:
        service.submit(pending)
    assert "\n" not in str(err.value) and err.value.code == -4
    daemon.refusal = "transaction rejected: it spends an output that does not exist"
    with pytest.raises(DaemonError, match="^transaction rejected: it spends an output"):
        service.submit(pending)


def test_a_daemon_asking_more_than_a_hundred_times_the_minimum_gets_nothing_signed(chain):
    """A lying daemon (or a public node a light wallet asks) cannot turn the wallet's coins into
    fees: past MAX_FEE_MULTIPLE times the minimum, one line and nothing signed; up to it, the
    margin stops at the cap."""
    daemon = _Daemon(chain, {**OLD_INFO, "mempool_min_fee_rate": MAX_FEE_MULTIPLE * MIN + 1})
    with pytest.raises(InvalidTransaction, match=r"over 100 times the minimum .*nothing was signed") as err:
        _transfer(chain, daemon)
    assert "\n" not in str(err.value) and daemon.sent == []
    assert fee_rate(MAX_FEE_MULTIPLE * MIN, MIN) == MAX_FEE_MULTIPLE * MIN
