"""The proof book saved while the daemon runs (a task of the daemon's), when it changed.

A restarted node then has the network's word on everyone's proofs as of at most one interval
before a crash (`node.saved` says what is saved and how; the node saves the rest when it closes).
"""

from __future__ import annotations

import asyncio
import logging

from snode.node.proofs import STORE_KEY as PROOFS_KEY
from snode.node.views import SavingNode
from snode.node.writer import ChainWriter
from snode.store.errors import StoreError

log = logging.getLogger(__name__)

MIN_SAVE_INTERVAL = 10.0
"""Seconds between the proof book's saves while the daemon runs, at least (the proof interval
otherwise: 60 s on mainnet; devnet's 2 s would be a write every other second for nothing)."""


async def keep_saving(node: SavingNode, writer: ChainWriter, interval: float | None = None) -> None:
    """Save the proof book every `interval` seconds (the proof interval, at least
    MIN_SAVE_INTERVAL) when it changed, on the store thread; a failed write is tried again at
    the next turn."""
    if interval is None:
        interval = max(float(node.params.proof_interval), MIN_SAVE_INTERVAL)
    while True:
        await asyncio.sleep(interval)
        changed = node.proofs_to_save()
        if not changed:
            continue
        try:
            await writer.call(node.write_saved, changed)
            log.debug("saved the proof book (%d bytes)", len(changed[PROOFS_KEY]))
        except StoreError as err:
            node.saved_not_written()
            log.warning("could not save the uptime proofs (%s); trying again in %g s", err, interval)
