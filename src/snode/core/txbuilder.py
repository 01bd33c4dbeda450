"""Building and signing spending transactions: coin selection, change and fee.

Pure: the caller gives the spendable outputs it knows of (from its scan of the chain) and the key.
A transaction is signed for one fork (`signed_for`, the fork of the block it is meant for: a
wallet asks `params.rules_at(tip + 1)`); v1, the default, is the fork of a chain that has
passed none.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.errors import InvalidTransaction
from snode.core.state import UtxoEntry
from snode.core.transactions import (  # payload_spend: named here too, where the wallet looks
    TX_VERSION,
    OutPoint,
    Payload,
    Transaction,
    Transfer,
    TxOut,
    UnlockRequest,
    payload_spend,
    signing_hash,
)

__all__ = [
    "Spendable", "build_spend", "build_transfer", "build_unlock_request", "estimate_fee",
    "payload_spend", "sign_spend", "transfer_at_rate",
]
from snode.core.types import SIGNATURE_BYTES
from snode.core.units import format_coins
from snode.params import COIN, V1, ForkRules, NetworkParams

Spendable = tuple[OutPoint, UtxoEntry]


def _size(inputs: Sequence[OutPoint], outputs: Sequence[TxOut], payload: Payload) -> int:
    dummy = (bytes(SIGNATURE_BYTES),) * len(inputs)
    return len(encode(Transaction(TX_VERSION, tuple(inputs), tuple(outputs), payload, dummy)))


def estimate_fee(
    n_inputs: int, outputs: Sequence[TxOut], payload: Payload, params: NetworkParams, *, rate: int | None = None,
) -> int:
    """The fee of a transaction with n_inputs inputs, these outputs and change at `rate` atomic
    units a byte (None: the chain's minimum, `params.fee_per_byte`; a wallet pays more while its
    daemon's pool asks more)."""
    # The widest output index, as for the change: an input naming output 300 is 2 bytes longer
    # than one naming output 0, and the estimate must never be too low.
    inputs = [OutPoint(bytes(32), 65_535)] * n_inputs
    change = TxOut(bytes(32), 2**62)
    return (params.fee_per_byte if rate is None else rate) * _size(inputs, [*outputs, change], payload)


def build_spend(
    spendable: Sequence[Spendable], key: SigningKey, outputs: Sequence[TxOut], payload: Payload,
    params: NetworkParams, *, signed_for: ForkRules = V1, rate: int | None = None,
) -> Transaction:
    """Pick inputs of `key` (largest first), add change, pay the fee at `rate` a byte (None: the
    chain's minimum), sign.

    InvalidTransaction says how much is missing when the spendable outputs are not enough.
    """
    target = sum(o.amount for o in outputs) + payload_spend(payload)
    mine = sorted(
        (s for s in spendable if s[1].owner == key.public),
        key=lambda s: (-s[1].amount, s[0].txid, s[0].index),
    )
    chosen: list[Spendable] = []
    total = 0
    for item in mine:
        chosen.append(item)
        total += item[1].amount
        if total >= target + estimate_fee(len(chosen), outputs, payload, params, rate=rate):
            break
    fee = estimate_fee(max(len(chosen), 1), outputs, payload, params, rate=rate)
    if total < target + fee:
        raise InvalidTransaction(
            f"unlocked balance {format_coins(total)} is not enough: {format_coins(target)} "
            f"{'coin' if target == COIN else 'coins'} plus a fee of {format_coins(fee)} are needed"
        )
    all_outputs = list(outputs)
    # The estimate counts a change output of the widest encoding, so it is never too low.
    change = total - target - fee
    if change > 0:
        all_outputs.append(TxOut(key.public, change))
    return sign_spend(key, chosen, all_outputs, payload, params, signed_for=signed_for)


def sign_spend(
    key: SigningKey, inputs: Sequence[Spendable], outputs: Sequence[TxOut], payload: Payload,
    params: NetworkParams, *, signed_for: ForkRules = V1,
) -> Transaction:
    """The transaction spending `inputs` (all of them `key`'s), signed by `key` over the owner
    and amount the caller knows for each: a chain that holds another amount refuses it."""
    ops = tuple(op for op, _ in inputs)
    version = signed_for.tx_version
    unsigned = Transaction(version, ops, tuple(outputs), payload, ())
    message = signing_hash(unsigned, [TxOut(entry.owner, entry.amount) for _, entry in inputs],
                           params.network_id, signed_for.branch_id)
    return Transaction(version, ops, tuple(outputs), payload, tuple(key.sign(message) for _ in ops))


def build_transfer(
    spendable: Sequence[Spendable], key: SigningKey, to: bytes, amount: int, params: NetworkParams,
    *, signed_for: ForkRules = V1,
) -> Transaction:
    """A signed transfer of `amount` to public key `to`."""
    return build_spend(spendable, key, [TxOut(to, amount)], Transfer(), params, signed_for=signed_for)


def transfer_at_rate(
    coin: Spendable, key: SigningKey, to: bytes, rate: int, params: NetworkParams, *, signed_for: ForkRules = V1,
) -> Transaction:
    """All of `coin` but its fee to public key `to`, the fee exactly `rate` atomic units a byte of
    the signed transaction (a test or benchmark that needs a given fee rate, not a wallet's)."""
    outpoint, held = coin
    fee = rate * _size([outpoint], [TxOut(to, held.amount)], Transfer())
    for _ in range(8):  # the amount's encoding may shrink with the fee: settles in a step or two
        tx = sign_spend(key, [coin], [TxOut(to, held.amount - fee)], Transfer(), params, signed_for=signed_for)
        size = len(encode(tx))
        if fee == rate * size:
            return tx
        fee = rate * size
    raise InvalidTransaction(f"no fee of exactly {rate} a byte fits a transfer of {format_coins(held.amount)}")


def build_unlock_request(
    key: SigningKey, sn_pubkey: bytes, params: NetworkParams, *, signed_for: ForkRules = V1,
) -> Transaction:
    """A contributor's signed request to unlock its stake on `sn_pubkey` (no inputs, no fee)."""
    unsigned = Transaction(signed_for.tx_version, (), (), UnlockRequest(sn_pubkey, key.public), ())
    signature = key.sign(signing_hash(unsigned, (), params.network_id, signed_for.branch_id))
    return msgspec.structs.replace(unsigned, signatures=(signature,))
