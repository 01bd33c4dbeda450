"""Reachability tests: a quorum member checks that each node it judges can be reached where its
uptime proofs say it is, by completing a CurveZMQ handshake with it on quorumnet.

A proof only declares an address; a node behind NAT, with a wrong `--service-node-public-ip` or a
closed quorumnet port, could otherwise stay active while no other service node can reach it.
Each node is tested at most once per `reachability_interval`, at most PROBES_AT_ONCE at a time;
the time of the first failed test since the last passed one is kept, and the judge decommissions
an active node whose tests have failed for longer than the decommission proof age (reason
`unreachable`). Only tests of a node whose proofs are not missed count: a failure while it is
silent too (past the decommission proof age) ends the streak (it is down: missed proofs), so
that a node back from an outage is not deregistered at its recommission for failures from
before it came back.

The connections we already hold (issue #37, item 1). A live quorumnet connection that this
member opened itself to the address and port the node's current proof declares, its handshake
complete (`QuorumNet.held`: authenticated to the node's key; ZeroMQ heartbeats end it when the
other end goes silent), counts as a passed test, without a new handshake, for `refresh_s` after
the last fresh handshake passed; then a fresh one is made, and one that fails ends the held
connection's word until a fresh one passes again (`check_due`). `refresh_s` is the largest
whole number of intervals within the decommission proof age (mainnet 6 x 300 s, devnet 3 x 10
s: 1,800 and 30 s), so a node that stops taking new connections while its old ones live on is
found failing at most one decommission age (and a block and PROBE_TIMEOUT) after it stopped,
and decommissioned one decommission age later (docs/SECURITY.md, "Reachability").
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import TYPE_CHECKING, Final

from snode.node.node import Node
from snode.params import NetworkParams

if TYPE_CHECKING:  # pyzmq is imported only by a service node's daemon (start-up time)
    from snode.net.quorumnet import QuorumNet

log = logging.getLogger(__name__)

PROBES_AT_ONCE: Final = 8
PROBE_TIMEOUT: Final = 5.0
"""Seconds a handshake may take (a loaded node answers in milliseconds)."""


class Check(enum.Enum):
    HELD = "held"
    """Passed by a held connection: nothing to run."""
    HANDSHAKE = "handshake"
    """A fresh handshake (`QuorumNet.probe`)."""


def refresh_s(params: NetworkParams) -> int:
    """Seconds a passed fresh handshake lets a held connection stand for a test: the most whole
    reachability intervals within the decommission proof age (at least one)."""
    interval = params.reachability_interval
    return max(1, params.decommission_proof_age // interval) * interval


def check_due(now: int, *, tested: int | None, fresh: int | None, held: Callable[[], bool],
              interval: int, refresh: int) -> Check | None:
    """The check of one node due `now` (None: none yet). `tested`: when its last check ran (held
    or fresh); `fresh`: when its last fresh handshake passed, None if none did or one failed
    since; `held()`: whether we hold a live connection we opened to its declared address (asked
    only when a check is due).

    A held connection passes the node's check once per interval while a fresh handshake passed
    less than `refresh` seconds ago; otherwise a fresh handshake is due once per interval, and at
    once when the `refresh` after the last passed one is up."""
    interval_up = tested is None or now - tested >= interval
    fresh_valid = fresh is not None and now - fresh < refresh
    if not interval_up and (fresh is None or fresh_valid):
        return None
    if fresh_valid and held():
        return Check.HELD
    return Check.HANDSHAKE


class ReachabilityTests:
    """This member's reachability tests and what they found."""

    def __init__(self, node: Node, quorumnet: QuorumNet) -> None:
        self.node = node
        self.quorumnet = quorumnet
        self.failing_since: dict[bytes, int] = {}
        self._tested: dict[bytes, int] = {}
        self._fresh: dict[bytes, int] = {}
        """When each node's last fresh handshake passed (none since one failed)."""
        self.counts = {check: 0 for check in Check}
        """Tests run, by kind (figures for /metrics)."""
        self.failed = 0
        self._running: set[bytes] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def unreachable_for(self, pubkey: bytes, now: int) -> int:
        """Seconds the tests of `pubkey` have failed without one passing (0: not failing)."""
        since = self.failing_since.get(pubkey)
        return max(now - since, 1) if since is not None else 0

    def schedule(self, pubkeys: Iterable[bytes], now: int) -> None:
        """Start the tests that are due among `pubkeys`, within the limit of tests at once."""
        interval = self.node.params.reachability_interval
        refresh = refresh_s(self.node.params)
        for pubkey in pubkeys:
            if len(self._running) >= PROBES_AT_ONCE:
                return
            if (pubkey in self._running or pubkey == self.quorumnet.key.public
                    or self.node.proofs.endpoint(pubkey) is None):
                continue  # under way, ourselves, or no proof yet: nowhere to test
            due = check_due(now, tested=self._tested.get(pubkey), fresh=self._fresh.get(pubkey),
                            held=partial(self.quorumnet.held, pubkey), interval=interval, refresh=refresh)
            if due is None:
                continue
            self._tested[pubkey] = now
            self.counts[due] += 1
            if due is Check.HELD:
                continue  # passed: a fresh handshake passed since any failed, so none is failing
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
        for book in (self.failing_since, self._tested, self._fresh):
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
            self._fresh[pubkey] = self.node.now()
            if self.failing_since.pop(pubkey, None) is not None:
                log.info("reachability: %s answers again at %s", pubkey.hex()[:16], endpoint)
            return
        self.failed += 1
        self._fresh.pop(pubkey, None)  # a held connection no longer vouches for it
        if not self._proving(pubkey):
            # Silent as well: down, which missed proofs judge. A streak kept through it would
            # deregister the node as `unreachable` the moment it is back and recommissioned,
            # on failures from before it came back.
            self.failing_since.pop(pubkey, None)
            return
        if pubkey not in self.failing_since:
            self.failing_since[pubkey] = self.node.now()
            log.info("reachability: no quorumnet handshake with %s at %s (its declared address)",
                     pubkey.hex()[:16], endpoint)


    def _proving(self, pubkey: bytes) -> bool:
        """Whether `pubkey`'s proofs are not missed (its last accepted one within the decommission
        proof age): unreachable is a node that proves it is up where no member can reach it."""
        last = self.node.proofs.last_accepted(pubkey)
        return last > 0 and self.node.now() - last <= self.node.params.decommission_proof_age


def figures(quorumnet: QuorumNet, tests: ReachabilityTests) -> dict[str, int]:
    """The counts /metrics shows (`rpc.metrics`): handshakes in and out, checks by kind, failures."""
    return {"handshakes_in": quorumnet.handshakes_in, "handshakes_out": quorumnet.handshakes_out,
            "checks_held": tests.counts[Check.HELD], "checks_handshake": tests.counts[Check.HANDSHAKE],
            "checks_failed": tests.failed}
