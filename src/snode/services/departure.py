"""How this service node's key left the registry, looked up once at start (a task of the daemon's).

A daemon whose key is not registered must say whether the chain never knew it or removed it
(issue #38: a deregistered node said `not registered` and `/readyz` told it to register). The node
sees every removal it adopts (`Node._departure_after`); what happened before this start is in the
chain only, in the block that removed the node. The task looks back from the tip for it on the
store thread, CHUNK blocks a call (a few tens of milliseconds), newest first, so that blocks and
RPC reads go on between its calls; it stops at the first block naming the key, or at genesis for a
key the chain never knew.
"""

from __future__ import annotations

import logging
from typing import Final

from snode.node.node import Node
from snode.node.writer import ChainWriter
from snode.store.errors import StoreError

log = logging.getLogger(__name__)

CHUNK: Final = 2_000
"""Blocks one store-thread call reads (about 20 us each: one row and a byte search)."""


async def find_departure(node: Node, writer: ChainWriter, chunk: int = CHUNK) -> None:
    """Look back for the removal of this service node's key, if it is not registered now."""
    ident = node.identity
    if ident is None:
        return
    key = ident.key.public
    high = node.height
    while high > 0:
        if key in node.state.service_nodes or node.departure is not None:
            return  # registered again, or a removal adopted since: that is the news
        try:
            found, departure = await writer.call(node.departure_before, high, chunk)
        except StoreError as err:  # damage is the writer's to report; the state word stays as it is
            log.warning("could not look back for how service node %s left the registry: %s", key.hex()[:16], err)
            return
        if found:
            if departure is not None:
                node.note_departure(departure)
                log.info("service node %s: %s at height %d", key.hex()[:16], departure.kind, departure.height)
            return
        high -= chunk
