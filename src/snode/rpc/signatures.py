"""Every admin RPC method: its name, the MethodTable method that serves it, and its parameter
record (None: the method reads the raw object itself, as get_service_node_registration_cmd does to
answer in the specification's words). The one list the method table, the OpenRPC document
(`rpc.openrpc`) and the fuzzer read."""

from __future__ import annotations

from typing import Final

import msgspec

from snode.api.types import (
    AddPeerParams,
    AddressParams,
    GenerateBlocksParams,
    GetBlockParams,
    GetServiceNodesParams,
    NoParams,
    RawTxParams,
    RegistrationCmdParams,
    ServiceNodeRewardsParams,
    SetMockTimeParams,
    TxidParams,
)

SIGNATURES: Final[dict[str, tuple[str, type[msgspec.Struct] | None]]] = {
    "get_info": ("get_info", NoParams),
    "get_height": ("get_height", NoParams),
    "get_service_nodes": ("get_service_nodes", GetServiceNodesParams),
    "get_service_node_key": ("get_service_node_key", NoParams),
    "get_service_node_registration_cmd": ("get_service_node_registration_cmd", None),
    "send_uptime_proof": ("send_uptime_proof", NoParams),
    "get_staking_requirement": ("get_staking_requirement", NoParams),
    "get_block": ("get_block", GetBlockParams),
    "get_transaction": ("get_transaction", TxidParams),
    "send_raw_transaction": ("send_raw_transaction", RawTxParams),
    "get_outputs": ("get_outputs", AddressParams),
    "get_locked_stakes": ("get_locked_stakes", AddressParams),
    "get_service_node_rewards": ("get_service_node_rewards", ServiceNodeRewardsParams),
    "get_mempool": ("get_mempool", NoParams),
    "get_peers": ("get_peers", NoParams),
    "add_peer": ("add_peer", AddPeerParams),
    "stop_daemon": ("stop_daemon", NoParams),
    "generate_blocks": ("generate_blocks", GenerateBlocksParams),
    "set_mock_time": ("set_mock_time", SetMockTimeParams),
}

DOCUMENTED_PARAMS: Final[dict[str, type[msgspec.Struct]]] = {
    "get_service_node_registration_cmd": RegistrationCmdParams,
}
"""The parameter records of the methods that check their raw object themselves, as clients send them."""
