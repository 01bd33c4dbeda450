"""Uptime proofs from peers, checked in batches on the verifier's worker processes under load.

A proof that arrives alone is checked on the event loop's next turn, inline, as it always was.
When many arrive together (thousands of service nodes, each proof reaching a node along several
paths) the proofs of one turn are checked as one batch: the cheap rules first, then their
signatures split over the worker processes while the event loop goes on reading, relaying and
acknowledging, then each proof is accepted in arrival order, its rules checked once more against
what was accepted before it. Two batches are out at a time (one per worker) and the next gathers
meanwhile, so the node's thread and the workers keep both cores busy.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from snode.core.proofs import BadProofSignature, InvalidProof, UptimeProof, check_proof_rules, proof_sig_check
from snode.node.node import Node
from snode.node.verifier import INLINE_BELOW, Pending

log = logging.getLogger(__name__)

IN_FLIGHT: Final = 2
"""Batches out at once: one per worker on two cores, while the event loop gathers the next."""
MAX_QUEUED: Final = 50_000
"""Proofs waiting for a check at most; more are dropped (their senders send again next interval)."""


@dataclass(slots=True)
class Arrival:
    """A peer's proof waiting for its check, and where it came from."""

    proof: UptimeProof
    peer: object
    peer_name: str
    relayed: bool


@dataclass(slots=True)
class Batch:
    """Proofs whose signatures the verifier checks together."""

    arrivals: list[Arrival]
    now: int
    parts: list[tuple[int, Pending]]
    """(index of its first check, the answer) per part: a large batch is split over the workers."""

    @property
    def done(self) -> bool:
        return all(pending.done for _, pending in self.parts)

    def first_bad(self) -> int:
        """Index of the first bad signature, or -1 (waits for the workers)."""
        for start, pending in self.parts:
            bad = pending.result()
            if bad >= 0:
                return start + bad
        return -1


Verdict = Callable[[Arrival, InvalidProof | None], None]
"""Told of every proof's end: None when the node accepted it, else why not."""


class ProofIntake:
    """The queue between the peers' proofs and `Node.accept_proof`."""

    def __init__(self, node: Node, verdict: Verdict) -> None:
        self.node = node
        self.verdict = verdict
        self._queue: list[Arrival] = []
        self._queued: set[tuple[bytes, int]] = set()
        self._scheduled = False
        self._out: collections.deque[Batch] = collections.deque()
        """Batches handed to the verifier, oldest first: accepted in this order, so that a
        node's later proof never overtakes its earlier one."""
        self._drain: asyncio.Task[None] | None = None
        self.batches = 0
        """Batches checked on the workers (for tests and the log)."""

    def add(self, arrival: Arrival) -> None:
        """Queue a proof for the next check; copies of a queued proof are dropped."""
        key = (arrival.proof.pubkey, arrival.proof.timestamp)
        if key in self._queued:
            return
        if len(self._queue) >= MAX_QUEUED:
            log.debug("uptime proof of %s dropped: %d proofs wait for their checks",
                      arrival.proof.pubkey.hex()[:16], len(self._queue))
            return
        self._queued.add(key)
        self._queue.append(arrival)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    async def close(self) -> None:
        """Stop checking (shutdown): the queued proofs are dropped."""
        self._queue.clear()
        self._queued.clear()
        self._out.clear()
        if self._drain is not None:
            self._drain.cancel()
            try:
                await self._drain
            except asyncio.CancelledError:
                pass

    # --- checking ----------------------------------------------------------------------------

    def _flush(self) -> None:
        """Check what has gathered: inline when it is little and nothing is out, else as a
        batch for the workers (at most IN_FLIGHT out at once; the rest waits for a slot)."""
        self._scheduled = False
        if not self._queue or len(self._out) >= IN_FLIGHT:
            return
        arrivals, self._queue = self._queue, []
        self._queued.clear()
        now = self.node.now()
        if len(arrivals) < INLINE_BELOW and not self._out:
            for arrival in arrivals:
                self._accept(arrival, now, signature_checked=False)
            return
        passed: list[Arrival] = []
        for arrival in arrivals:
            try:
                self._check_rules(arrival.proof, now)
            except InvalidProof as err:
                self.verdict(arrival, err)
                continue
            passed.append(arrival)
        if not passed:
            return
        params, verifier = self.node.params, self.node.verifier
        checks = [proof_sig_check(a.proof, params) for a in passed]
        step = -(-len(checks) // 2) if len(checks) >= 2 * INLINE_BELOW else len(checks)
        parts = [(start, verifier.submit(checks[start:start + step])) for start in range(0, len(checks), step)]
        self._out.append(Batch(passed, now, parts))
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self._accept_batches())

    async def _accept_batches(self) -> None:
        """Accept the batches out, oldest first, as their answers come."""
        try:
            while self._out:
                batch = self._out[0]
                bad = batch.first_bad() if batch.done else await asyncio.to_thread(batch.first_bad)
                if not self._out or self._out[0] is not batch:
                    return  # closed meanwhile
                self._out.popleft()
                if len(batch.arrivals) >= INLINE_BELOW:
                    self.batches += 1
                self._flush()  # a slot is free: the next batch goes out before this one is taken
                try:
                    self._accept_checked(batch, bad)
                except Exception:  # a bug: log it, keep taking proofs
                    log.exception("uptime proofs: accepting a batch of %d failed", len(batch.arrivals))
        finally:
            self._drain = None

    def _accept_checked(self, batch: Batch, bad: int) -> None:
        for i, arrival in enumerate(batch.arrivals):
            if bad < 0 or i < bad:
                self._accept(arrival, batch.now, signature_checked=True)
            elif i == bad:
                self.verdict(arrival, BadProofSignature("proof signature is not valid"))
            else:  # after the bad one: not looked at by the batch
                self._accept(arrival, batch.now, signature_checked=False)

    def _check_rules(self, proof: UptimeProof, now: int) -> None:
        node = self.node
        check_proof_rules(proof, node.params, registered=proof.pubkey in node.state.service_nodes, now=now,
                          last_accepted=node.proofs.last_accepted(proof.pubkey),
                          previous_accepted=node.proofs.previous_accepted(proof.pubkey))

    def _accept(self, arrival: Arrival, now: int, *, signature_checked: bool) -> None:
        proof = arrival.proof
        if self.node.proofs.last_accepted(proof.pubkey) == proof.timestamp:
            return  # a copy that came by another path while this one waited
        try:
            self.node.accept_proof(proof, now, source=arrival.peer, relayed=arrival.relayed,
                                   signature_checked=signature_checked)
        except InvalidProof as err:
            self.verdict(arrival, err)
            return
        self.verdict(arrival, None)
