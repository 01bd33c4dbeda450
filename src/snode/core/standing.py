"""What an operator must be told of its own service node's standing, in words it acts on.

Two things the node table does not say (issue #38): how far the node's downtime credit is from a
deregistration (an active node below `credit_min` is deregistered, not decommissioned, by its
next outage; a decommissioned one when its credit runs out), and how its key left the registry
when it is no longer there: deregistered (and the stakes locked for the penalty), unlocked, or
expired as an unfilled pool. The chain records the latter only in the block that removed the
node (a deregistration's state change, or a stake return), so `departure_in` reads it there.
"""

from __future__ import annotations

from dataclasses import dataclass

from snode.core.blocks import Block
from snode.core.credit import credit_at, decommissioned
from snode.core.service_nodes import StateChangeKind, reason_label
from snode.core.stake_exit import ReturnReason
from snode.core.state import ServiceNode
from snode.core.transactions import StakeReturn, StateChange
from snode.core.units import counted, duration
from snode.params import NetworkParams

DEREGISTERED = "deregistered"


@dataclass(frozen=True, slots=True)
class Departure:
    """How a service node's key left the registry, as the block that removed it records it."""

    height: int
    """The block that removed it."""
    kind: str
    """`deregistered`, `unlock` or `pool expired`."""
    reason: str
    """A deregistration's quorum reason (`missed_uptime_proofs`...); empty otherwise."""
    stakes_unlock_height: int
    """The first block that may spend the returned stakes (the outputs' unlock height)."""


def departure_in(block: Block, pubkey: bytes, params: NetworkParams) -> Departure | None:
    """The removal of `pubkey` from the registry that `block` carries, if it carries one."""
    height = block.header.height
    for tx in block.transactions:
        p = tx.payload
        if isinstance(p, StateChange) and p.sn_pubkey == pubkey and p.kind == StateChangeKind.DEREGISTER:
            return Departure(height, DEREGISTERED, reason_label(p.reason), height + params.deregistration_lock)
        if isinstance(p, StakeReturn) and p.sn_pubkey == pubkey:
            try:
                kind = ReturnReason(p.reason).label
            except ValueError:
                kind = f"stake return {p.reason}"
            return Departure(height, kind, "", height + params.unlock_confirmations)
    return None


def blocks_span(blocks: int, params: NetworkParams) -> str:
    """`30 days` (blocks at the network's block time), or `40 blocks` where blocks come on demand."""
    if params.target_block_time <= 0:
        return counted(blocks, "block")
    return duration(blocks * params.target_block_time)


def _in(blocks: int, params: NetworkParams) -> str:
    """`in 38 blocks, about 1 hour` (`in 38 blocks` where blocks come on demand)."""
    text = f"in {counted(blocks, 'block')}"
    return text if params.target_block_time <= 0 else f"{text}, about {duration(blocks * params.target_block_time)}"


def departure_words(d: Departure, height: int, params: NetworkParams) -> str:
    """The status line's `SN:` state for a key that left the registry, at tip `height`:
    `deregistered at height 120 (missed_uptime_proofs); stakes locked, spendable from height 160
    (in 38 blocks)`, or `unlocked at height 90; stakes returned, spendable from height 100`."""
    head = (f"deregistered at height {d.height} ({d.reason})" if d.kind == DEREGISTERED
            else f"{'unlocked' if d.kind == ReturnReason.UNLOCK.label else d.kind} at height {d.height}")
    spendable = d.stakes_unlock_height
    if d.kind == DEREGISTERED and spendable - 1 > height:  # a wallet at the tip cannot spend them yet
        return f"{head}; stakes locked, spendable from height {spendable} ({_in(spendable - height, params)})"
    return f"{head}; stakes returned, spendable from height {spendable}"


def credit_warning(sn: ServiceNode, height: int, params: NetworkParams) -> str:
    """What the downtime credit means for the next outage, when it is short of what one needs
    (empty otherwise): an active node below `credit_min` is deregistered by its next outage
    instead of decommissioned; a decommissioned node is deregistered when its credit runs out."""
    credit = credit_at(sn, height, params)
    lock = f"stake locked {blocks_span(params.deregistration_lock, params)}"
    if sn.active and credit < params.credit_min:
        safe = sn.credit_height + (params.credit_min - sn.credit) * params.credit_earn_blocks
        return (f"credit {credit} blocks: the next outage deregisters this node; {lock}; avoid "
                f"downtime until height {safe} (credit {params.credit_min} {_in(max(safe - height, 0), params)})")
    if decommissioned(sn):
        out = sn.credit_height + sn.credit
        return (f"credit {credit} blocks: deregistered at height {out} unless its uptime proofs are "
                f"accepted again before; {lock}")
    return ""


def payable_note(sn: ServiceNode, height: int, params: NetworkParams) -> str:
    """`not payable yet: rewards from height N` for an active node in its grace period; empty otherwise."""
    if not sn.active or height >= sn.active_since + params.payable_grace:
        return ""
    start = sn.active_since + params.payable_grace
    return f"not payable yet: rewards from height {start} ({params.payable_grace} blocks after activation)"
