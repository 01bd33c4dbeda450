"""The wallet's pure rules: balances, spendable outputs, stake amounts, registration checks,
transfer history. No I/O: the caller brings what the daemon said and the time.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, assert_never

from snode.core.blocks import Block
from snode.core.registration import COMMAND as REGISTER_COMMAND
from snode.core.stake_exit import ReturnReason
from snode.core.state import UtxoEntry
from snode.core.transactions import (
    DEREGISTER_KIND,
    Coinbase,
    OutPoint,
    Payload,
    Registration,
    Stake,
    StakeReturn,
    StateChange,
    Transaction,
    Transfer,
    TxKind,
    UnlockRequest,
    outpoint_key,
    payload_kind,
    payload_spend,
    txid,
)
from snode.core.txbuilder import Spendable
from snode.core.units import coin_word, counted, duration, format_coins
from snode.params import COIN, NetworkParams

YES_ANSWERS: Final = frozenset({"yes", "y"})
NO_ANSWERS: Final = frozenset({"no", "n"})


def is_yes(answer: str | None) -> bool:
    """Only `Yes` in any case, or `y`, confirms."""
    return answer is not None and answer.strip().lower() in YES_ANSWERS


def is_unclear(answer: str | None) -> bool:
    """An answer that is neither Yes/y nor No/n (any case); None (end of input) is not unclear."""
    return answer is not None and answer.strip().lower() not in YES_ANSWERS | NO_ANSWERS


# --- amounts in words ---------------------------------------------------------------------

def coins(atomic: int) -> str:
    """An amount with its unit: `1 coin`, `2 coins`, `1.5 coins`, `0.000195 coins`."""
    return f"{format_coins(atomic)} {coin_word(atomic)}"


def blocks(count: int) -> str:
    """`1 block`, `7 blocks`."""
    return f"{count} block" if count == 1 else f"{count} blocks"


# --- outputs and balances -----------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Output:
    """One unspent output of this wallet, as the daemon's get_outputs lists it."""

    txid: bytes
    index: int
    amount: int
    unlock_height: int

    @property
    def key(self) -> bytes:
        """Its key in the chain's output map (and in get_mempool's `spends`)."""
        return outpoint_key(self.txid, self.index)


def parse_outputs(result: Mapping[str, Any]) -> tuple[int, list[Output]]:
    """(tip height, outputs) from a get_outputs result."""
    outputs = [
        Output(bytes.fromhex(o["txid"]), int(o["index"]), int(o["amount"]), int(o["unlock_height"]))
        for o in result["outputs"]
    ]
    return int(result["height"]), outputs


def mempool_spends(result: Mapping[str, Any]) -> dict[bytes, str]:
    """Output key -> id of the mempool transaction spending it, from a get_mempool result."""
    spent = {}
    for tx in result.get("transactions", []):
        for ref in tx.get("spends", []):
            tx_hex, _, index = ref.partition(":")
            spent[outpoint_key(bytes.fromhex(tx_hex), int(index))] = tx["txid"]
    return spent


def is_unlocked(output: Output, height: int) -> bool:
    """Spendable in the next block (the tip is at `height`)."""
    return output.unlock_height <= height + 1


def unlocked_at(output: Output) -> int:
    """The tip height from which the output counts as unlocked (spendable in the next block)."""
    return output.unlock_height - 1


def spendable(
    outputs: Iterable[Output], owner: bytes, height: int, pool_spent: Mapping[bytes, object]
) -> list[Spendable]:
    """The outputs a new transaction may spend: unlocked and not spent by the mempool."""
    return [
        (OutPoint(o.txid, o.index), UtxoEntry(owner, o.amount, o.unlock_height))
        for o in outputs
        if is_unlocked(o, height) and o.key not in pool_spent
    ]


@dataclass(frozen=True, slots=True)
class Unlock:
    """Locked coins that unlock together."""

    height: int
    """The tip height from which they count as unlocked."""
    amount: int


@dataclass(frozen=True, slots=True)
class Unlocking:
    """A stake of this wallet on a node whose unlock was requested."""

    sn_pubkey: bytes
    amount: int
    unlock_height: int
    """The node works until this height; the next block returns the stake."""


@dataclass(frozen=True, slots=True)
class PendingStake:
    """A registration or stake of this wallet that is in the mempool, not yet on the chain."""

    txid: str
    sn_pubkey: bytes
    amount: int
    registration: bool


@dataclass(frozen=True, slots=True)
class Balance:
    """What `balance` shows, in atomic units."""

    total: int
    """Outputs at the tip not spent by the mempool, plus change coming back from the mempool."""
    unlocked: int
    """What a transaction could spend now."""
    pending: int
    """Change and incoming coins in mempool transactions (locked until mined and unlocked)."""
    staked: int
    """Contributions to service nodes."""
    height: int = 0
    """The tip height the balances are for."""
    unlocks: tuple[Unlock, ...] = ()
    """The locked outputs at the tip (not the pending coins), by unlock height, soonest first."""
    pending_stakes: tuple[PendingStake, ...] = ()
    unlocking: tuple[Unlocking, ...] = ()
    """Stakes (counted in `staked`) on nodes whose unlock was requested."""

    @property
    def locked(self) -> int:
        """Coins of outputs at the tip that are not unlocked yet."""
        return sum(u.amount for u in self.unlocks)

    @property
    def pending_staked(self) -> int:
        """Coins in registrations and stakes still in the mempool."""
        return sum(p.amount for p in self.pending_stakes)


def balance_of(
    outputs: Iterable[Output], height: int, pool_spent: Mapping[bytes, object],
    pending: int, staked: int, pending_stakes: Sequence[PendingStake] = (),
) -> Balance:
    """Balances from the wallet's outputs, what the mempool spends and what it brings back."""
    live = [o for o in outputs if o.key not in pool_spent]
    total = sum(o.amount for o in live) + pending
    unlocked = sum(o.amount for o in live if is_unlocked(o, height))
    by_height: dict[int, int] = {}
    for o in live:
        if not is_unlocked(o, height):
            by_height[unlocked_at(o)] = by_height.get(unlocked_at(o), 0) + o.amount
    unlocks = tuple(Unlock(h, by_height[h]) for h in sorted(by_height))
    return Balance(total=total, unlocked=unlocked, pending=pending, staked=staked, height=height,
                   unlocks=unlocks, pending_stakes=tuple(pending_stakes))


def _unlock_verb(atomic: int) -> str:
    return "unlocks" if atomic == COIN else "unlock"


def _at(balance: Balance, height: int) -> str:
    return f"height {height} (in {blocks(max(height - balance.height, 0))})"


def locked_text(balance: Balance) -> str | None:
    """When the locked outputs unlock: `7 coins, unlocking at height 123 (in 7 blocks)`."""
    if not balance.unlocks:
        return None
    first, last = balance.unlocks[0], balance.unlocks[-1]
    if len(balance.unlocks) == 1:
        return f"{coins(first.amount)}, unlocking at {_at(balance, first.height)}"
    return (f"{coins(balance.locked)}; the next {coins(first.amount)} unlock at "
            f"{_at(balance, first.height)}, all of it by {_at(balance, last.height)}")


def pending_text(balance: Balance, confirmations: int) -> str:
    """What the coins in unconfirmed transactions wait for."""
    return (f"{coins(balance.pending)}, unlocking {confirmations} confirmations after "
            "they are mined")


def pending_stake_line(stake: PendingStake) -> str:
    """`Staked (pending): ...` for one registration or stake still in the mempool."""
    kind = "registration" if stake.registration else "stake"
    return (f"Staked (pending): {coins(stake.amount)} on service node {stake.sn_pubkey.hex()} "
            f"({kind} in the mempool, not yet mined)")


def unlocking_text(unlock_height: int, when: Callable[[int], str] | None = None) -> str:
    """A stake after its unlock request, in the words `stakes` and `balance` share: the node
    works until its unlock height and the next block returns the stake (`when(height)`: how far
    off that is)."""
    text = f"unlocking at height {unlock_height}, returned at height {unlock_height + 1}"
    return text + (f" ({when(unlock_height + 1)})" if when is not None else "")


def balance_lines(balance: Balance, nodes: int, confirmations: int) -> list[str]:
    """The lines `balance` prints: `Balance:` and `Unlocked balance:` first (the amount, then its
    unit as on every other line: a script reads the first word after the colon), then what is
    locked and until when, pending coins, stakes, and the stakes that are unlocking."""
    lines = [f"Balance: {coins(balance.total)}", f"Unlocked balance: {coins(balance.unlocked)}"]
    locked = locked_text(balance)
    if locked is not None:
        lines.append(f"Locked: {locked}")
    if balance.pending:
        lines.append(f"Pending (unconfirmed): {pending_text(balance, confirmations)}")
    unlocking = sum(u.amount for u in balance.unlocking)
    staying = nodes - len(balance.unlocking)
    plural = "" if staying == 1 else "s"
    lines.append(f"Staked: {coins(balance.staked - unlocking)} on {staying} service node{plural}")
    if balance.unlocking:
        first = min(u.unlock_height for u in balance.unlocking)
        count = len(balance.unlocking)
        lines.append(
            f"Unlocking: {coins(unlocking)} on {counted(count, 'service node')} "
            f"(the first {unlocking_text(first)}, spendable from height {first + 1 + confirmations})")
    lines += [pending_stake_line(p) for p in balance.pending_stakes]
    return lines


def when(blocks: int, params: NetworkParams, now: float) -> str:
    """`in N blocks, about T, around <date>` (regtest, whose blocks come on demand: `in N blocks`)."""
    text = f"in {counted(blocks, 'block')}"
    if params.target_block_time <= 0:
        return text
    seconds = blocks * params.target_block_time
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(now + seconds))
    return f"{text}, about {duration(seconds)}, around {date}"


FEE_MARGIN_PERCENT: Final = 10
"""What a wallet pays above its daemon's raised pool minimum (`mempool_min_fee_rate`). Between the
reading and the submit the floor only falls (it halves back once blocks come) unless the pool
evicts again: a new eviction of the same spam raises it by about one fee-rate step (1.1 %), and a
peer that evicted later than our daemon asks a few percent more; 10 % covers both, and costs 10 %
more fee only while a pool is raised (at the chain's minimum the wallet pays exactly that)."""


MAX_FEE_MULTIPLE: Final = 100
"""The most a wallet pays a byte, as a multiple of the chain's minimum, whatever its daemon says
the pool asks: a daemon that lies (or a public node a light wallet asks) must not turn a wallet's
coins into fees (DESIGN.md section 11). A spam wave at the minimum raises an honest pool's floor to
about twice it; a pool full of transactions paying 100 times the minimum is a fee war this wallet
waits out."""


class FeeRateTooHigh(ValueError):
    """The daemon's pool asks more than MAX_FEE_MULTIPLE times the chain's minimum."""


def fee_rate(pool_rate: int, minimum: int) -> int:
    """The fee per byte a wallet pays: the chain's `minimum`, or the pool's raised rate plus
    FEE_MARGIN_PERCENT (rounded up) when the daemon asks more; FeeRateTooHigh past
    MAX_FEE_MULTIPLE times the minimum (nothing is signed)."""
    if pool_rate <= minimum:
        return minimum
    if pool_rate > MAX_FEE_MULTIPLE * minimum:
        raise FeeRateTooHigh(
            f"the daemon says its mempool asks {pool_rate} atomic units a byte, over {MAX_FEE_MULTIPLE} times "
            f"the minimum ({minimum}): nothing was signed; wait for the pool to empty, or use another daemon"
        )
    return min(pool_rate + -(-pool_rate * FEE_MARGIN_PERCENT // 100), MAX_FEE_MULTIPLE * minimum)


def not_enough(unlocked: int, amount: int, fee: int, balance: Balance, confirmations: int) -> str:
    """The refusal when the unlocked coins cannot pay `amount` plus `fee`, with when more unlock."""
    text = (f"unlocked balance {format_coins(unlocked)} is not enough: {coins(amount)} plus a fee "
            f"of {coins(fee)} are needed")
    if balance.unlocks:
        first, last = balance.unlocks[0], balance.unlocks[-1]
        locked = balance.locked
        unlock = _unlock_verb(locked)
        if len(balance.unlocks) == 1:
            text += (f"; {format_coins(locked)} more {coin_word(locked)} {unlock} at height "
                     f"{first.height}, in {blocks(max(first.height - balance.height, 0))}")
        else:
            text += (f"; {format_coins(locked)} more {coin_word(locked)} {unlock} by height "
                     f"{last.height}, in {blocks(max(last.height - balance.height, 0))} (the first "
                     f"{coins(first.amount)} at height {first.height}, in "
                     f"{blocks(max(first.height - balance.height, 0))})")
    if balance.pending:
        text += (f"; {format_coins(balance.pending)} more {coin_word(balance.pending)} in "
                 f"unconfirmed transactions {_unlock_verb(balance.pending)} {confirmations} "
                 "confirmations after they are mined")
    return text


def pool_effects(
    txs: Iterable[tuple[str, Transaction]], owner: bytes
) -> tuple[int, tuple[PendingStake, ...]]:
    """(coins coming back to `owner`, its registrations and stakes) of mempool transactions
    that spend `owner`'s outputs (only `owner` can have signed them)."""
    change = 0
    stakes = []
    for tx_id, tx in txs:
        change += sum(o.amount for o in tx.outputs if o.owner == owner)
        payload = tx.payload
        match payload:
            case Registration() if payload.reservations:
                stakes.append(PendingStake(tx_id, payload.sn_pubkey, payload.reservations[0].amount, True))
            case Stake():
                stakes.append(PendingStake(tx_id, payload.sn_pubkey, payload.amount, False))
            case Registration() | Transfer() | Coinbase() | StateChange() | StakeReturn() | UnlockRequest():
                pass
            case _:
                assert_never(payload)
    return change, tuple(stakes)


# --- command lines ------------------------------------------------------------------------

def split_command(line: str) -> tuple[str, list[str]]:
    """(command name, arguments) of a typed line; the name is '' for an empty line."""
    words = line.split()
    if not words:
        return "", []
    return words[0].lower(), words[1:]


def is_register_command(name: str) -> bool:
    """True for the registration command (its line goes to the parser whole)."""
    return name == REGISTER_COMMAND


# --- transfer history ---------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class TransferRecord:
    """One transaction that moved this wallet's coins."""

    height: int
    txid: str
    kind: str
    """`in`, `out`, `reward`, `genesis` (funds of the genesis block), `registration`, `stake`,
    `unlock request`, or `stake returned:
    <reason>` (unlock, pool expired, deregistration)."""
    amount: int
    """Coins received, or coins that left the wallet (fee included) for the other kinds."""
    fee: int


def scan_block(
    block: Block, owner: bytes, mine: dict[bytes, int]
) -> list[TransferRecord]:
    """The records of `block` for `owner`; `mine` (output key -> amount) is updated in place."""
    records = []
    height = block.header.height
    for tx in block.transactions:
        tx_id = txid(tx)
        spent = sum(mine.pop(op.key(), 0) for op in tx.inputs)
        received = 0
        for i, out in enumerate(tx.outputs):
            if out.owner == owner:
                mine[outpoint_key(tx_id, i)] = out.amount
                received += out.amount
        payload = tx.payload
        if isinstance(payload, UnlockRequest) and payload.contributor == owner:
            records.append(TransferRecord(height, tx_id.hex(), "unlock request", 0, 0))
            continue
        if not spent and not received:
            continue
        records.append(_record(tx, tx_id.hex(), height, spent, received))
    return records


def _returned(payload: Payload) -> str | None:
    """`stake returned: <reason>` for a transaction that returns stakes, else None."""
    match payload:
        case StakeReturn():
            return f"stake returned: {ReturnReason(payload.reason).label}"
        case StateChange() if payload.kind == DEREGISTER_KIND:
            return f"stake returned: {ReturnReason.DEREGISTRATION.label}"
        case _:
            return None


def _record(tx: Transaction, tx_id: str, height: int, spent: int, received: int) -> TransferRecord:
    kind = payload_kind(tx.payload)
    if kind is TxKind.COINBASE:  # the genesis block's funds are its coinbase: no one earned them
        return TransferRecord(height, tx_id, "genesis" if height == 0 else "reward", received, 0)
    if not spent:
        return TransferRecord(height, tx_id, _returned(tx.payload) or "in", received, 0)
    fee = spent - sum(o.amount for o in tx.outputs) - payload_spend(tx.payload)
    shown = {TxKind.REGISTRATION: "registration", TxKind.STAKE: "stake"}.get(kind, "out")
    return TransferRecord(height, tx_id, shown, spent - received, max(fee, 0))


def transfer_lines(records: Sequence[TransferRecord]) -> list[str]:
    """The lines of `show_transfers`."""
    if not records:
        return ["No transfers yet."]
    width = max(12, *(len(r.kind) for r in records))
    lines = [f"{'height':>7}  {'kind':<{width}}  {'amount':>20}  {'fee':>12}  txid"]
    for r in records:
        sign = "+" if r.kind in ("in", "reward", "genesis") or r.kind.startswith("stake returned") else "-"
        amount = sign + format_coins(r.amount) if r.amount else "0"
        lines.append(
            f"{r.height:>7}  {r.kind:<{width}}  {amount:>20}  {format_coins(r.fee):>12}  {r.txid}"
        )
    return lines

