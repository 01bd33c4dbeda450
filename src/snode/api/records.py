"""The `get_service_nodes` record (specification section 2.1), built in one place for the RPC,
the walkthrough and any other tool that shows a service node."""

from __future__ import annotations

import functools
from typing import Any

from snode.core.address import encode_address
from snode.core.service_nodes import is_payable
from snode.core.state import ServiceNode
from snode.params import NetworkParams


@functools.lru_cache(maxsize=1 << 16)
def cached_address(prefix: str, public: bytes) -> str:
    """encode_address, memoised: a node's contributors are shown again on every refresh."""
    return encode_address(prefix, public)


def service_node_record(
    sn: ServiceNode, height: int, params: NetworkParams, *, last_uptime_proof: int = 0
) -> dict[str, Any]:
    """The specification's 11 fields of `sn` at tip `height`; `operator_fee` is in ppm, so
    tools show `operator_fee / 10000` percent."""
    return {
        "service_node_pubkey": sn.pubkey.hex(),
        "active": sn.active,
        "funded": sn.funded,
        "payable": is_payable(sn, height, params),
        "registration_height": sn.registration_height,
        "total_contributed": sn.total_contributed,
        "staking_requirement": sn.staking_requirement,
        "operator_fee": sn.fee_ppm,
        "contributors": [
            {"address": cached_address(params.address_prefix, c.owner), "amount": c.amount,
             "reserved": c.reserved}
            for c in sn.contributors
        ],
        "last_uptime_proof": last_uptime_proof,
        "decommission_count": sn.decommission_count,
    }
