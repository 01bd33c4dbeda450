"""Transaction building (core/txbuilder.py): coin selection, change and a fee the chain accepts."""

from __future__ import annotations

import pytest

from snode.core.encoding import encode
from snode.core.errors import InvalidTransaction
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_transfer, estimate_fee, transfer_at_rate
from snode.devchain import key_from_label
from snode.params import COIN

ALICE, BOB, CAROL = (key_from_label(x) for x in ("alice", "bob", "carol"))


def test_transfer_pays_exactly_the_minimum_fee_and_returns_change(chain):
    tx = chain.transfer_tx(ALICE, BOB.public, 5 * COIN)
    ((_, coin),) = chain.spendable(ALICE.public)
    fee = coin.amount - sum(o.amount for o in tx.outputs)
    assert tx.outputs[0] == TxOut(BOB.public, 5 * COIN)
    assert tx.outputs[1].owner == ALICE.public
    assert fee == estimate_fee(1, [TxOut(BOB.public, 5 * COIN)], Transfer(), chain.params)
    assert fee >= chain.params.fee_per_byte * len(encode(tx))
    chain.submit(tx)


@pytest.mark.parametrize("times", [1, 100])
def test_transfer_at_rate_pays_exactly_that_rate_a_byte(chain, times):
    rate = times * chain.params.fee_per_byte
    (coin,) = chain.spendable(ALICE.public)
    tx = transfer_at_rate(coin, ALICE, BOB.public, rate, chain.params)
    assert [o.owner for o in tx.outputs] == [BOB.public]
    assert coin[1].amount - tx.outputs[0].amount == rate * len(encode(tx))
    chain.submit(tx)


def test_not_enough_unlocked_balance_says_how_much_is_needed(chain):
    with pytest.raises(InvalidTransaction, match="balance 1000000 is not enough: 1000000 coins plus a fee"):
        build_transfer(chain.spendable(ALICE.public), ALICE, BOB.public, 1_000_000 * COIN, chain.params)


def test_fee_estimate_covers_inputs_with_wide_output_indexes(chain):
    # An output at index >= 128 takes more bytes to name than index 0; the estimate must count
    # the widest form or the chain refuses the fee.
    erin = key_from_label("erin")
    outputs = [TxOut(erin.public, COIN)] * 299 + [TxOut(erin.public, 1_000 * COIN)]
    chain.submit(chain.spend(ALICE, Transfer(), outputs))
    chain.mine(chain.params.unlock_confirmations + 1)
    tx = chain.transfer_tx(erin, CAROL.public, 500 * COIN)
    assert tx.inputs[0].index == 299
    chain.submit(tx)
    chain.mine()
    assert chain.balance(CAROL.public)[0] == 1_000_500 * COIN


def test_inputs_are_chosen_largest_first_until_the_target_and_fee_are_covered(chain):
    chain.submit(chain.spend(ALICE, Transfer(), [TxOut(BOB.public, a * COIN) for a in (3, 50, 7)]))
    chain.mine(chain.params.unlock_confirmations + 1)
    tx = chain.transfer_tx(BOB, CAROL.public, 1_000_020 * COIN)
    spent = [chain.state.utxos[op.key()].amount for op in tx.inputs]
    assert spent == [1_000_000 * COIN, 50 * COIN]
