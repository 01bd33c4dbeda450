"""Readiness (`GET /readyz`): what must hold before a load balancer, a container runtime or an
operator's monitor may count this daemon as serving the network.

Synced (a peer at least, outside regtest, and no peer announces a longer chain) and, in
service-node mode: registered on the chain, active, and with an uptime proof the network
accepted (acknowledged by a peer) younger than the healthy proof age. Each unmet condition is
named, with what the operator sees and can do, in printable text (a monitor may show it on a
terminal).
"""

from __future__ import annotations

from typing import Any

from snode.common.text import printable
from snode.api.types import sync_state
from snode.core.service_nodes import status
from snode.core.units import format_age
from snode.node.node import Node


def unmet_conditions(node: Node, now: int, *, peer_count: int, shortage: str | None = None,
                     disk: str | None = None) -> dict[str, Any]:
    """`{"ready", "height", "unmet": [...]}` for /readyz (`shortage`: the descriptor watch's;
    `disk`: the disk watch's)."""
    unmet = [reason for reason in (shortage, disk) if reason is not None]
    if sync_state(node.params.name, node.target_height, peer_count) == "no peers":
        unmet.append("no peers: this daemon cannot know it has the network's chain; check "
                     "--add-priority-node and that the P2P port reaches other daemons")
    if node.target_height:
        unmet.append(f"syncing: height {node.height} of {node.target_height}")
    ident = node.identity
    if ident is not None:
        record = node.state.service_nodes.get(ident.key.public)
        if record is None:
            unmet.append("service node key not registered on the chain: register it with the "
                         "command from get_service_node_registration_cmd")
        else:
            if not record.active:
                unmet.append(f"service node not active (status {status(record).value}, last "
                             f"change at height {record.last_state_change_height})")
            last = node.proofs.last_accepted(ident.key.public)
            healthy = node.params.healthy_proof_age
            if not last:
                unmet.append("no uptime proof accepted by the network yet")
            elif now - last > healthy:
                unmet.append(f"last accepted uptime proof is {format_age(now - last)} old "
                             f"(healthy under {healthy} s)")
            if node.own_proof.refused_reason:
                unmet.append(f"peers refuse this node's uptime proofs: {node.own_proof.refused_reason}")
    return {"ready": not unmet, "height": node.height, "unmet": [printable(u) for u in unmet]}
