"""docs/wallet-openrpc.json: the OpenRPC document of the wallet's JSON-RPC (`snode-wallet
--rpc-bind`), made from its parameter records (wallet.rpc_params) and the result records below
(`python -m snode.wallet.openrpc > docs/wallet-openrpc.json`, run by `make docs`; a unit test
compares, and a functional test decodes real answers into these records). The wallet RPC
answers `rpc.discover` with it."""

from __future__ import annotations

import functools
import json
from typing import Any, Final

import msgspec

from snode.api.openrpc import Documented, openrpc_document
from snode.wallet.rpc_params import NoParams, PubkeyParams, RegisterParams, StakeParams, TransferParams


class AddressResult(msgspec.Struct, frozen=True):
    address: str
    """This wallet's address."""


class BalanceResult(msgspec.Struct, frozen=True):
    """Atomic units (1 coin = 10^9)."""

    balance: int
    """Everything this wallet owns that is not staked: unlocked and still locked outputs."""
    unlocked_balance: int
    """What it can spend now."""
    pending: int
    """Sent by this wallet and not yet mined (its change included)."""
    staked: int
    """Locked in service nodes."""
    staked_nodes: int
    """Service nodes it has stakes in."""
    pending_staked: int
    """In registrations and stakes sent and not yet mined."""
    unlocking: int
    """Stakes whose unlock was requested, not yet spendable."""


class SendResult(msgspec.Struct, frozen=True):
    txid: str
    """The transaction's id (64 hex characters); it is in the daemon's mempool."""
    fee: int
    """Atomic units paid to the network."""


class StakeResult(msgspec.Struct, frozen=True):
    txid: str
    fee: int
    amount: int
    """Atomic units staked (a percent is turned into an amount)."""


class UnlockResult(msgspec.Struct, frozen=True):
    txid: str
    fee: int
    unlock_height: int
    """The height at which the stake is spendable again, if the request is mined in the next block."""


METHODS: Final = (
    Documented("get_address", NoParams, AddressResult, "This wallet's address."),
    Documented("get_balance", NoParams, BalanceResult,
               "Balances in atomic units; pending_staked is in registrations and stakes not yet mined."),
    Documented("transfer", TransferParams, SendResult, "Send amount atomic units to address."),
    Documented("register_service_node", RegisterParams, SendResult,
               "Register a service node from the daemon's registration_cmd line, unchanged."),
    Documented("stake", StakeParams, StakeResult,
               "Stake amount atomic units, or percent of what the node still needs, on a service node."),
    Documented("request_stake_unlock", PubkeyParams, UnlockResult,
               "Ask for the unlock of a node this wallet staked on."),
)
"""The wallet RPC's methods, in the order of its reference (docs/WALLET-RPC.md)."""


def document() -> dict[str, Any]:
    """The OpenRPC 1.2 document of every wallet RPC method."""
    return openrpc_document(
        "snode-wallet JSON-RPC",
        "POST /json_rpc on the wallet's --rpc-bind address (loopback only; docs/WALLET-RPC.md).",
        list(METHODS))


served_document = functools.cache(document)
"""What `rpc.discover` answers (made at its first call)."""


def main() -> None:
    print(json.dumps(document(), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
