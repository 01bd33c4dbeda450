"""Registration rules of DESIGN.md section 4, one test per refusal reason, on a real chain.

Each rule is hit with a real signed transaction through the mempool's admission check (the same
rules as a block) or, where the mempool would stop it first, with a hand-made block; each refusal
is paired with the boundary case that must still pass, so an off-by-one fails too.
"""

from __future__ import annotations

import msgspec
import pytest

from snode.core.errors import InvalidBlock, InvalidRegistration, InvalidTransaction
from snode.core.registration import sign_registration
from snode.core.transactions import Reservation, TxOut
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, MAX_OPERATOR_FEE_PPM, REGTEST

REQUIREMENT = REGTEST.staking_requirement
POOL_MINIMUM = REGTEST.pool_operator_min
WINDOW = REGTEST.registration_validity

OPERATOR = key_from_label("operator")
SN = key_from_label("sn-1")


def _register(chain, reservations, **kw) -> bytes:
    """Submit a registration of SN paid by OPERATOR; the txid."""
    return chain.submit(chain.spend(OPERATOR, chain.registration(SN, reservations, **kw)))


def test_a_valid_solo_registration_creates_a_funded_node(chain):
    _register(chain, [(OPERATOR, REQUIREMENT)], fee_ppm=0)
    chain.mine()
    node = chain.node(SN.public)
    assert node.operator == OPERATOR.public
    assert node.total_contributed == REQUIREMENT
    assert node.funded and node.funded_height == chain.state.height


@pytest.mark.parametrize("late", [1, 3600])
def test_expired_registration_is_refused(chain, late):
    with pytest.raises(InvalidRegistration, match="registration has expired"):
        _register(chain, [(OPERATOR, REQUIREMENT)], expiry=chain.now - late)


def test_registration_expiring_at_the_block_time_is_accepted(chain):
    _register(chain, [(OPERATOR, REQUIREMENT)], expiry=chain.now)
    assert len(chain.pool) == 1


def test_registration_that_expires_before_its_block_is_refused_by_the_block(chain):
    # Valid when admitted; the block that would include it comes after the expiry.
    reg = chain.registration(SN, [(OPERATOR, REQUIREMENT)], expiry=chain.now + 10)
    tx = chain.spend(OPERATOR, reg)
    chain.submit(tx)
    # In a block, a transaction's failure makes the block invalid, naming the transaction.
    with pytest.raises(InvalidBlock, match="transaction 1: registration has expired"):
        chain.mine_with([tx], timestamp=chain.now + 11)
    chain.mine_with([tx], timestamp=chain.now + 10)
    assert SN.public in chain.state.service_nodes


def test_expiry_more_than_the_validity_window_ahead_is_refused(chain):
    with pytest.raises(InvalidRegistration, match="more than 14 days ahead"):
        _register(chain, [(OPERATOR, REQUIREMENT)], expiry=chain.now + WINDOW + 1)
    _register(chain, [(OPERATOR, REQUIREMENT)], expiry=chain.now + WINDOW)
    assert len(chain.pool) == 1


def test_bad_service_node_signature_is_refused(chain):
    reg = chain.registration(SN, [(OPERATOR, REQUIREMENT)])
    forged = msgspec.structs.replace(reg, sn_signature=key_from_label("mallory").sign(b"x" * 32))
    with pytest.raises(InvalidTransaction, match="registration of service node .* bad signature"):
        chain.submit(chain.spend(OPERATOR, forged))
    # The same registration signed over other terms (here a different fee) is refused too.
    other_terms = msgspec.structs.replace(reg, fee_ppm=1)
    with pytest.raises(InvalidTransaction, match="registration of service node .* bad signature"):
        chain.submit(chain.spend(OPERATOR, other_terms))


def test_bad_service_node_signature_is_refused_in_a_block(chain):
    reg = chain.registration(SN, [(OPERATOR, REQUIREMENT)])
    forged = msgspec.structs.replace(reg, sn_signature=bytes(64))
    with pytest.raises(InvalidBlock, match="registration of service node .* bad signature"):
        chain.mine_with([chain.spend(OPERATOR, forged)])


def test_registration_signed_for_another_network_is_refused(chain):
    reg = sign_registration(
        SN, DEVNET, 0, (Reservation(OPERATOR.public, REQUIREMENT),), chain.now + 60
    )
    with pytest.raises(InvalidTransaction, match="bad signature"):
        chain.submit(chain.spend(OPERATOR, reg))


def test_operator_fee_above_ten_percent_is_refused(chain):
    with pytest.raises(InvalidRegistration, match=r"operator fee 10.0001% is above the maximum of 10%"):
        _register(chain, [(OPERATOR, REQUIREMENT)], fee_ppm=MAX_OPERATOR_FEE_PPM + 1)
    _register(chain, [(OPERATOR, REQUIREMENT)], fee_ppm=MAX_OPERATOR_FEE_PPM)
    chain.mine()
    assert chain.node(SN.public).fee_ppm == 100_000


def test_operator_amount_below_the_pool_minimum_is_refused(chain):
    with pytest.raises(InvalidRegistration, match="below the pool minimum of 100000 coins"):
        _register(chain, [(OPERATOR, POOL_MINIMUM - 1)])
    _register(chain, [(OPERATOR, POOL_MINIMUM)])
    chain.mine()
    node = chain.node(SN.public)
    assert node.total_contributed == POOL_MINIMUM and not node.funded


def test_operator_amount_above_the_requirement_is_refused(chain):
    with pytest.raises(InvalidRegistration, match="above the staking requirement of 200000 coins"):
        _register(chain, [(OPERATOR, REQUIREMENT + 1)])


def test_total_reserved_above_the_requirement_is_refused(chain):
    alice, bob = key_from_label("alice"), key_from_label("bob")
    with pytest.raises(InvalidRegistration, match="reserved contributions total 200000.000000001"):
        _register(chain, [(OPERATOR, POOL_MINIMUM), (alice, 60_000 * COIN), (bob, 40_000 * COIN + 1)])
    _register(chain, [(OPERATOR, POOL_MINIMUM), (alice, 60_000 * COIN), (bob, 40_000 * COIN)])
    chain.mine()
    assert [c.reserved for c in chain.node(SN.public).contributors] == [
        POOL_MINIMUM, 60_000 * COIN, 40_000 * COIN,
    ]


def _operator_and(others: int) -> list:
    return [(OPERATOR, POOL_MINIMUM)] + [
        (key_from_label(f"contributor-{i}"), COIN) for i in range(1, others + 1)
    ]


def test_more_than_operator_and_ten_contributors_is_refused(chain):
    with pytest.raises(InvalidRegistration, match="12 contributors; at most the operator and 10 others"):
        _register(chain, _operator_and(11))
    _register(chain, _operator_and(10))
    chain.mine()
    assert len(chain.node(SN.public).contributors) == 11


def test_same_contributor_named_twice_is_refused(chain):
    alice = key_from_label("alice")
    with pytest.raises(InvalidRegistration, match="same contributor address twice"):
        _register(chain, [(OPERATOR, POOL_MINIMUM), (alice, COIN), (alice, COIN)])


def test_zero_reservation_is_refused(chain):
    with pytest.raises(InvalidRegistration, match="reserved contributor 1 has amount 0"):
        _register(chain, [(OPERATOR, POOL_MINIMUM), (key_from_label("alice"), 0)])


def test_registration_without_operator_is_refused(chain):
    reg = chain.registration(SN, [])
    with pytest.raises(InvalidRegistration, match="no operator contribution"):
        chain.submit(chain.spend(OPERATOR, reg))


def test_pubkey_already_registered_is_refused(chain):
    _register(chain, [(OPERATOR, REQUIREMENT)])
    chain.mine()
    alice = key_from_label("alice")
    again = chain.spend(alice, chain.registration(SN, [(alice, REQUIREMENT)]))
    with pytest.raises(InvalidRegistration, match=f"{SN.public.hex()} is already registered"):
        chain.submit(again)


def test_pubkey_registered_twice_in_one_block_is_refused(chain):
    alice = key_from_label("alice")
    first = chain.spend(OPERATOR, chain.registration(SN, [(OPERATOR, REQUIREMENT)]))
    second = chain.spend(alice, chain.registration(SN, [(alice, REQUIREMENT)]))
    with pytest.raises(InvalidBlock, match="transaction 2: .* already registered"):
        chain.mine_with([first, second])


def test_registration_not_paid_by_the_operator_is_refused(chain):
    alice = key_from_label("alice")
    reg = chain.registration(SN, [(OPERATOR, REQUIREMENT)])
    with pytest.raises(InvalidTransaction, match="must be paid by the operator address"):
        chain.submit(chain.spend(alice, reg))


def test_registration_paid_by_two_addresses_is_refused(chain):
    alice = key_from_label("alice")
    reg = chain.registration(SN, [(OPERATOR, REQUIREMENT)])
    (mine,), (theirs,) = chain.spendable(OPERATOR.public), chain.spendable(alice.public)
    change = mine[1].amount + theirs[1].amount - REQUIREMENT - COIN
    tx = chain.signed(
        [mine[0], theirs[0]], [TxOut(OPERATOR.public, change)], reg, [OPERATOR, alice]
    )
    with pytest.raises(InvalidTransaction, match="all inputs of a registration must belong to one address"):
        chain.submit(tx)


def test_registration_must_lock_the_operator_amount(chain):
    # Paying the operator amount back out as an output leaves nothing to stake: refused, so a
    # node cannot be registered without locking its stake.
    reg = chain.registration(SN, [(OPERATOR, REQUIREMENT)])
    ((outpoint, coin),) = chain.spendable(OPERATOR.public)
    greedy = chain.signed([outpoint], [TxOut(OPERATOR.public, coin.amount - COIN)], reg, [OPERATOR])
    with pytest.raises(InvalidTransaction, match="inputs hold only"):
        chain.submit(greedy)
