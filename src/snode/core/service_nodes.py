"""Service-node rules: registration, contributions, status, state changes and the reward split.

DESIGN.md section 4 made executable. Every check is a guard clause that raises with the reason
an operator or staker needs to fix the problem.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, Protocol, assert_never

import msgspec

from snode.core.credit import credit_after_recommission, credit_at, decommissioned
from snode.core.errors import InvalidRegistration, InvalidStake, InvalidStateChange
from snode.core.state import (  # reward_order_key lives with the queue it orders; named here too
    NO_HEIGHT,
    Contribution,
    RewardEntry,
    ServiceNode,
    reward_order_key,
)
from snode.core.transactions import Registration
from snode.core.units import coin_word, format_coins, format_percent, round_up_coins
from snode.params import MAX_CONTRIBUTORS, MAX_OPERATOR_FEE_PPM, PPM, NetworkParams


class StateChangeKind(enum.IntEnum):
    """What a quorum state change does."""

    ACTIVATE = 1
    DECOMMISSION = 2
    RECOMMISSION = 3
    DEREGISTER = 4
    """The node leaves the registry; its stakes come back locked for `deregistration_lock`
    blocks (`core.stake_exit`)."""


class Reason(enum.IntEnum):
    """Why a quorum changed a node's state; shown to operators by its `label`."""

    NONE = 0
    FIRST_UPTIME_PROOF = 1
    MISSED_UPTIME_PROOFS = 2
    UPTIME_PROOFS_RESUMED = 3
    MISSED_BLOCK_PRODUCTION = 4
    """Led no block in its rounds, or signed none of the blocks it validated, too often
    (`core.participation`)."""
    UNREACHABLE = 5
    """Quorum members could not complete a CurveZMQ handshake at the address and quorumnet port
    its uptime proofs declare, for longer than the decommission proof age."""
    OUTDATED_SOFTWARE = 6
    """Its proofs are refused as outdated (below the fork's `min_sn_version`, issue #34 item 5):
    from a fork of `proof_version` 2 only; never deregistered within `upgrade_grace_blocks`."""
    EQUIVOCATION = 7
    """Signed two blocks for one round, or two checkpoint votes for one height: deregistered
    whatever its credit, the proof carried in the state change (fork v2, `core.equivocation`)."""

    @property
    def label(self) -> str:
        """The operator-facing name, e.g. `missed_uptime_proofs`."""
        return self.name.lower() if self is not Reason.NONE else ""


def reason_label(reason: int) -> str:
    """A reason number's operator-facing name; one this release does not know is shown as a number."""
    try:
        return Reason(reason).label
    except ValueError:
        return f"reason {reason}"


class Status(str, enum.Enum):
    """Display status used by tools."""

    ACTIVE = "Active"
    DECOMM = "Decomm"
    AWAIT = "Await"


def status(sn: Stakeable) -> Status:
    """Active when active; Decomm when funded but not active; Await when not funded."""
    if sn.active:
        return Status.ACTIVE
    if sn.funded:
        return Status.DECOMM
    return Status.AWAIT


def status_words(sn: ServiceNode) -> str:
    """The status line's `SN:` state: the node table's word (`status`), with what qualifies it
    in parentheses: a funded node the quorum has not activated yet (Decomm by the flags, but
    never down), why a decommissioned node is out (the quorum's reason), and an unlock request."""
    notes = ["not activated yet"] if sn.funded and not sn.active and sn.active_since == NO_HEIGHT else []
    if decommissioned(sn) and sn.last_decommission_reason:
        notes.append(reason_label(sn.last_decommission_reason))
    if sn.requested_unlock_height:
        notes.append(f"unlocking at {sn.requested_unlock_height}")
    return status(sn).value + (f" ({', '.join(notes)})" if notes else "")


def is_payable(sn: ServiceNode, height: int, params: NetworkParams) -> bool:
    """True when the node earns rewards at `height`: active for at least the grace period."""
    return sn.active and height >= sn.active_since + params.payable_grace


# --- registration -------------------------------------------------------------------------

def check_registration(
    reg: Registration, *, registered: bool, block_time: int, params: NetworkParams
) -> None:
    """Every rule of a registration that needs no signature check and no wallet."""
    if registered:
        raise InvalidRegistration(
            f"service node {reg.sn_pubkey.hex()} is already registered"
        )
    if block_time > reg.expiry:
        raise InvalidRegistration(
            "registration has expired: re-generate the command with "
            "get_service_node_registration_cmd"
        )
    if reg.expiry > block_time + params.registration_validity:
        raise InvalidRegistration(
            f"registration expiry is more than {params.registration_validity // 86400} days "
            "ahead: re-generate the command"
        )
    if reg.fee_ppm > MAX_OPERATOR_FEE_PPM:
        raise InvalidRegistration(
            f"operator fee {format_percent(reg.fee_ppm)}% is above the maximum of "
            f"{format_percent(MAX_OPERATOR_FEE_PPM)}%"
        )
    if not reg.reservations:
        raise InvalidRegistration("registration has no operator contribution")
    if len(reg.reservations) > MAX_CONTRIBUTORS:
        raise InvalidRegistration(
            f"registration has {len(reg.reservations)} contributors; at most the operator and "
            f"{MAX_CONTRIBUTORS - 1} others are allowed"
        )
    if len({r.owner for r in reg.reservations}) != len(reg.reservations):
        raise InvalidRegistration("registration names the same contributor address twice")
    operator_amount = reg.reservations[0].amount
    if operator_amount < params.pool_operator_min:
        raise InvalidRegistration(
            f"operator contribution {format_coins(operator_amount)} is below the pool minimum of "
            f"{format_coins(params.pool_operator_min)} coins"
        )
    if operator_amount > params.staking_requirement:
        raise InvalidRegistration(
            f"operator contribution {format_coins(operator_amount)} is above the staking "
            f"requirement of {format_coins(params.staking_requirement)} coins"
        )
    for i, r in enumerate(reg.reservations[1:], start=1):
        if r.amount <= 0:
            raise InvalidRegistration(f"reserved contributor {i} has amount 0")
    total = sum(r.amount for r in reg.reservations)
    if total > params.staking_requirement:
        raise InvalidRegistration(
            f"reserved contributions total {format_coins(total)} coins, above the staking "
            f"requirement of {format_coins(params.staking_requirement)} coins"
        )


def new_service_node(reg: Registration, height: int, params: NetworkParams) -> ServiceNode:
    """The record a valid registration creates: the operator's amount is committed, the other
    reservations wait for their contributors."""
    operator, *others = reg.reservations
    contributors = (Contribution(operator.owner, operator.amount, operator.amount),) + tuple(
        Contribution(r.owner, 0, r.amount) for r in others
    )
    sn = ServiceNode(
        pubkey=reg.sn_pubkey, fee_ppm=reg.fee_ppm, registration_height=height,
        staking_requirement=params.staking_requirement, contributors=contributors,
        funded_height=NO_HEIGHT, active=False, active_since=NO_HEIGHT, decommission_count=0,
        last_reward_height=height, last_state_change_height=height,
        last_state_change_reason=Reason.NONE, last_decommission_reason=Reason.NONE,
        credit=params.credit_initial, credit_height=height,
        leaves_at=height + params.pool_fill_window + 1,
    )
    return _mark_funded(sn, height, params)


def _mark_funded(sn: ServiceNode, height: int, params: NetworkParams) -> ServiceNode:
    """A node that has just filled: no longer expires as an open pool, and its downtime credit
    starts running down until its first uptime proof activates it."""
    if sn.funded and sn.funded_height == NO_HEIGHT:
        return msgspec.structs.replace(
            sn, funded_height=height, leaves_at=0, credit=params.credit_initial, credit_height=height,
        )
    return sn


# --- contributions ------------------------------------------------------------------------

class Stakeable(Protocol):
    """What the contribution and unlock rules and `status` read of a node: a `ServiceNode`, or a
    client's own record of one (the wallet's, built from get_service_nodes)."""

    @property
    def pubkey(self) -> bytes: ...
    @property
    def staking_requirement(self) -> int: ...
    @property
    def contributors(self) -> Sequence[Contribution]: ...
    @property
    def active(self) -> bool: ...
    @property
    def funded(self) -> bool: ...
    @property
    def total_contributed(self) -> int: ...
    @property
    def total_reserved_unfilled(self) -> int: ...
    @property
    def requested_unlock_height(self) -> int: ...
    @property
    def leaves_at(self) -> int: ...


def open_for_others(sn: Stakeable) -> int:
    """Atomic units a new, unreserved contributor may still put in."""
    return max(sn.staking_requirement - sn.total_contributed - sn.total_reserved_unfilled, 0)


def min_contribution(sn: Stakeable, staker: bytes) -> int:
    """The least `staker` may contribute in one stake transaction.

    A reserved contributor must fill its reservation at once. Anyone else must put in at least the
    open remainder divided by the free contributor slots (rounded down), unless they fill the
    remainder.
    """
    mine = next((c for c in sn.contributors if c.owner == staker), None)
    if mine is not None and mine.reserved > mine.amount:
        return mine.reserved - mine.amount
    remaining = open_for_others(sn)
    free_slots = max(MAX_CONTRIBUTORS - len(sn.contributors), 1)
    return remaining // free_slots


def check_stake(sn: Stakeable | None, staker: bytes, amount: int, sn_pubkey: bytes) -> None:
    """Every rule a contribution must follow."""
    if sn is None:
        raise InvalidStake(f"service node {sn_pubkey.hex()} is not registered")
    if sn.funded:
        raise InvalidStake(f"service node {sn.pubkey.hex()} is already full")
    if amount <= 0:
        raise InvalidStake("stake amount must be above 0")
    mine = next((c for c in sn.contributors if c.owner == staker), None)
    if mine is not None and mine.reserved > mine.amount:
        owed = mine.reserved - mine.amount
        if amount != owed:
            raise InvalidStake(
                f"this address reserved {format_coins(owed)} coins on the node and must "
                f"contribute exactly that in one transaction"
            )
        return
    if mine is None and len(sn.contributors) >= MAX_CONTRIBUTORS:
        raise InvalidStake(
            f"service node has {MAX_CONTRIBUTORS} contributors already; no slot is free"
        )
    remaining = open_for_others(sn)
    if amount > remaining:
        raise InvalidStake(
            f"stake of {format_coins(amount)} coins is more than the node still needs "
            f"({format_coins(remaining)} coins)"
        )
    minimum = min_contribution(sn, staker)
    if amount < minimum:
        # The least amount shown as people type one (at most 2 decimals, rounded up); only when
        # that would be above the remainder (the last slot must fill it) is it shown exactly.
        least = round_up_coins(minimum)
        if least > remaining:
            least = minimum
        raise InvalidStake(
            f"stake of {format_coins(amount)} {coin_word(amount)} is below the minimum contribution of "
            f"{format_coins(least)} {coin_word(least)}"
        )


def add_contribution(
    sn: ServiceNode, staker: bytes, amount: int, height: int, params: NetworkParams
) -> ServiceNode:
    """The record after a valid contribution."""
    contributors = list(sn.contributors)
    for i, c in enumerate(contributors):
        if c.owner == staker:
            contributors[i] = Contribution(c.owner, c.amount + amount, c.reserved)
            break
    else:
        contributors.append(Contribution(staker, amount, 0))
    updated = msgspec.structs.replace(
        sn, contributors=tuple(contributors), last_state_change_height=height
    )
    return _mark_funded(updated, height, params)


# --- quorum state changes -----------------------------------------------------------------

def apply_state_change(
    sn: ServiceNode, kind: int, reason: int, height: int, params: NetworkParams
) -> ServiceNode | None:
    """The record after a quorum's verdict (None: the node is deregistered and leaves the
    registry); InvalidStateChange when the verdict does not fit the node.

    Every kind has its own rule; an unknown kind number is refused, never taken for another."""
    try:
        verdict = StateChangeKind(kind)
        why = Reason(reason)
    except ValueError:
        raise InvalidStateChange(f"unknown state change kind {kind} or reason {reason}") from None
    if not sn.funded:
        raise InvalidStateChange("service node is not funded yet")
    if why is Reason.OUTDATED_SOFTWARE and params.rules_at(height).proof_version < 2:
        raise InvalidStateChange(f"reason outdated_software is not one of fork {params.rules_at(height).name}")
    match verdict:
        case StateChangeKind.ACTIVATE:
            return _activate(sn, why, height, params)
        case StateChangeKind.DECOMMISSION:
            return _decommission(sn, why, height, params)
        case StateChangeKind.RECOMMISSION:
            return _recommission(sn, why, height)
        case StateChangeKind.DEREGISTER:
            _check_deregistration(sn, why, height, params)
            return None
        case _:
            assert_never(verdict)


def _activate(sn: ServiceNode, reason: Reason, height: int, params: NetworkParams) -> ServiceNode:
    """A funded node's first activation, once the quorum has its first uptime proof; it starts
    with the initial downtime credit."""
    if sn.active or sn.active_since != NO_HEIGHT:
        raise InvalidStateChange("service node has been activated before")
    return msgspec.structs.replace(
        sn, active=True, active_since=height, last_state_change_height=height,
        last_state_change_reason=reason, credit=params.credit_initial, credit_height=height,
    )


def _decommission(sn: ServiceNode, reason: Reason, height: int, params: NetworkParams) -> ServiceNode:
    """An active node the quorum finds failing, with the downtime credit to cover it: inactive,
    unpaid, counted, its credit running down."""
    if not sn.active:
        raise InvalidStateChange("service node is not active")
    credit = credit_at(sn, height, params)
    if credit < params.credit_min:
        raise InvalidStateChange(
            f"service node has {credit} blocks of downtime credit, below the minimum of "
            f"{params.credit_min} for a decommission: it is deregistered instead"
        )
    return msgspec.structs.replace(
        sn, active=False, decommission_count=sn.decommission_count + 1,
        last_state_change_height=height, last_state_change_reason=reason,
        last_decommission_reason=reason, credit=credit, credit_height=height,
    )


def _recommission(sn: ServiceNode, reason: Reason, height: int) -> ServiceNode:
    """A decommissioned node that proves it is up again; it goes to the back of the reward
    queue and keeps what is left of its credit after the penalty."""
    if sn.active or sn.active_since == NO_HEIGHT:
        raise InvalidStateChange("service node is not decommissioned")
    return msgspec.structs.replace(
        sn, active=True, active_since=height, last_reward_height=height,
        last_state_change_height=height, last_state_change_reason=reason,
        credit=credit_after_recommission(sn, height), credit_height=height,
    )


def _check_deregistration(sn: ServiceNode, reason: Reason, height: int, params: NetworkParams) -> None:
    """A failing active node without the credit for a decommission, or a funded inactive node
    whose credit has run out."""
    if reason in (Reason.NONE, Reason.FIRST_UPTIME_PROOF, Reason.UPTIME_PROOFS_RESUMED):
        raise InvalidStateChange(f"a deregistration needs a failure as its reason, not {reason.label or 'none'}")
    if Reason.OUTDATED_SOFTWARE in (reason, sn.last_decommission_reason) and params.in_upgrade_grace(height):
        raise InvalidStateChange(f"a node with outdated software is not deregistered within "
                                 f"{params.upgrade_grace_blocks} blocks of a fork: its operator has that long")
    if reason is Reason.EQUIVOCATION:
        return  # not downtime, which credit covers: a key that signs twice is out at once
    credit = credit_at(sn, height, params)
    if sn.active and credit >= params.credit_min:
        raise InvalidStateChange(
            f"service node has {credit} blocks of downtime credit: it is decommissioned, "
            "not deregistered"
        )
    if not sn.active and credit > 0:
        raise InvalidStateChange(
            f"service node still has {credit} blocks of downtime credit before it can be "
            "deregistered"
        )


# --- rewards ------------------------------------------------------------------------------

def next_reward_winner(
    nodes: "list[ServiceNode]", height: int, params: NetworkParams
) -> ServiceNode | None:
    """The payable node that block `height` pays, judged by the parent's registry.

    The reference: the rule as written, scanning every node. Blocks use its fast twin
    `reward_winner_from_queue`, which tests/unit/test_indexes.py checks against this one.
    """
    payable = [sn for sn in nodes if is_payable(sn, height - 1, params) and not leaving(sn, height)]
    return min(payable, key=reward_order_key) if payable else None


def reward_winner_from_queue(
    reward_queue: Iterable[RewardEntry], registry: Mapping[bytes, ServiceNode], height: int,
    params: NetworkParams,
) -> ServiceNode | None:
    """`next_reward_winner` of `registry`, given its reward queue (`state.RegistryIndex`): the
    fast twin of that reference, which tests/unit/test_indexes.py holds it to.

    The queue holds every active node in reward order, so the winner is its first node past the
    grace period: only nodes activated in the last few blocks are looked at and skipped.
    """
    for entry in reward_queue:
        sn = registry[entry[2]]
        if is_payable(sn, height - 1, params) and not leaving(sn, height):
            return sn
    return None


def leaving(sn: ServiceNode, height: int) -> bool:
    """True when block `height` removes the node (or a block before it should have): no reward
    is ever paid to a node past its unlock height."""
    return bool(sn.leaves_at) and sn.leaves_at <= height


def reward_split(sn: ServiceNode, reward: int) -> list[tuple[bytes, int]]:
    """(owner, atomic amount) for each contributor, operator first, summing exactly to reward.

    The operator fee comes off first; the rest is shared pro rata by contribution, rounded down;
    the rounding remainder goes to the operator.
    """
    fee = reward * sn.fee_ppm // PPM
    rest = reward - fee
    total = sn.total_contributed
    shares = [(c.owner, rest * c.amount // total) for c in sn.contributors if c.amount > 0]
    dust = rest - sum(a for _, a in shares)
    owner0, amount0 = shares[0]
    shares[0] = (owner0, amount0 + fee + dust)
    return [(owner, amount) for owner, amount in shares if amount > 0]


FEE_PERCENT_DISPLAY_DIVISOR: Final = 10_000
"""Tools show `operator_fee / 10000` as percent."""
