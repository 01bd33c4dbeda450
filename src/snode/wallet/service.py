"""The wallet's operations against a daemon: what each command asks the chain, builds and sends.

Spending commands come in two steps: `prepare_*` checks everything and builds the signed
transaction without sending it (a `Pending`), and `submit` sends it. The CLI asks for
confirmation in between; the wallet RPC submits at once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

from snode.api.types import LockedStake
from snode.core.address import decode_address, encode_address
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError, InvalidAmount, InvalidRegistration, InvalidTransaction
from snode.core.service_nodes import status
from snode.core.stake_exit import check_unlock_allowed
from snode.core.transactions import Payload, Stake, Transaction, Transfer, TxOut
from snode.core.txbuilder import Spendable, build_spend, build_unlock_request, estimate_fee, payload_spend
from snode.core.units import counted, format_coins, format_percent, parse_coins
from snode.params import NetworkParams
from snode.wallet.daemon import DaemonClient, NodeRecord
from snode.wallet.errors import DaemonError, WalletError
from snode.wallet.logic import (
    Balance,
    FeeRateTooHigh,
    Output,
    PendingStake,
    TransferRecord,
    Unlocking,
    balance_of,
    coins,
    fee_rate,
    not_enough,
    pool_effects,
    scan_block,
    spendable,
    when,
)
from snode.wallet.staking import check_registration_line, choose_stake, my_contribution, parse_pubkey

POOL_REFUSAL: Final = re.compile(r"mempool is full: .* needs at least (\d+)")
"""The daemon's refusal by its pool's minimum fee rate (`core.mempool`), with the rate it asks."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A signed transaction waiting for the user's Yes."""

    tx: Transaction
    fee: int
    """Transaction fee, atomic units."""
    lines: tuple[str, ...]
    """What the user should know before answering."""
    question: str
    """Ends with `(Yes/No)`."""


@dataclass
class _History:
    """What show_transfers has scanned so far."""

    height: int = -1
    tip_hash: str = ""
    mine: dict[bytes, int] = field(default_factory=dict)
    records: list[TransferRecord] = field(default_factory=list)


class WalletService:
    """One open wallet and the daemon it talks to."""

    def __init__(
        self, key: SigningKey, params: NetworkParams, daemon: DaemonClient,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.key = key
        self.params = params
        self.daemon = daemon
        self.clock = clock
        self.address = encode_address(params.address_prefix, key.public)
        self._history = _History()

    # --- reading the chain ----------------------------------------------------------------

    def _outputs(self) -> tuple[int, list[Output]]:
        return self.daemon.outputs(self.address)

    def _pool_spent(self) -> dict[bytes, str]:
        return self.daemon.pool_spends()

    def _pool_txs(self, pool_spent: dict[bytes, str]) -> list[tuple[str, Transaction]]:
        """The mempool transactions that spend this wallet's outputs, decoded."""
        txs = []
        for tx_id in sorted(set(pool_spent.values())):
            try:
                tx = decode(bytes.fromhex(self.daemon.transaction(tx_id).tx_hex), Transaction)
            except (DaemonError, DecodeError, ValueError):
                continue  # mined or dropped since get_mempool: the next refresh sees it
            txs.append((tx_id, tx))
        return txs

    def _balance_of(self, height: int, outputs: list[Output], pool_spent: dict[bytes, str],
                    staked: int) -> Balance:
        mine = {o.key for o in outputs}
        ours = {k: v for k, v in pool_spent.items() if k in mine}
        change, stakes = pool_effects(self._pool_txs(ours), self.key.public)
        return balance_of(outputs, height, ours, change, staked, stakes)

    def _node(self, pubkey: bytes) -> NodeRecord | None:
        """The daemon's record of one service node, or None when it is not registered."""
        found = self.daemon.service_nodes(self.params.address_prefix, pubkeys=[pubkey.hex()])
        return next((sn for sn in found if sn.pubkey == pubkey), None)

    def my_nodes(self) -> list[NodeRecord]:
        """The service nodes this wallet has contributed to or is reserved on (the daemon
        filters them: a wallet does not download every node)."""
        return self.daemon.service_nodes(self.params.address_prefix, contributor=self.address)

    def balance(self) -> tuple[Balance, int]:
        """(balances, number of nodes staked on)."""
        height, outputs = self._outputs()
        pool_spent = self._pool_spent()
        nodes = [sn for sn in self.my_nodes() if my_contribution(sn, self.key.public) > 0]
        staked = sum(my_contribution(sn, self.key.public) for sn in nodes)
        balance = self._balance_of(height, outputs, pool_spent, staked)
        leaving = [sn for sn in nodes if sn.requested_unlock_height]
        unlocking = tuple(Unlocking(sn.pubkey, my_contribution(sn, self.key.public), sn.requested_unlock_height)
                          for sn in leaving)
        return replace(balance, unlocking=unlocking), len(nodes)

    def stakes(self) -> tuple[list[NodeRecord], tuple[PendingStake, ...]]:
        """(the nodes this wallet is on or has a stake in the mempool for, those pending stakes)."""
        height, outputs = self._outputs()
        mine = {o.key for o in outputs}
        ours = {k: v for k, v in self._pool_spent().items() if k in mine}
        _, pending = pool_effects(self._pool_txs(ours), self.key.public)
        nodes = self.my_nodes()
        waiting = {p.sn_pubkey for p in pending} - {sn.pubkey for sn in nodes}
        if waiting:
            nodes += self.daemon.service_nodes(self.params.address_prefix,
                                               pubkeys=sorted(pk.hex() for pk in waiting))
        return nodes, pending

    def refresh(self) -> int:
        """Scan the blocks added since the last refresh; returns the tip height."""
        tip = self.daemon.tip().height
        h = self._history
        if h.height >= 0 and (h.height > tip or self.daemon.block(h.height).hash != h.tip_hash):
            self._history = h = _History()  # the chain reorganised under us: scan again
        for height in range(h.height + 1, tip + 1):
            result = self.daemon.block(height)
            try:
                block = decode(bytes.fromhex(result.block_hex), Block)
            except (DecodeError, ValueError):
                raise WalletError(f"daemon sent block {height} in a form this wallet cannot read") from None
            h.records.extend(scan_block(block, self.key.public, h.mine))
            h.height, h.tip_hash = height, result.hash
        return tip

    def transfers(self) -> list[TransferRecord]:
        """Every transaction that moved this wallet's coins, oldest first."""
        self.refresh()
        return list(self._history.records)

    # --- spending -------------------------------------------------------------------------

    def prepare_transfer(self, to_text: str, amount: int) -> Pending:
        """A signed transfer of `amount` atomic units to an address."""
        to = decode_address(self.params.address_prefix, to_text)
        if amount <= 0:
            raise InvalidAmount("amount must be above 0")
        tx, fee = self._build([TxOut(to, amount)], Transfer())
        return Pending(
            tx=tx, fee=fee,
            lines=(f"Sending {coins(amount)} to {to_text}", f"Fee: {coins(fee)}"),
            question=f"Send {coins(amount)} plus a fee of {coins(fee)}? (Yes/No): ",
        )

    def prepare_registration(self, line: str) -> Pending:
        """A signed registration from the daemon's registration command line."""
        reg = check_registration_line(line, self.params, now=int(self.clock()), operator=self.key.public)
        pubkey = reg.sn_pubkey.hex()
        if self._node(reg.sn_pubkey) is not None:
            raise InvalidRegistration(
                f"service node {pubkey} is already registered: there is nothing to do"
            )
        tx, fee = self._build([], reg)
        operator_amount = reg.reservations[0].amount
        reserved = sum(r.amount for r in reg.reservations)
        lines = [
            f"Service node: {pubkey}",
            f"Operator stake: {coins(operator_amount)}",
            f"Operator fee: {format_percent(reg.fee_ppm)} %",
            f"Transaction fee: {coins(fee)}",
        ]
        if len(reg.reservations) > 1:
            others = len(reg.reservations) - 1
            lines.append(f"Reserved for {counted(others, 'contributor')}: "
                         f"{coins(reserved - operator_amount)}")
        if reserved < self.params.staking_requirement:
            lines.append(
                f"Open for contributors: {coins(self.params.staking_requirement - reserved)}"
            )
        return Pending(
            tx=tx, fee=fee, lines=tuple(lines),
            question=f"Stake {coins(operator_amount)} to register this service node? (Yes/No): ",
        )

    def prepare_stake(self, pubkey_text: str, amount_text: str) -> Pending:
        """A signed stake of `amount_text` (coins, or `<percent>%`) on a service node."""
        pubkey = parse_pubkey(pubkey_text)
        sn = self._node(pubkey)
        choice = choose_stake(sn, pubkey, self.key.public, amount_text)
        assert sn is not None  # choose_stake refuses an unknown node
        payload = Stake(sn_pubkey=pubkey, amount=choice.amount)
        tx, fee = self._build([], payload)
        lines = [] if choice.note is None else [choice.note]
        lines += [
            f"Staking {coins(choice.amount)} on service node {pubkey.hex()}",
            f"Operator fee: {format_percent(sn.fee_ppm)} %; node total after this stake: "
            f"{format_coins(sn.total_contributed + choice.amount)} / {format_coins(sn.staking_requirement)}",
            f"Transaction fee: {coins(fee)}",
        ]
        return Pending(
            tx=tx, fee=fee, lines=tuple(lines),
            question=f"Stake {coins(choice.amount)}? (Yes/No): ",
        )

    def prepare_unlock(self, pubkey_text: str) -> Pending:
        """A signed request to unlock this wallet's stake on a service node (no fee). Refused,
        with the reason, when the chain would refuse it: nothing is built or sent then."""
        pubkey = parse_pubkey(pubkey_text)
        sn = self._node(pubkey)
        height = self.daemon.tip().height
        check_unlock_allowed(sn, pubkey, self.key.public)
        assert sn is not None  # refused above when not registered
        unlock = height + 1 + self.params.unlock_duration
        confirmations = self.params.unlock_confirmations
        lines = (
            f"Service node: {pubkey.hex()} ({status(sn).value})",
            f"Your stake: {coins(my_contribution(sn, self.key.public))} of "
            f"{format_coins(sn.total_contributed)} on the node",
            f"It unlocks at height {unlock} ({when(unlock - height, self.params, self.clock())}): "
            "the node keeps working and earning until then, and every stake on it comes back in "
            f"the next block, spendable {confirmations} blocks later.",
            "An unlock request cannot be taken back.",
        )
        return Pending(
            tx=build_unlock_request(self.key, pubkey, self.params, signed_for=self.params.rules_at(height + 1)),
            fee=0, lines=lines,
            question="Request the unlock of this service node? (Yes/No): ",
        )

    def locked_stakes(self) -> list[LockedStake]:
        """This wallet's stakes returned by a deregistration and still locked."""
        return [s for s in self.daemon.locked_stakes(self.address).stakes if s.state == "deregistered"]

    def _build(self, outputs: list[TxOut], payload: Payload) -> tuple[Transaction, int]:
        """A signed transaction from this wallet's spendable outputs, and its fee.

        When the unlocked coins are not enough, the refusal says when more unlock.
        """
        height, mine = self._outputs()
        pool_spent = self._pool_spent()
        available = spendable(mine, self.key.public, height, pool_spent)
        target = sum(o.amount for o in outputs) + payload_spend(payload)
        have = sum(entry.amount for _, entry in available)
        # What the daemon's pool asks now (raised after a spam wave evicted), not only the chain's minimum.
        try:
            rate = fee_rate(self.daemon.pool_fee_rate(), self.params.fee_per_byte)
        except FeeRateTooHigh as err:
            raise InvalidTransaction(str(err)) from None
        fee = estimate_fee(max(len(available), 1), outputs, payload, self.params, rate=rate)
        if have < target + fee:  # what build_spend would refuse, said with when more unlocks
            balance = self._balance_of(height, mine, pool_spent, 0)
            raise InvalidTransaction(
                not_enough(have, target, fee, balance, self.params.unlock_confirmations)
            )
        # Signed for the fork of the next block: the one it can enter (a block later, across a
        # fork, it would be refused with that reason and must be made again).
        tx = build_spend(available, self.key, outputs, payload, self.params,
                         signed_for=self.params.rules_at(height + 1), rate=rate)
        return tx, fee_of(tx, available)

    def submit(self, pending: Pending) -> str:
        """Send the transaction; its id (hex). DaemonError when the daemon refuses it.

        A refusal by the pool's minimum (it evicted again after the fee was read: a race) is not
        rebuilt at a higher fee here: the user confirmed this fee. The refusal says the pool's
        minimum now and to run the command again, which pays it."""
        try:
            return self.daemon.send(encode(pending.tx).hex())
        except DaemonError as err:
            needs = POOL_REFUSAL.search(str(err))
            if needs is None:
                raise
            paid = pending.fee // len(encode(pending.tx))
            raise DaemonError(
                f"the daemon's mempool now asks at least {needs[1]} atomic units a byte and this transaction "
                f"pays {paid} (the pool filled up since its fee was read); nothing was sent: run the command "
                "again to pay the pool's current minimum", err.code,
            ) from None


def fee_of(tx: Transaction, spent: list[Spendable]) -> int:
    """The fee of a transaction built from `spent`: inputs - outputs - what the payload locks."""
    amounts = {op: entry.amount for op, entry in spent}
    return (sum(amounts[op] for op in tx.inputs) - sum(o.amount for o in tx.outputs)
            - payload_spend(tx.payload))


def parse_amount(text: str) -> int:
    """Coins typed by a user as atomic units (above 0)."""
    amount = parse_coins(text)
    if amount <= 0:
        raise InvalidAmount("amount must be above 0")
    return amount

