"""A transaction's signatures commit to the outputs it spends, their owner and amount (BIP 143's
rule): the chain checks them against what it holds, so a wallet that was told another amount
(by a lying daemon) makes a signature the chain refuses instead of paying the difference as a
fee. Version 1, whose signatures did not commit to them, is refused with a reason that says so,
in the mempool and inside a block."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.errors import InvalidBlock, InvalidTransaction
from snode.core.state import new_utxo
from snode.core.transactions import (
    REFUSED_TX_VERSION,
    TX_VERSION,
    OutPoint,
    Transaction,
    Transfer,
    TxOut,
    signing_hash,
    txid,
)
from snode.core.transition import apply_block
from snode.core.txbuilder import sign_spend
from snode.devchain import key_from_label
from snode.params import COIN

ALICE, BOB, MALLORY = key_from_label("alice"), key_from_label("bob"), key_from_label("mallory")


def _signed_as_told(chain, owner_told: bytes, amount_told: int):
    """Alice's transfer of 1 coin to Bob from her one output, signed over what she was told it
    holds; the change is what she was told minus the coin and a fee of 0.01."""
    ((outpoint, held),) = chain.spendable(ALICE.public)
    told = new_utxo(owner_told, amount_told, held.unlock_height)
    outputs = [TxOut(BOB.public, COIN), TxOut(ALICE.public, amount_told - COIN - COIN // 100)]
    return sign_spend(ALICE, [(outpoint, told)], outputs, Transfer(), chain.params), held


def test_a_signature_over_the_amount_held_is_valid(chain):
    tx, _ = _signed_as_told(chain, ALICE.public, chain.spendable(ALICE.public)[0][1].amount)
    chain.submit(tx)
    chain.mine()
    assert chain.state.utxos.get(tx.inputs[0].key()) is None
    assert chain.state.utxos[txid(tx) + (0).to_bytes(2, "big")].amount == COIN


def test_a_signature_over_a_smaller_amount_than_held_is_refused(chain):
    """The lying daemon's attack: the wallet is told its output holds less, so its change is
    smaller and the rest would go to the producer as a fee."""
    held = chain.spendable(ALICE.public)[0][1].amount
    tx, _ = _signed_as_told(chain, ALICE.public, held // 2)
    with pytest.raises(InvalidTransaction, match="input 0 has a bad signature"):
        chain.submit(tx)
    with pytest.raises(InvalidBlock, match="input 0 has a bad signature"):
        apply_block(chain.state, chain.block_with([tx]), chain.consensus)


def test_a_signature_over_another_owner_is_refused(chain):
    held = chain.spendable(ALICE.public)[0][1].amount
    tx, _ = _signed_as_told(chain, MALLORY.public, held)
    with pytest.raises(InvalidTransaction, match="input 0 has a bad signature"):
        chain.submit(tx)


def test_the_signing_hash_changes_with_each_spent_amount_and_owner():
    tx = Transaction(TX_VERSION, (OutPoint(bytes(range(32)), 3),), (TxOut(BOB.public, COIN),), Transfer(), ())
    base = signing_hash(tx, [TxOut(ALICE.public, 5 * COIN)], 7, 0)
    assert signing_hash(tx, [TxOut(ALICE.public, 5 * COIN + 1)], 7, 0) != base
    assert signing_hash(tx, [TxOut(BOB.public, 5 * COIN)], 7, 0) != base
    with pytest.raises(ValueError, match="2 spent outputs given for 1 inputs"):
        signing_hash(tx, [TxOut(ALICE.public, 1)] * 2, 7, 0)


def test_version_1_is_refused_in_the_mempool_and_in_a_block(chain):
    assert TX_VERSION == REFUSED_TX_VERSION + 1
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    old = msgspec.structs.replace(tx, version=REFUSED_TX_VERSION)
    reason = "transaction version 1 is no longer valid: its signatures do not commit to the amounts"
    with pytest.raises(InvalidTransaction, match=reason):
        chain.submit(old)
    with pytest.raises(InvalidBlock, match=reason):
        apply_block(chain.state, chain.block_with([old]), chain.consensus)
