"""Block and transaction rules of core/transition.py beyond the staking rules: the header, the
producer, the coinbase, spending, fees and quorum state changes, with hand-made blocks."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.blocks import make_block
from snode.core.errors import BlockFromFuture, InvalidBlock, InvalidStateChange, InvalidTransaction
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state_change import sign_votes, state_change_tx
from snode.core.transactions import OutPoint, Transfer, TxOut, Vote, signing_hash, txid
from snode.core.transition import apply_block
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, MAX_FUTURE_BLOCK_TIME, STATE_CHANGE_WINDOW

ALICE, BOB = key_from_label("alice"), key_from_label("bob")


def _refused(chain, block, match: str, error: type[Exception] = InvalidBlock, **kw) -> None:
    before = chain.state
    with pytest.raises(error, match=match):
        apply_block(chain.state, block, chain.consensus, **kw)
    assert chain.state is before


def _rebuilt(chain, block, **header_changes):
    """`block` with header fields changed and signed again by the authority."""
    h = msgspec.structs.replace(block.header, **header_changes)
    return make_block(version=1,
        height=h.height, prev_hash=h.prev_hash, timestamp=h.timestamp, transactions=block.transactions,
        producer_key=chain.authority, network_id=chain.params.network_id, round=h.round,
    )


def test_valid_block_advances_the_tip(chain):
    block = chain.block_with([chain.transfer_tx(ALICE, BOB.public, COIN)])
    state, undo = apply_block(chain.state, block, chain.consensus)
    assert state.height == 1 and state.timestamp == block.header.timestamp
    assert state.issued == chain.state.issued + chain.params.block_reward
    assert undo.height == 1 and undo.prev_tip_hash == chain.state.tip_hash


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"height": 2}, "block height 2 does not follow the tip at 0"),
        ({"prev_hash": bytes(32)}, "does not build on the current tip"),
        ({"timestamp": 1_767_225_599}, "before its parent's"),
    ],
)
def test_header_must_follow_the_tip(chain, changes, match):
    _refused(chain, _rebuilt(chain, chain.block_with([]), **changes), match)


def test_block_too_far_in_the_future_is_refused(chain):
    block = chain.block_with([], timestamp=chain.now + MAX_FUTURE_BLOCK_TIME + 1)
    _refused(chain, block, "ahead of this node's clock", BlockFromFuture, now=chain.now)
    apply_block(chain.state, block, chain.consensus, now=chain.now + 1)


def test_block_from_a_key_that_is_not_an_authority_is_refused(chain):
    _refused(chain, chain.block_with([], producer=ALICE), "is not from the authority, which produces this height")


def test_block_with_a_bad_producer_signature_is_refused(chain):
    block = msgspec.structs.replace(chain.block_with([]), producer_signature=bytes(64))
    _refused(chain, block, "block 1 has a bad signature")


def test_transaction_root_must_match(chain):
    block = chain.block_with([chain.transfer_tx(ALICE, BOB.public, COIN)])
    tampered = msgspec.structs.replace(block, transactions=block.transactions[:1])
    _refused(chain, tampered, "transaction root does not match")


def test_block_must_start_with_its_coinbase(chain):
    block = chain.block_with([chain.transfer_tx(ALICE, BOB.public, COIN)])
    swapped = _rebuilt(chain, msgspec.structs.replace(block, transactions=block.transactions[::-1]))
    _refused(chain, swapped, "does not start with a coinbase")
    doubled = _rebuilt(chain, msgspec.structs.replace(block, transactions=block.transactions[:1] * 2))
    _refused(chain, doubled, "transaction 1: a coinbase may only be the first transaction")


@pytest.mark.parametrize("delta", [1, -1])
def test_coinbase_must_pay_exactly_the_reward_and_fees(chain, delta):
    block = chain.block_with([chain.transfer_tx(ALICE, BOB.public, COIN)])
    coinbase, *rest = block.transactions
    greedy = msgspec.structs.replace(
        coinbase, outputs=(TxOut(coinbase.outputs[0].owner, coinbase.outputs[0].amount + delta),),
    )
    greedy_block = _rebuilt(chain, msgspec.structs.replace(block, transactions=(greedy, *rest)))
    _refused(chain, greedy_block, "coinbase does not pay")


def test_output_is_locked_for_the_unlock_confirmations(chain):
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    chain.submit(tx)
    chain.mine()
    assert chain.unspent(ALICE.public) == []
    change = chain.state.utxos[OutPoint(txid(tx), 1).key()]
    assert change.unlock_height == 1 + chain.params.unlock_confirmations
    spend = chain.signed([OutPoint(txid(tx), 1)], [TxOut(BOB.public, COIN)], Transfer(), [ALICE])
    with pytest.raises(InvalidTransaction, match=f"locked until height {change.unlock_height}"):
        chain.submit(spend)
    chain.mine_to(change.unlock_height - 1)
    chain.submit(spend)


def test_fee_below_the_minimum_is_refused(chain):
    ((outpoint, coin),) = chain.spendable(ALICE.public)
    stingy = chain.signed([outpoint], [TxOut(BOB.public, coin.amount - 1000)], Transfer(), [ALICE])
    with pytest.raises(InvalidTransaction, match=r"pays a fee of 0.000001 coins; at least 0.000\d+ is needed"):
        chain.submit(stingy)


@pytest.mark.parametrize(
    ("mangle", "match"),
    [
        (lambda tx: msgspec.structs.replace(tx, version=3), "unknown transaction version 3"),
        (lambda tx: msgspec.structs.replace(tx, signatures=()), "0 signatures for 1 inputs"),
        (lambda tx: msgspec.structs.replace(tx, inputs=tx.inputs * 2, signatures=tx.signatures * 2),
         "same output twice"),
        (lambda tx: msgspec.structs.replace(tx, outputs=(TxOut(BOB.public, 0),)), "output 0 has amount 0"),
        (lambda tx: msgspec.structs.replace(tx, inputs=(), signatures=()), "has no inputs"),
        (lambda tx: msgspec.structs.replace(tx, signatures=(bytes(64),)), "input 0 has a bad signature"),
    ],
)
def test_malformed_transactions_are_refused(chain, mangle, match):
    with pytest.raises(InvalidTransaction, match=match):
        chain.submit(mangle(chain.transfer_tx(ALICE, BOB.public, COIN)))


def test_transaction_signed_for_another_network_is_refused(chain):
    tx = chain.transfer_tx(ALICE, BOB.public, COIN)
    spent = [TxOut(u.owner, u.amount) for u in (chain.state.utxos[op.key()] for op in tx.inputs)]
    foreign = msgspec.structs.replace(tx, signatures=(ALICE.sign(signing_hash(tx, spent, DEVNET.network_id, 0)),))
    with pytest.raises(InvalidTransaction, match="bad signature"):
        chain.submit(foreign)


# --- state changes ------------------------------------------------------------------------

def _vote(chain, pubkey, quorum_height, voters, kind=StateChangeKind.ACTIVATE):
    votes = sign_votes(voters, chain.params.network_id, pubkey, kind, Reason.FIRST_UPTIME_PROOF, quorum_height)
    return state_change_tx(votes, pubkey, kind, Reason.FIRST_UPTIME_PROOF, quorum_height)


def test_state_change_needs_the_quorum_of_a_recent_height(chain):
    pubkey = chain.new_node()
    chain.mine(STATE_CHANGE_WINDOW)
    # The quorums of the tip and the 9 heights below it may vote; the one before may not.
    too_old = chain.state.height - STATE_CHANGE_WINDOW
    with pytest.raises(InvalidStateChange, match=f"height {too_old}, which is not one of the last 10"):
        chain.submit(_vote(chain, pubkey, too_old, [chain.authority]))
    with pytest.raises(InvalidStateChange, match="not one of the last 10"):
        chain.submit(_vote(chain, pubkey, chain.state.height + 1, [chain.authority]))
    chain.submit(_vote(chain, pubkey, too_old + 1, [chain.authority]))


def test_state_change_votes_must_come_from_the_quorum(chain):
    pubkey = chain.new_node()
    h = chain.state.height
    with pytest.raises(InvalidStateChange, match="not a member of the quorum"):
        chain.submit(_vote(chain, pubkey, h, [ALICE]))
    with pytest.raises(InvalidStateChange, match="counts a voter twice"):
        chain.submit(_vote(chain, pubkey, h, [chain.authority, chain.authority]))
    with pytest.raises(InvalidStateChange, match="0 votes; 1 are needed"):
        chain.submit(_vote(chain, pubkey, h, []))
    vote = _vote(chain, pubkey, h, [chain.authority])
    forged_votes = (Vote(chain.authority.public, bytes(64)),)
    bad = msgspec.structs.replace(vote, payload=msgspec.structs.replace(vote.payload, votes=forged_votes))
    with pytest.raises(InvalidTransaction, match="state change vote by .* bad signature"):
        chain.submit(bad)


def test_state_change_older_than_the_node_last_change_is_refused(chain):
    chain.mine()
    before = chain.state.height
    pubkey = chain.new_node()
    with pytest.raises(InvalidStateChange, match="older than the node's last change"):
        chain.submit(_vote(chain, pubkey, before, [chain.authority]))


def test_state_change_with_inputs_or_outputs_is_refused(chain):
    pubkey = chain.new_node()
    vote = _vote(chain, pubkey, chain.state.height, [chain.authority])
    with pytest.raises(InvalidTransaction, match="only a deregistration's state change has outputs"):
        chain.submit(msgspec.structs.replace(vote, outputs=(TxOut(ALICE.public, COIN),)))


def test_authority_block_carries_no_validator_signatures(chain):
    # The block hash does not cover them, so a relay could otherwise pad or alter a block's
    # bytes without changing its id.
    block = chain.block_with([])
    padded = msgspec.structs.replace(block, validator_bitset=1, validator_signatures=(bytes(64),))
    assert padded != block
    _refused(chain, padded, "carries no validator signatures")
