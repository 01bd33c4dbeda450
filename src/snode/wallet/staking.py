"""The wallet's rules for service nodes: choosing and checking a stake, showing stakes, and
checking a registration line before anything is sent. (A node's get_service_nodes record
becomes the wallet's `wallet.daemon.NodeRecord` in `node_of`.)"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from snode.common.text import fixed_hex
from snode.core.address import SEPARATOR, decode_address, encode_address
from snode.core.errors import InvalidAddress, InvalidAmount, InvalidRegistration, InvalidStake
from snode.core.registration import parse_command
from snode.core.service_nodes import Stakeable, check_registration, check_stake, open_for_others, status
from snode.core.transactions import (
    Registration,
)
from snode.core.units import PERCENT_DECIMALS, counted, format_coins, parse_coins, parse_percent_ppm
from snode.params import PPM, NetworkParams
from snode.wallet.errors import WalletError
from snode.wallet.logic import PendingStake, coin_word, coins, unlocking_text

YES_ANSWERS: Final = frozenset({"yes", "y"})
NO_ANSWERS: Final = frozenset({"no", "n"})


# --- service nodes ------------------------------------------------------------------------

def parse_pubkey(text: str) -> bytes:
    """A service node public key typed by a user (64 hex characters)."""
    raw = fixed_hex(text, 32)
    if raw is None:
        raise WalletError(
            f"service node public key '{text[:20]}' is not 64 hex characters: copy it from "
            "get_service_node_key"
        )
    return raw


def still_needed(sn: Stakeable, staker: bytes) -> int:
    """What the node still needs from `staker`: its reservation, or what is open to anyone."""
    mine = next((c for c in sn.contributors if c.owner == staker), None)
    if mine is not None and mine.reserved > mine.amount:
        return mine.reserved - mine.amount
    return open_for_others(sn)


@dataclass(frozen=True, slots=True)
class StakeChoice:
    """The amount a `stake` command will contribute, and a note when it was adjusted."""

    amount: int
    note: str | None = None


def choose_stake(sn: Stakeable | None, sn_pubkey: bytes, staker: bytes, text: str) -> StakeChoice:
    """The amount for `stake <pubkey> <amount>` or `stake <pubkey> <percent>%`.

    A percent is that share of what the node still needs; an amount above what it still needs is
    capped at that. InvalidStake or InvalidAmount say why no amount fits.
    """
    if sn is None:
        raise InvalidStake(f"service node {sn_pubkey.hex()} is not registered")
    if sn.funded:
        raise InvalidStake(f"service node {sn.pubkey.hex()} is already full")
    needed = still_needed(sn, staker)
    if needed == 0:
        raise InvalidStake(
            f"service node {sn.pubkey.hex()} has no share left for you: the rest is reserved "
            "for its reserved contributors"
        )
    note = None
    if text.endswith("%"):
        amount = needed * parse_stake_percent(text) // PPM
    else:
        amount = parse_coins(text)
        if amount > needed:
            note = (
                f"The node needs only {format_coins(needed)} more {coin_word(needed)}: staking "
                f"{format_coins(needed)} instead of {format_coins(amount)}."
            )
            amount = needed
    check_stake(sn, staker, amount, sn_pubkey)
    return StakeChoice(amount=amount, note=note)


_PERCENT: Final = re.compile(r"-?[0-9]+(?:\.([0-9]+))?")


def parse_stake_percent(text: str) -> int:
    """`<p>%` of a stake command as ppm, above 0 and at most 100 %; InvalidAmount says why not."""
    number = text[:-1] if text.endswith("%") else text
    match = _PERCENT.fullmatch(number)
    if match is None:
        raise InvalidAmount(
            f"percent '{text}' is not a number: give a percentage such as 50% or 12.5%"
        )
    if match.group(1) is not None and len(match.group(1)) > PERCENT_DECIMALS:
        raise InvalidAmount(
            f"percent '{text}' has more than {PERCENT_DECIMALS} decimal places: "
            f"the smallest step is 0.{'0' * (PERCENT_DECIMALS - 1)}1%"
        )
    try:
        ppm = -1 if number.startswith("-") else parse_percent_ppm(number, maximum_ppm=PPM)
    except InvalidAmount:  # above 100 %, or too many digits
        ppm = -1
    if ppm <= 0:
        raise InvalidAmount(f"percent '{text}' must be above 0% and at most 100%")
    return ppm


def stake_line(sn: Stakeable, staker: bytes, pending: int = 0, unlock: Callable[[int], str] | None = None) -> str:
    """One row of `stakes`: node key, my amount (and what is pending), status, node total /
    requirement, and when it unlocks once an unlock was requested (`unlock(blocks)` says when
    a number of blocks from now is)."""
    mine = format_coins(my_contribution(sn, staker))
    if pending:
        mine += f" + {format_coins(pending)} (pending)"
    line = (
        f"{sn.pubkey.hex()}  mine: {mine}  "
        f"{status(sn).value:<6}  {format_coins(sn.total_contributed)} / "
        f"{format_coins(sn.staking_requirement)}"
    )
    if sn.requested_unlock_height and unlock is not None:
        line += "  " + unlocking_text(sn.requested_unlock_height, unlock)
    elif sn.leaves_at and not sn.funded:
        line += f"  returned at height {sn.leaves_at} unless filled by then"
    return line


def locked_line(sn_pubkey: str, amount: int, until: int, reason: str, height: int | None = None) -> str:
    """A row of `stakes` for a stake a deregistration returned, still locked (`until`: the first
    block that may spend it; `height`: the tip). Its height is `balance`'s: the tip from which
    the stake counts as unlocked (a transfer then goes in the next block, `until`), so that the
    two commands name the same height for the same coins."""
    text = (f"{sn_pubkey}  mine: {format_coins(amount)}  Deregistered ({reason or 'failing'})  "
            f"locked by deregistration, unlocking at height {until - 1}")
    return text + (f" (in {counted(max(until - 1 - height, 0), 'block')})" if height is not None else "")


def stakes_lines(
    nodes: Sequence[Stakeable], staker: bytes, pending: Sequence[PendingStake] = (),
    *, unlock: Callable[[int], str] | None = None, locked: Sequence[str] = (),
) -> list[str]:
    """The lines of `stakes`: one row per node (stakes in the mempool marked `(pending)`, a
    registration in the mempool as a row of its own, the unlock height once requested), the
    rows of `locked` (stakes a deregistration returned, still locked), then the total."""
    waiting: dict[bytes, int] = {}
    for p in pending:
        waiting[p.sn_pubkey] = waiting.get(p.sn_pubkey, 0) + p.amount
    shown = {sn.pubkey for sn in nodes}
    lines = [stake_line(sn, staker, waiting.get(sn.pubkey, 0), unlock) for sn in nodes]
    for p in pending:
        if p.sn_pubkey not in shown:
            kind = "registration" if p.registration else "stake"
            lines.append(f"{p.sn_pubkey.hex()}  mine: {format_coins(p.amount)} (pending)  "
                         f"{kind} in the mempool, not yet mined")
    lines += locked
    if not lines:
        return ["No stakes."]
    # As `balance` counts them: a stake whose unlock was requested is unlocking, not staked.
    unlocking = sum(my_contribution(sn, staker) for sn in nodes if sn.requested_unlock_height)
    total = sum(my_contribution(sn, staker) for sn in nodes) - unlocking
    pending_total = sum(waiting.values())
    lines.append(f"Total staked: {coins(total)}"
                 + (f", plus {coins(pending_total)} (pending)" if pending_total else "")
                 + (f"; unlocking: {coins(unlocking)}" if unlocking else ""))
    return lines


def my_contribution(sn: Stakeable, staker: bytes) -> int:
    """Atomic units `staker` contributed to the node."""
    return sum(c.amount for c in sn.contributors if c.owner == staker)


# --- registration -------------------------------------------------------------------------

def check_registration_line(
    line: str, params: NetworkParams, *, now: int, operator: bytes
) -> Registration:
    """Parse a pasted registration line and apply every rule that needs no daemon.

    Raises InvalidRegistration naming what to fix: the form, the addresses, the signature, the
    expiry window, the fee and amounts, and whether the operator address is this wallet's.
    """
    if "\n" in line.strip() or "\t" in line:
        raise InvalidRegistration(
            "registration command must be one line with single spaces: paste it unchanged"
        )
    try:
        reg = parse_command(line, params)
    except InvalidRegistration:
        _diagnose_split_address(line, params)
        raise
    check_registration(reg, registered=False, block_time=now, params=params)
    if reg.reservations[0].owner != operator:
        raise InvalidRegistration(
            "the operator (first) address of the registration is not this wallet's address "
            f"{encode_address(params.address_prefix, operator)}: re-generate the command with "
            "this wallet's address first"
        )
    return reg


def _diagnose_split_address(line: str, params: NetworkParams) -> None:
    """Name an address broken by whitespace, which otherwise shows only as a malformed line."""
    words = line.split()
    full = len(encode_address(params.address_prefix, bytes(32)))
    for i, word in enumerate(words[:-1]):
        if word.startswith(params.address_prefix + SEPARATOR) and len(word) < full:
            try:
                decode_address(params.address_prefix, word + words[i + 1])
            except InvalidAddress:
                continue
            raise InvalidRegistration(
                f"address '{word[:12]}...' contains whitespace: paste it as one word"
            )
