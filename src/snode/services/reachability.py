"""Reachability tests: a quorum member checks that each node it judges can be reached where its
uptime proofs say it is, by completing a CurveZMQ handshake with it on quorumnet.

A proof only declares an address; a node behind NAT, with a wrong `--service-node-public-ip` or a
closed quorumnet port, could otherwise stay active while no other service node can reach it.
Each node is tested at most once per `reachability_interval`, at most PROBES_AT_ONCE at a time;
the time of the first failed test since the last passed one is kept, and the judge decommissions
an active node whose tests have failed for longer than the decommission proof age (reason
`unreachable`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from snode.node.node import Node

if TYPE_CHECKING:  # pyzmq is imported only by a service node's daemon (start-up time)
    from snode.net.quorumnet import QuorumNet

log = logging.getLogger(__name__)

PROBES_AT_ONCE: Final = 8
PROBE_TIMEOUT: Final = 5.0
"""Seconds a handshake may take (a loaded node answers in milliseconds)."""


class ReachabilityTests:
    """This member's reachability tests and what they found."""

    def __init__(self, node: Node, quorumnet: QuorumNet) -> None:
        self.node = node
        self.quorumnet = quorumnet
        self.failing_since: dict[bytes, int] = {}
        self._tested: dict[bytes, int] = {}
        self._running: set[bytes] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def unreachable_for(self, pubkey: bytes, now: int) -> int:
        """Seconds the tests of `pubkey` have failed without one passing (0: not failing)."""
        since = self.failing_since.get(pubkey)
        return max(now - since, 1) if since is not None else 0

    def schedule(self, pubkeys: Iterable[bytes], now: int) -> None:
        """Start the tests that are due among `pubkeys`, within the limit of tests at once."""
        interval = self.node.params.reachability_interval
        for pubkey in pubkeys:
            if len(self._running) >= PROBES_AT_ONCE:
                return
            last = self._tested.get(pubkey)
            if pubkey in self._running or (last is not None and now - last < interval):
                continue
            if self.node.proofs.endpoint(pubkey) is None:
                continue  # no proof yet: nowhere to test
            self._tested[pubkey] = now
            self._running.add(pubkey)
            task = asyncio.get_running_loop().create_task(self._test(pubkey))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Cancel the tests under way (before quorumnet stops)."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def forget_gone(self, registered: Iterable[bytes]) -> None:
        """Drop what is known of nodes that left the registry (bounded memory)."""
        keep = set(registered)
        for book in (self.failing_since, self._tested):
            for pubkey in [k for k in book if k not in keep]:
                del book[pubkey]

    async def _test(self, pubkey: bytes) -> None:
        try:
            reached = await self.quorumnet.probe(pubkey, PROBE_TIMEOUT)
        except Exception as err:  # a transport error is a failed test, never a dead duty loop
            log.info("reachability test of %s could not run: %s", pubkey.hex()[:16], err)
            reached = None
        finally:
            self._running.discard(pubkey)
        if reached is None:
            return
        endpoint = self.node.proofs.endpoint(pubkey)
        if reached:
            if self.failing_since.pop(pubkey, None) is not None:
                log.info("reachability: %s answers again at %s", pubkey.hex()[:16], endpoint)
        elif pubkey not in self.failing_since:
            self.failing_since[pubkey] = self.node.now()
            log.info("reachability: no quorumnet handshake with %s at %s (its declared address)",
                     pubkey.hex()[:16], endpoint)
