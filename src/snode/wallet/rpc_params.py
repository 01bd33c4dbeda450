"""The wallet JSON-RPC's parameters: one record per method, checked before the method runs.

As on the daemon's admin RPC (snode.api.types), a record forbids unknown fields, so a typo in a
parameter name is refused naming it, and a value of the wrong type or out of range is refused as
`-32602 Invalid params: <name>: <rule>` in the daemon's words (snode.api.invalid_params). Nothing a
client sends may reach a method unchecked: a value the wallet cannot use would otherwise surface
as an internal error (an amount of 2**64 overflowed the transaction encoder).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Final, TypeVar

import msgspec

from snode.api.base import Params
from snode.api.invalid_params import invalid_params
from snode.api.types import NoParams as NoParams
from snode.core.address import decode_address
from snode.core.errors import InvalidAddress, InvalidAmount
from snode.core.units import format_coins
from snode.wallet.errors import WalletError
from snode.wallet.staking import parse_pubkey, parse_stake_percent

MAX_AMOUNT: Final = 2**63 - 1
"""The largest amount the chain encodes (snode.core.types.Amount), atomic units."""
AtomicAmount = Annotated[int, msgspec.Meta(ge=1, le=MAX_AMOUNT)]
"""An amount a client asks to send or stake: atomic units, 1 to MAX_AMOUNT."""

P = TypeVar("P", bound=Params)


class InvalidParams(Exception):
    """A parameter breaks a rule its type cannot say; the message starts with its name."""


class TransferParams(Params, frozen=True):
    """`transfer`."""

    address: str
    """The recipient, an address of the wallet's network."""
    amount: AtomicAmount


class RegisterParams(Params, frozen=True):
    """`register_service_node`."""

    registration_cmd: str
    """The line from the daemon's get_service_node_registration_cmd, unchanged."""


class StakeParams(Params, frozen=True):
    """`stake`: exactly one of `amount` and `percent`."""

    service_node_pubkey: str
    amount: AtomicAmount | None = None
    percent: int | float | str | None = None
    """A share of what the node still needs: above 0 and at most 100, such as 50 or "12.5"."""


class PubkeyParams(Params, frozen=True):
    """`request_stake_unlock`."""

    service_node_pubkey: str


def checked(params: dict[str, Any], schema: type[P]) -> P:
    """`params` as the method's record; RpcError -32602 naming the parameter and the rule."""
    try:
        return msgspec.convert(params, schema)
    except msgspec.ValidationError as err:
        raise invalid_params(err, schema) from None


def address_param(prefix: str, text: str) -> bytes:
    """The public key behind `address`, an address of this network."""
    try:
        return decode_address(prefix, text)
    except InvalidAddress as err:
        raise InvalidParams(f"address: {err.reason}") from None


def pubkey_param(text: str) -> str:
    """`service_node_pubkey` as given, once it is 64 hex characters (as the daemon's rule)."""
    try:
        parse_pubkey(text)
    except WalletError:
        raise InvalidParams("service_node_pubkey: must be 64 hex characters") from None
    return text


def stake_text(params: StakeParams) -> str:
    """What `stake` asks for as the CLI types it: coins (from `amount`) or a percent (`50%`)."""
    if (params.amount is None) == (params.percent is None):
        raise InvalidParams("give exactly one of amount (atomic units) and percent")
    percent = params.percent
    if percent is None:
        assert params.amount is not None  # one of the two, checked above
        return format_coins(params.amount)
    if isinstance(percent, (int, float)):
        if not 0 < percent <= 100:  # before any text is made of it: 10**5000 has too many digits
            raise InvalidParams("percent: must be above 0 and at most 100")
        text = format(Decimal(repr(percent)), "f")  # 1e-05 as 0.00001, so the rule below can say why
    else:
        text = percent[:-1] if percent.endswith("%") else percent
    try:
        parse_stake_percent(text + "%")
    except InvalidAmount as err:
        raise InvalidParams(f"percent: {err.reason}") from None
    return text + "%"
