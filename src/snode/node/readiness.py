"""Readiness for the next fork (issue #34 item 6): the share of active service nodes whose last
accepted uptime proof says they know it, for the operator's view (`get_info`'s `next_fork`,
`snode-cli status`, the web view, `/metrics`). Informational: no on-chain vote (Oxen removed
its hard-fork voting; Dash's stalled all the same).

What a proof says: from a fork of `proof_version` 2, its `version` names its snoded and the
newest fork its schedule knows (`core.proofs.ProofVersion`): it knows the next fork when that
fork is at the same height (or it knows one past it) and its snoded is at least the fork's
`min_sn_version`. A v1 proof's version is free text, which can say only its snoded: there it is
counted ready when that is at least the fork's `min_sn_version` (so, before v2 itself, a node
on an older schedule of the same snoded counts as ready: v1 proofs cannot say more).
"""

from __future__ import annotations

from typing import Any

from snode.core.proofs import parse_proof_version, parse_semver, semver_text
from snode.node.upgrade import duration
from snode.node.views import NodeView
from snode.params import FAR_AHEAD, Fork


def knows(version: str, fork: Fork) -> bool:
    """Whether a node whose last accepted proof says `version` is ready for `fork`."""
    parsed = parse_proof_version(version)
    if parsed is not None:
        # The same fork at another height is another schedule; another fork past it, a later one.
        on_it = (parsed.fork_height == fork.height if parsed.fork == fork.rules.name
                 else parsed.fork_height > fork.height)
        return on_it and parsed.snoded >= fork.rules.min_sn_version
    snoded = parse_semver(version)
    return snoded is not None and snoded >= fork.rules.min_sn_version


def next_fork(node: NodeView) -> dict[str, Any] | None:
    """`get_info`'s `next_fork`: the next fork of this node's schedule (not one FAR_AHEAD: known,
    not scheduled), when, and how many active service nodes are ready for it; None: none."""
    fork = node.params.next_fork(node.height)
    if fork is None or fork.height >= FAR_AHEAD:
        return None
    active = [pk for pk, sn in node.state.service_nodes.items() if sn.active]
    this = _this_node(node, fork)
    # A node's own proofs never reach its sn_versions (that holds peers' proofs): it counts
    # itself by its own schedule and snoded, else every SN saw one fewer than its peers do.
    own = node.identity.key.public if node.identity is not None else None
    ready = sum(1 for pk in active if (this == "ready" if pk == own else knows(node.sn_versions.get(pk, ""), fork)))
    left = fork.height - node.height - 1
    spacing = node.params.target_block_time
    eta = left * spacing if spacing > 0 else None
    when = f"in {left} blocks" + (f", ~{duration(eta)}" if eta else "")
    summary = (f"fork {fork.rules.name} at {fork.height:,} ({when}): {ready} of {len(active)} active SNs ready; "
               f"this node: {this}")
    return {"fork": fork.rules.name, "height": fork.height, "blocks_left": left, "eta_seconds": eta,
            "active_sns": len(active), "ready_sns": ready, "this_node": this, "summary": summary}


def _this_node(node: NodeView, fork: Fork) -> str:
    """`ready` (its schedule has the fork, its snoded is new enough), or why not."""
    own = node.own_snoded
    if own < fork.rules.min_sn_version:
        return f"outdated (snoded {semver_text(own)}, {semver_text(fork.rules.min_sn_version)} needed)"
    return "ready"
