"""Uptime proofs from peers, checked in batches on the verifier's worker processes under load.

A proof that arrives alone is checked on the event loop's next turn, inline: one signature costs
less than a round trip to a worker.
When many arrive together (thousands of service nodes, each proof reaching a node along several
paths) the proofs of one turn are checked as one batch: the cheap rules first, then their
signatures split over the worker processes while the event loop goes on reading, relaying and
acknowledging, then each proof is accepted in arrival order, its rules checked once more against
what was accepted before it. Two batches are out at a time (one per worker) and the next gathers
meanwhile, so the node's thread and the workers keep both cores busy.

The queue is fair per peer (`FairQueue`): each peer waits in a line of its own, bounded, and a
batch takes one proof from each line in turn, so a peer that floods fills only its own line and
an honest peer's proofs are taken at once. Batches are accepted in the order they went out, and
nothing is accepted inline while one is out, so a node's later proof never overtakes its
earlier one. A forged signature in a batch bans its
sender (the caller's verdict); the proofs after it are checked again on the workers, without the
forger's, so one forger costs honest senders nothing but a second look.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from snode.core.proofs import BadProofSignature, InvalidProof, ProofRefusal, UptimeProof, proof_sig_check
from snode.core.sigchecks import SigCheck
from snode.net.limits import MAX_QUEUED_PROOFS, MAX_QUEUED_PROOFS_PER_PEER
from snode.node.node import Node
from snode.node.verifier import INLINE_BELOW, Spread, spread

log = logging.getLogger(__name__)

IN_FLIGHT: Final = 2
"""Batches out at once, while the event loop gathers the next."""
WAYS: Final = 2
"""Parts of a batch, one per worker: the daemon's thread and two workers share two cores."""
MAX_BATCH: Final = 4_096
"""Proofs in one batch at most: its halves fit in a worker's request pipe, so handing them over
never blocks the event loop."""


@dataclass(slots=True)
class Arrival:
    """A peer's proof waiting for its check, and where it came from."""

    proof: UptimeProof
    peer: object
    peer_name: str
    relayed: bool
    seq: int = 0
    """Its place in arrival order (`FairQueue` numbers it): a batch is checked in this order."""


class FairQueue:
    """Proofs waiting for their check, one line per peer (MAX_QUEUED_PROOFS_PER_PEER each,
    MAX_QUEUED_PROOFS together); `take` goes round the lines. When the whole queue is full, the
    longest line loses its newest proof to a newcomer from a shorter one. A dropped proof's
    signer sends again next interval."""

    def __init__(self) -> None:
        self._lines: dict[int, collections.deque[Arrival]] = {}
        self._count = 0
        self._seq = 0

    def __len__(self) -> int:
        return self._count

    def add(self, arrival: Arrival) -> Arrival | None:
        """Queue `arrival`; the arrival that was dropped for it (perhaps itself), or None."""
        line = self._lines.get(id(arrival.peer))
        mine = len(line) if line is not None else 0
        if mine >= MAX_QUEUED_PROOFS_PER_PEER:
            return arrival
        dropped = None
        if self._count >= MAX_QUEUED_PROOFS:
            longest = max(self._lines.values(), key=len)
            if len(longest) <= mine + 1:
                return arrival
            dropped = longest.pop()
            self._count -= 1
        if line is None:
            line = self._lines[id(arrival.peer)] = collections.deque()
        self._seq += 1
        arrival.seq = self._seq
        line.append(arrival)
        self._count += 1
        return dropped

    def take(self, count: int) -> list[Arrival]:
        """Up to `count` proofs, one from each peer's line in turn, in arrival order."""
        taken: list[Arrival] = []
        while self._lines and len(taken) < count:
            for source in list(self._lines):
                line = self._lines[source]
                taken.append(line.popleft())
                if not line:
                    del self._lines[source]
                if len(taken) >= count:
                    break
        self._count -= len(taken)
        taken.sort(key=lambda a: a.seq)
        return taken

    def clear(self) -> None:
        self._lines.clear()
        self._count = 0


async def _answer(answer: Spread) -> int:
    """The first bad signature's index, waited for off the event loop when the workers have not
    answered yet."""
    return answer.result() if answer.done else await asyncio.to_thread(answer.result)


@dataclass(slots=True)
class Batch:
    """Proofs whose signatures the verifier checks together."""

    arrivals: list[Arrival]
    now: int
    checks: list[SigCheck]
    answer: Spread
    outdated: dict[int, InvalidProof]
    """Index -> the refusal of the proofs the rules refused as outdated: their signatures are
    checked too, since an outdated proof marks its node only if its key signed it."""


Verdict = Callable[[Arrival, InvalidProof | None], None]
"""Told of the end of every proof the intake takes: None when the node accepted it, else why not.
(Copies of a proof queued or accepted already are dropped without a word: proofs reach a node
along several paths.)"""


class ProofIntake:
    """The queue between the peers' proofs and `Node.accept_proof`."""

    def __init__(self, node: Node, verdict: Verdict) -> None:
        self.node = node
        self.verdict = verdict
        self._queue = FairQueue()
        self._queued: set[tuple[bytes, int]] = set()
        self._scheduled = False
        self._out: collections.deque[Batch] = collections.deque()
        """Batches handed to the verifier, oldest first: accepted in this order."""
        self._drain: asyncio.Task[None] | None = None
        self.batches = 0
        """Batches handed to the verifier (for tests)."""

    def add(self, arrival: Arrival) -> None:
        """Queue a proof for the next check; copies of a queued proof are dropped."""
        key = (arrival.proof.pubkey, arrival.proof.timestamp)
        if key in self._queued:
            return
        dropped = self._queue.add(arrival)
        if dropped is not arrival:
            self._queued.add(key)
            self._schedule()
        if dropped is not None:
            self._queued.discard((dropped.proof.pubkey, dropped.proof.timestamp))
            log.debug("uptime proof of %s from %s dropped: %d proofs wait for their checks",
                      dropped.proof.pubkey.hex()[:16], dropped.peer_name, len(self._queue))

    async def close(self) -> None:
        """Stop checking (shutdown): the queued proofs are dropped."""
        self._queue.clear()
        self._queued.clear()
        self._out.clear()
        drain = self._drain
        if drain is not None:
            drain.cancel()
            try:
                await drain
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # our own cancellation, not the drain's

    # --- checking ----------------------------------------------------------------------------

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _take(self, count: int) -> list[Arrival]:
        taken = self._queue.take(count)
        for arrival in taken:
            self._queued.discard((arrival.proof.pubkey, arrival.proof.timestamp))
        return taken

    def _flush(self) -> None:
        """Check what has gathered: inline when it is little and no batch is out, else as a
        batch for the workers (at most IN_FLIGHT out; the rest waits for a slot)."""
        self._scheduled = False
        while self._queue and len(self._out) < IN_FLIGHT:
            now = self.node.now()
            if len(self._queue) < INLINE_BELOW and not self._out:
                for arrival in self._take(len(self._queue)):
                    self._accept(arrival, now, signature_checked=False)
                return
            self._send(self._take(MAX_BATCH), now)

    def _send(self, arrivals: list[Arrival], now: int) -> None:
        """The cheap rules now, the signatures on the workers."""
        passed: list[Arrival] = []
        outdated: dict[int, InvalidProof] = {}
        for arrival in arrivals:
            try:
                self.node.check_proof(arrival.proof, now, signature=False)
            except InvalidProof as err:
                if err.code is not ProofRefusal.OUTDATED or arrival.proof.pubkey not in self.node.state.service_nodes:
                    self.verdict(arrival, err)
                    continue
                outdated[len(passed)] = err  # judged once its signature is (`_accept_checked`)
            passed.append(arrival)
        if not passed:
            return
        params = self.node.params
        checks = [proof_sig_check(a.proof, params) for a in passed]
        self._out.append(Batch(passed, now, checks, spread(self.node.verifier, checks, WAYS), outdated))
        if self._drain is None:
            self._drain = asyncio.get_running_loop().create_task(self._accept_batches())

    async def _accept_batches(self) -> None:
        """Accept the batches out, oldest first, as their answers come."""
        try:
            while self._out:
                batch = self._out[0]
                try:
                    forged = await self._forged(batch)
                except Exception:  # a bug, or a verifier gone: check each of them inline
                    log.exception("uptime proofs: checking a batch of %d failed", len(batch.checks))
                    forged = None
                if not self._out or self._out[0] is not batch:
                    return  # closed meanwhile
                self._out.popleft()
                self.batches += 1
                self._accept_checked(batch, forged)
                if self._queue:
                    self._schedule()  # a slot is free (after this batch: nothing inline overtakes it)
        finally:
            self._drain = None

    async def _forged(self, batch: Batch) -> dict[int, bool]:
        """Which of the batch's proofs fail: index -> True for a forged signature, False for a
        proof of a forger after its forged one (not looked at: the forger is banned)."""
        forged: dict[int, bool] = {}
        forgers: set[int] = set()
        positions = list(range(len(batch.checks)))
        bad = await _answer(batch.answer)
        while bad >= 0:
            at = positions[bad]
            forged[at] = True
            forgers.add(id(batch.arrivals[at].peer))
            rest = positions[bad + 1:]
            for i in rest:
                if id(batch.arrivals[i].peer) in forgers:
                    forged.setdefault(i, False)
            positions = [i for i in rest if i not in forged]
            if not positions:
                break
            bad = await _answer(spread(self.node.verifier, [batch.checks[i] for i in positions], WAYS))
        return forged

    def _accept_checked(self, batch: Batch, forged: dict[int, bool] | None) -> None:
        for i, arrival in enumerate(batch.arrivals):
            refusal = batch.outdated.get(i)
            if refusal is not None and forged is not None and i not in forged:
                self.node.note_outdated(arrival.proof)  # signed by its key: its snoded is outdated
                self.verdict(arrival, refusal)
            elif forged is None:
                self._accept(arrival, batch.now, signature_checked=False)
            elif i not in forged:
                self._accept(arrival, batch.now, signature_checked=True)
            elif forged[i]:
                self.verdict(arrival, BadProofSignature("proof signature is not valid"))

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
        except Exception:  # a bug: log it, go on with the other proofs
            log.exception("uptime proof of %s from %s", proof.pubkey.hex()[:16], arrival.peer_name)
            return
        self.verdict(arrival, None)
