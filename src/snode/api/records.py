"""Service node records built in one place from the core's ServiceNode: the specification's record
(section 2.1) for the walkthrough and any tool that shows a node, and the daemon's fuller
`get_service_nodes` element."""

from __future__ import annotations

import functools
from typing import Any

from snode.api.types import Contributor, ServiceNodeRecord, ServiceNodeState
from snode.core import service_nodes as sn_rules
from snode.core.address import encode_address
from snode.core.credit import credit_at
from snode.core.participation import Participation, miss_count
from snode.core.state import ServiceNode
from snode.params import NetworkParams


@functools.lru_cache(maxsize=1 << 16)
def cached_address(prefix: str, public: bytes) -> str:
    """encode_address, memoised: a node's contributors are shown again on every refresh."""
    return encode_address(prefix, public)


def service_node_record(
    sn: ServiceNode, height: int, params: NetworkParams, *, last_uptime_proof: int = 0
) -> ServiceNodeRecord:
    """The specification's 11 fields of `sn` at tip `height`."""
    return ServiceNodeRecord(**_spec_fields(sn, height, params, last_uptime_proof))


def service_node_state(
    sn: ServiceNode, height: int, params: NetworkParams, *, last_uptime_proof: int,
    participation: Participation | None = None,
) -> ServiceNodeState:
    """The daemon's `get_service_nodes` element for `sn` at tip `height`."""
    duties = participation or Participation()
    return ServiceNodeState(
        **_spec_fields(sn, height, params, last_uptime_proof),
        status=sn_rules.status(sn).value,
        operator_address=cached_address(params.address_prefix, sn.operator),
        funded_height=sn.funded_height if sn.funded_height >= 0 else None,
        activation_height=sn.active_since if sn.active_since >= 0 else None,
        last_reward_height=sn.last_reward_height,
        last_state_change_height=sn.last_state_change_height,
        last_state_change_reason=sn_rules.Reason(sn.last_state_change_reason).label,
        last_decommission_reason=sn_rules.Reason(sn.last_decommission_reason).label,
        missed_duties=miss_count(duties), recorded_duties=duties.duties,
        requested_unlock_height=sn.requested_unlock_height,
        earned_downtime_blocks=credit_at(sn, height, params),
        state_height=sn.last_state_change_height, leaves_at=sn.leaves_at,
    )


def _spec_fields(
    sn: ServiceNode, height: int, params: NetworkParams, last_uptime_proof: int
) -> dict[str, Any]:
    # Keyword arguments shared by both records, so the specification's part is written once.
    return {
        "service_node_pubkey": sn.pubkey.hex(),
        "active": sn.active,
        "funded": sn.funded,
        "payable": sn_rules.is_payable(sn, height, params),
        "registration_height": sn.registration_height,
        "total_contributed": sn.total_contributed,
        "staking_requirement": sn.staking_requirement,
        "operator_fee": sn.fee_ppm,
        "contributors": [
            Contributor(address=cached_address(params.address_prefix, c.owner), amount=c.amount,
                        reserved=c.reserved)
            for c in sn.contributors
        ],
        "last_uptime_proof": last_uptime_proof,
        "decommission_count": sn.decommission_count,
    }
