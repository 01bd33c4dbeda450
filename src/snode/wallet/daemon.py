"""The wallet's view of its daemon: the one JSON-RPC client (snode.api.client), each answer decoded
into its record of snode.api.types and turned into the core values the wallet's rules take.

Synchronous on purpose: the wallet does one thing at a time, and the wallet RPC server runs its
calls in a worker thread. This is the one place where the client's failures become the wallet's
DaemonError, one readable line each: an unreachable daemon has no code, a refusal keeps the
daemon's code and message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, TypeVar

from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.credentials import Login
from snode.api.types import (
    BlockResult,
    GetServiceNodesParams,
    HeightResult,
    InfoResult,
    LockedStakesResult,
    MempoolResult,
    OutputsResult,
    SendTxResult,
    ServiceNodeRewardsResult,
    ServiceNodesResult,
    ServiceNodeState,
    TransactionResult,
)
from snode.common.endpoints import ConfigError, parse_http_url
from snode.core.address import decode_address
from snode.core.errors import InvalidAddress
from snode.core.state import Contribution
from snode.core.transactions import outpoint_key
from snode.wallet.errors import DaemonError, option_error
from snode.wallet.logic import Output

TIMEOUT: Final = 30.0
"""Seconds to wait for one answer."""
ADDRESS_FORM: Final = "HOST:PORT or http://HOST:PORT"
"""What --daemon-address takes, as its help and its refusal say it (HOST: an IP or a host name)."""

T = TypeVar("T")


class DaemonClient:
    """Typed calls to the daemon at `--daemon-address` (`HOST:PORT` or `http://HOST:PORT`)."""

    def __init__(self, address: str, timeout: float = TIMEOUT, login: Login | None = None) -> None:
        try:
            self.rpc = RpcClient(parse_http_url("--daemon-address", address), timeout, login)
        except ConfigError as err:
            raise option_error(err, ADDRESS_FORM) from None

    @property
    def url(self) -> str:
        """`http://HOST:PORT` of the daemon."""
        return self.rpc.url

    def call(self, method: str, result_type: type[T], params: Any = None) -> T:
        """The result of one call as `result_type`; DaemonError for any failure."""
        try:
            return self.rpc.call_typed(method, params, result_type)
        except RpcUnavailable as err:
            raise DaemonError(str(err)) from None
        except RpcFailure as err:
            raise DaemonError(err.message, err.code) from None

    def tip(self) -> HeightResult:
        """The daemon's tip: height and hash."""
        return self.call("get_height", HeightResult)

    def block(self, height: int) -> BlockResult:
        """The main chain's block at `height`."""
        return self.call("get_block", BlockResult, {"height": height})

    def transaction(self, tx_id: str) -> TransactionResult:
        """A transaction of the chain or the mempool."""
        return self.call("get_transaction", TransactionResult, {"txid": tx_id})

    def pool_fee_rate(self) -> int:
        """The fee per byte the daemon's mempool asks now (get_info's `mempool_min_fee_rate`); 0
        when the daemon does not say (older than the field, or get_info refused): the caller
        pays the chain's minimum then."""
        try:
            return self.call("get_info", InfoResult).mempool_min_fee_rate
        except DaemonError:
            return 0

    def send(self, tx_hex: str) -> str:
        """Send an encoded transaction; its id (hex)."""
        return self.call("send_raw_transaction", SendTxResult, {"tx_hex": tx_hex}).txid

    def outputs(self, address: str) -> tuple[int, list[Output]]:
        """(tip height, the unspent outputs of `address`)."""
        result = self.call("get_outputs", OutputsResult, {"address": address})
        return result.height, [
            Output(bytes.fromhex(o.txid), o.index, o.amount, o.unlock_height) for o in result.outputs
        ]

    def pool_spends(self) -> dict[bytes, str]:
        """Output key -> id of the mempool transaction spending it."""
        spent = {}
        for tx in self.call("get_mempool", MempoolResult).transactions:
            for ref in tx.spends:
                tx_hex, _, index = ref.partition(":")
                spent[outpoint_key(bytes.fromhex(tx_hex), int(index))] = tx.txid
        return spent

    def locked_stakes(self, address: str) -> LockedStakesResult:
        """The address's stakes it cannot spend: on nodes, or locked by a deregistration."""
        return self.call("get_locked_stakes", LockedStakesResult, {"address": address})

    def rewards(self, service_node_pubkey: str) -> ServiceNodeRewardsResult:
        """The rewards the node paid, oldest first, with the totals."""
        return self.call("get_service_node_rewards", ServiceNodeRewardsResult,
                         {"service_node_pubkey": service_node_pubkey})

    def service_nodes(self, prefix: str, *, pubkeys: list[str] | None = None,
                      contributor: str | None = None) -> list[NodeRecord]:
        """The service nodes every given filter lets through (get_service_nodes' filters), as
        the wallet's records of them."""
        params = GetServiceNodesParams(service_node_pubkeys=pubkeys or [], contributor=contributor)
        result = self.call("get_service_nodes", ServiceNodesResult[ServiceNodeState], params)
        return [node_of(record, prefix) for record in result.service_node_states]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """The wallet's record of a service node, from its get_service_nodes record: what the staking
    rules (`core.service_nodes.Stakeable`) and the `stakes` lines read."""

    pubkey: bytes
    fee_ppm: int
    staking_requirement: int
    contributors: tuple[Contribution, ...]
    active: bool
    funded: bool
    """The daemon's word: contributions reach the staking requirement."""
    total_contributed: int
    requested_unlock_height: int
    """Height until which it works after an unlock request (0: none)."""
    leaves_at: int
    """The block that will remove it (0: none due)."""

    @property
    def total_reserved_unfilled(self) -> int:
        """Atomic units reserved for contributors who have not paid yet."""
        return sum(max(c.reserved - c.amount, 0) for c in self.contributors)


def node_of(record: ServiceNodeState, prefix: str) -> NodeRecord:
    """The wallet's record of one get_service_nodes record."""
    try:
        contributors = tuple(
            Contribution(decode_address(prefix, c.address), c.amount, c.reserved)
            for c in record.contributors
        )
        pubkey = bytes.fromhex(record.service_node_pubkey)
    except (InvalidAddress, ValueError) as err:
        raise DaemonError(f"the daemon sent a service node record this wallet cannot read: {err}") from None
    return NodeRecord(
        pubkey=pubkey, fee_ppm=record.operator_fee, staking_requirement=record.staking_requirement,
        contributors=contributors, active=record.active, funded=record.funded,
        total_contributed=record.total_contributed, requested_unlock_height=record.requested_unlock_height,
        leaves_at=record.leaves_at,
    )
