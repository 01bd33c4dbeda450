"""`get_service_node_registration_cmd`: the params checked against every rule, in the
specification's words (`Failed to make registration command: <reason>`), and the registration
signed with this service node's key."""

from __future__ import annotations

import json
from typing import Any

from snode.api import errors as E
from snode.api.errors import RpcError
from snode.core import service_nodes as sn_rules
from snode.core.address import decode_address
from snode.core.errors import InvalidAddress, InvalidAmount, InvalidRegistration
from snode.core.registration import sign_registration
from snode.core.transactions import Registration, Reservation
from snode.core.units import coin_word, format_coins, parse_percent_ppm
from snode.node.views import NodeView
from snode.params import COIN, MAX_CONTRIBUTORS, MAX_OPERATOR_FEE_PPM

REG_FAILED = "Failed to make registration command"
REGISTRATION_CLOCK_MARGIN = 600
"""Seconds taken off the expiry, so that a block producer whose clock is behind ours still takes it."""


NO_OPERATOR = "No operator contribution given"
SHOWN_CHARS = 48
"""At most this much of a bad value is repeated in an error line."""


def _fail(reason: str, code: int = E.REGISTRATION_CMD_FAILED) -> RpcError:
    return RpcError(code, f"{REG_FAILED}: {reason}")


def _no_operator(reason: str) -> RpcError:
    """The specification's two texts for a missing, malformed or non-atomic operator amount or
    a bad address, then what exactly is wrong."""
    return _fail(f"{NO_OPERATOR}: {reason}")


def _amounts(amounts: Any, net: Any) -> list[Any]:
    """contributor_amounts, once every amount is a whole number of atomic units from 1 up to the
    staking requirement; a bad operator amount (the first) is reported in the specification's
    words."""
    if amounts is None:
        raise _no_operator("contributor_amounts is missing; give the operator's amount in atomic "
                           "units first")
    if not isinstance(amounts, list) or not amounts:
        raise _no_operator("contributor_amounts must be a list with the operator's amount in atomic "
                           "units first")
    first = amounts[0]
    subject = f"the operator amount {_shown(first)}"
    malformed = _not_atomic(subject, first) or _not_positive(subject, first)
    if malformed:
        raise _no_operator(malformed)
    if first < net.pool_operator_min and net.pool_operator_min <= first * COIN <= net.staking_requirement:
        raise _no_operator(f"the operator amount {first} looks like coins; amounts are atomic units "
                           f"({first} coins = {first * COIN})")
    if isinstance(first, int) and first < net.pool_operator_min:  # the chain's rule, in the units given
        raise _fail(f"operator contribution {first} atomic units ({format_coins(first)} {coin_word(first)}) is "
                    f"below the pool minimum of {net.pool_operator_min} atomic units "
                    f"({format_coins(net.pool_operator_min)} coins)")
    for i, amount in enumerate(amounts):
        subject = (f"the operator amount {_shown(amount)}" if i == 0
                   else f"contributor_amounts[{i}] ({_shown(amount)})")
        reason = _not_atomic(subject, amount) or _out_of_range(subject, amount, net)
        if reason:
            raise _fail(reason)
    return amounts


def _shown(value: Any) -> str:
    """A value as the caller wrote it: JSON's spelling (`true`, `null`, `1.5`), text in quotes;
    cut short, since the line is read by a person."""
    text = f"'{value}'" if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _not_atomic(subject: str, value: Any) -> str | None:
    """Why `value` is not a whole number of atomic units (a JSON integer); None when it is one."""
    if isinstance(value, bool):
        return f"{subject} is a boolean, not a number; give a whole number of atomic units"
    if isinstance(value, str):
        return f"{subject} is text; give a number of atomic units without quotes, commas or decimals"
    if not isinstance(value, int):
        return f"{subject} is not a whole number of atomic units (digits only: no commas, decimals or exponent)"
    return None


def _not_positive(subject: str, value: int) -> str | None:
    """Why a whole amount cannot be staked for being 0 or below."""
    return f"{subject} must be above 0 atomic units" if value <= 0 else None


def _out_of_range(subject: str, value: int, net: Any) -> str | None:
    """Why a whole amount cannot be staked: not above 0, or over the staking requirement (no
    one amount may exceed it, which also keeps every amount far below the largest, 2**63 - 1)."""
    if value > net.staking_requirement:
        return (f"{subject} is above the staking requirement of {net.staking_requirement} atomic units "
                f"({format_coins(net.staking_requirement)} coins)")
    return _not_positive(subject, value)


def build_registration(params: dict[str, Any], node: NodeView, now: int) -> Registration:
    """Check get_service_node_registration_cmd's params against every rule; the signed payload."""
    net = node.params
    allowed = {"operator_cut", "contributor_addresses", "contributor_amounts", "staking_requirement"}
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise _fail(f"unknown parameter '{unknown[0]}'; the parameters are {', '.join(sorted(allowed))}")
    amounts = _amounts(params.get("contributor_amounts"), net)
    addresses = params.get("contributor_addresses")
    if not isinstance(addresses, list) or not addresses or not all(isinstance(a, str) for a in addresses):
        raise _fail("contributor_addresses must list the operator's wallet address first")
    if len(addresses) != len(amounts):
        entries = "entry" if len(addresses) == 1 else "entries"
        raise _fail(
            f"contributor_addresses has {len(addresses)} {entries} but contributor_amounts has "
            f"{len(amounts)}; give one amount per address"
        )
    if len(addresses) > MAX_CONTRIBUTORS:
        raise _fail(f"{len(addresses)} contributors given; at most the operator and {MAX_CONTRIBUTORS - 1} others")
    cut = params.get("operator_cut", "0")
    if _not_atomic("", cut) is None:
        cut = str(cut)
    if not isinstance(cut, str):
        raise _fail("operator_cut must be a decimal percent string from \"0\" to \"10\"")
    try:
        fee_ppm = parse_percent_ppm(cut, maximum_ppm=MAX_OPERATOR_FEE_PPM)
    except InvalidAmount as err:
        raise _fail(f"operator_cut: {err.reason}") from None
    requirement = params.get("staking_requirement", net.staking_requirement)
    if _not_atomic("", requirement) or requirement != net.staking_requirement:
        raise _fail(
            f"staking_requirement {_shown(requirement)} is not this network's staking requirement "
            f"({net.staking_requirement} atomic units)"
        )
    reservations = []
    for i, (address, amount) in enumerate(zip(addresses, amounts)):
        who = "operator address" if i == 0 else f"contributor address {i}"
        try:
            reservations.append(Reservation(decode_address(net.address_prefix, address), amount))
        except InvalidAddress as err:
            raise _no_operator(f"{who}: {err.reason}") from None
    assert node.identity is not None
    # A little under the window, so a block producer whose clock is behind ours still takes it.
    expiry = now + net.registration_validity - REGISTRATION_CLOCK_MARGIN
    reg = sign_registration(node.identity.key, net, fee_ppm, tuple(reservations), expiry)
    try:
        sn_rules.check_registration(
            reg, registered=reg.sn_pubkey in node.state.service_nodes, block_time=now, params=net
        )
    except InvalidRegistration as err:
        raise _fail(err.reason) from None
    return reg
