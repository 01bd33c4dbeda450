"""Downtime credit: how long a service node may be down before its quorum deregisters it.

Oxen's rule, in blocks: an active node earns one block of credit for every `credit_earn_blocks`
blocks it is up, to at most `credit_max`, starting from `credit_initial` at activation; a
decommissioned node spends one block of credit per block. A funded node never activated yet
spends nothing: it is waiting for the quorum to see its first proof, not down, and activation
gives it `credit_initial` anyway. A failing active node is decommissioned only while it holds at least `credit_min`
(otherwise it is deregistered at once), and a decommissioned node whose credit runs out is
deregistered. On recommission the credit is what it had at its decommission less twice the
blocks it spent decommissioned, never below 0.

A record keeps the credit it had at `credit_height` and whether it grows or runs down since;
the credit at any later height is computed, so no block has to touch every node.
"""

from __future__ import annotations

from snode.core.state import NO_HEIGHT, ServiceNode
from snode.params import NetworkParams


def credit_at(sn: ServiceNode, height: int, params: NetworkParams) -> int:
    """Blocks of downtime credit `sn` holds at `height` (never below 0)."""
    elapsed = max(height - sn.credit_height, 0)
    if sn.active:
        return min(params.credit_max, sn.credit + elapsed // params.credit_earn_blocks)
    if decommissioned(sn):
        return max(0, sn.credit - elapsed)
    return sn.credit


def decommissioned(sn: ServiceNode) -> bool:
    """Funded, active once, not active now: the only state that spends credit."""
    return sn.funded and not sn.active and sn.active_since != NO_HEIGHT


def credit_after_recommission(sn: ServiceNode, height: int) -> int:
    """The credit of a decommissioned node recommissioned at `height`: its credit at the
    decommission less twice the blocks it spent decommissioned, never below 0."""
    return max(0, sn.credit - 2 * max(height - sn.credit_height, 0))
