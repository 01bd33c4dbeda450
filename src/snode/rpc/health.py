"""Readiness (`GET /readyz`): what must hold before a load balancer, a container runtime or an
operator's monitor may count this daemon as serving the network.

Synced (a peer at least, outside regtest, and no peer announces a longer chain) and, in
service-node mode: registered on the chain, active, and with an uptime proof the network
accepted (acknowledged by a peer) younger than the healthy proof age. Each unmet condition is
named, with what the operator sees and can do, in printable text (a monitor may show it on a
terminal).

`warnings` names what the operator must know about a node that is ready: its downtime credit
short of an outage (`standing.credit_warning`: the next one deregisters it) and an active node
not payable yet. Neither stops it serving the network: an active node in its payable grace votes
in quorums and proves its uptime like any other, and the grace ends by itself 4 blocks after
activation (the specification's state table), so a probe that took it for unready would count a
healthy node as failing; the credit has its own alert (SnodeCreditLow) instead.
"""

from __future__ import annotations

from typing import Any

from snode.api.types import sync_state
from snode.common.text import printable
from snode.core.service_nodes import status_words
from snode.core.standing import payable_note
from snode.core.units import format_age
from snode.node.views import NodeView


def unmet_conditions(node: NodeView, now: int, *, peer_count: int, shortage: str | None = None,
                     disk: str | None = None) -> dict[str, Any]:
    """`{"ready", "height", "unmet": [...], "warnings": [...]}` for /readyz (`shortage`: the
    descriptor watch's; `disk`: the disk watch's)."""
    unmet = [reason for reason in (shortage, disk) if reason is not None]
    if sync_state(node.params.name, node.target_height, peer_count) == "no peers":
        unmet.append("no peers: this daemon cannot know it has the network's chain; check "
                     "--add-priority-node and that the P2P port reaches other daemons")
    if node.target_height:
        unmet.append(f"syncing: height {node.height} of {node.target_height}")
    download = node.snapshot_download
    if download is not None and not download.done:
        unmet.append(f"downloading the {download.words()}")
    upgrade = node.upgrade.required(node.height, now)
    if upgrade is not None and upgrade["stopped"]:
        unmet.append(f"upgrade required: fork {upgrade['fork']} starts at height {upgrade['height']}, which "
                     f"this snoded does not know; it stopped at {node.height}: {upgrade['action']}")
    warnings: list[str] = []
    ident = node.identity
    if ident is not None:
        record = node.state.service_nodes.get(ident.key.public)
        if record is None:
            unmet.append(_unregistered(node))
        else:
            if not record.active:
                unmet.append(f"service node not active (status {status_words(record)}, last "
                             f"change at height {record.last_state_change_height})")
            warnings += [w for w in (node.credit_warning(), payable_note(record, node.height, node.params)) if w]
            last = node.proofs.last_accepted(ident.key.public)
            healthy = node.params.healthy_proof_age
            if not last:
                unmet.append("no uptime proof accepted by the network yet")
            elif now - last > healthy:
                unmet.append(f"last accepted uptime proof is {format_age(now - last)} old "
                             f"(healthy under {healthy} s)")
            if node.refused_reason:
                unmet.append(f"peers refuse this node's uptime proofs: {node.refused_reason}")
    return {"ready": not unmet, "height": node.height, "unmet": [printable(u) for u in unmet],
            "warnings": [printable(w) for w in warnings]}


def _unregistered(node: NodeView) -> str:
    """The unmet condition of a service node whose key is not in the registry: its registration
    waits in the mempool, the chain removed it (how), or the chain never knew it."""
    if node.registration_pending():
        return "service node registration pending: it waits in the mempool for a block"
    register = "register it with the command from get_service_node_registration_cmd"
    if node.departure is not None:
        return f"service node {node.sn_state_word()}: {register} to serve again"
    return f"service node key not registered on the chain: {register}"
