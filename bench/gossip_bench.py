"""Proof gossip's bookkeeping, measured in one process (`python -m bench.gossip_bench`): a mesh of
12 nodes, each a real `ProofGossip` (sans-IO), on a simulated clock and network, shaped like the
blocks benchmark's devnet (each node signs a proof every 2 s and dials 4 others; 5 ms a hop). The
event loop's part of the relay is played by this harness as the relay does it: a wake-up timer
re-armed when `next_due` moves earlier, the announcements every INV_INTERVAL.

It prints the CPU time (`time.process_time`) spent inside ProofGossip's calls, per node and per
round of proofs, and the calls and wake-ups, so that a change to the bookkeeping is measured before
and after on the same machine (run it with PYTHONPATH pointing at each tree's src/)."""

from __future__ import annotations

import functools
import heapq
import itertools
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Hashable
from typing import Any

from snode.core.proofs import UptimeProof
from snode.net.proof_gossip import INV_INTERVAL, ProofGossip

NODES = 12
DIALS = 4
HOP = 0.005
PROOF_INTERVAL = 2.0


class _Side:
    """One node of the mesh as its gossip sees it (`proof_gossip.GossipSide`)."""

    def __init__(self, registered: frozenset[bytes], book: dict[bytes, int], links: set[int],
                 dialled: set[int]) -> None:
        self._registered, self._book, self._links, self._dialled = registered, book, links, dialled

    def registry(self) -> frozenset[bytes]:
        return self._registered

    def accepted_at(self, key: bytes) -> int:
        return self._book.get(key, 0)

    def connected(self, peer: Hashable) -> bool:
        return peer in self._links

    def outbound(self, peer: Hashable) -> bool:
        return peer in self._dialled

    def address(self, peer: Hashable) -> Hashable:
        return peer


class _MeshClock:
    """The mesh's simulated time, as a node's clock (seconds)."""

    def __init__(self, mesh: Mesh) -> None:
        self._mesh = mesh

    def time(self) -> float:
        return int(self._mesh.now) + 10**9


class Mesh:
    def __init__(self, rounds: int, keys: list[bytes] | None = None) -> None:
        self.keys = keys or [os.urandom(32) for _ in range(NODES)]
        self.trace: list[tuple[int, float, str, tuple[Any, ...]]] = []
        """Every call made of a node's ProofGossip, in order, with the clock (`replay`)."""
        registered = frozenset(self.keys)
        self.rounds = rounds
        self.now = 0.0
        self.events: list[tuple[float, int, Callable[[], None]]] = []
        self.order = itertools.count()
        self.calls: Counter[str] = Counter()
        self.books: list[dict[bytes, int]] = [{} for _ in range(NODES)]
        self.wakes: list[tuple[float, int] | None] = [None] * NODES
        self.links: list[set[int]] = [set() for _ in range(NODES)]
        self.dialled: list[set[int]] = [set() for _ in range(NODES)]
        for i in range(NODES):
            for d in range(1, DIALS + 1):
                j = (i + d) % NODES
                self.dialled[i].add(j)
                self.links[i].add(j)
                self.links[j].add(i)
        self.gossip = [self._gossip(i, registered) for i in range(NODES)]
        for i in range(NODES):
            for j in sorted(self.links[i]):
                self._call(i, "state", self.gossip[i].state, j)

    def _gossip(self, i: int, registered: frozenset[bytes]) -> ProofGossip:
        return ProofGossip(_Side(registered, self.books[i], self.links[i], self.dialled[i]), _MeshClock(self))

    def _call(self, i: int, name: str, method: Callable[..., Any], *args: Any) -> Any:
        self.calls[name] += 1
        self.trace.append((i, self.now, name, args))
        return method(*args)

    def at(self, when: float, action: Callable[[], None]) -> None:
        heapq.heappush(self.events, (when, next(self.order), action))

    def send(self, i: int, j: int, kind: str, payload: Any) -> None:
        self.calls["messages"] += 1
        self.at(self.now + HOP, lambda: self.receive(j, i, kind, payload))

    def receive(self, i: int, j: int, kind: str, payload: Any) -> None:
        g = self.gossip[i]
        if kind == "proof":
            self._call(i, "learn", self.learn, g, j, payload)
            self.accept(i, payload, j)
        elif kind == "inv":
            request = self._call(i, "announced", g.announced, j, payload, self.now)
            if request is not None:
                self.send(i, j, "get", request.ids)
        elif kind == "get":
            self.send(i, j, "proofs", self._call(i, "serve", g.serve, j, payload))
        elif kind == "proofs":
            answer = self._call(i, "answered", g.answered, j, payload, self.now)
            self.requests(i, answer.requests)
            for proof in answer.proofs:
                self.accept(i, proof, j)
        self.rearm(i)

    @staticmethod
    def learn(g: ProofGossip, peer: int, proof: UptimeProof) -> None:
        """What the relay does with a proof pushed to us (`Relay._on_proof`)."""
        if g.registered(proof.pubkey):
            state = g.state(peer)
            if state is not None:
                state.learn(proof.pubkey, proof.timestamp)

    def accept(self, i: int, proof: UptimeProof, source: int | None) -> None:
        book = self.books[i]
        if book.get(proof.pubkey, 0) >= proof.timestamp:
            return
        self.trace.append((i, self.now, "book", (proof.pubkey, proof.timestamp)))
        book[proof.pubkey] = proof.timestamp
        self._call(i, "accepted", self.gossip[i].accepted, proof, source)

    def requests(self, i: int, requests: list[tuple[Any, Any]]) -> None:
        for peer, request in requests:
            self.send(i, peer, "get", request.ids)

    def rearm(self, i: int) -> None:
        """The relay's `_wake_at_next_due`: a timer moved only when the next due time is earlier."""
        when = self._call(i, "next_due", self.gossip[i].next_due)
        wake = self.wakes[i]
        if when is None or (wake is not None and wake[0] <= when):
            return
        self.calls["timers armed"] += 1
        token = next(self.order)
        self.wakes[i] = (when, token)
        self.at(max(when, self.now), lambda: self.wake(i, token))

    def wake(self, i: int, token: int) -> None:
        wake = self.wakes[i]
        if wake is None or wake[1] != token:
            return  # cancelled
        self.wakes[i] = None
        self.calls["timer wakes"] += 1
        requests = self._call(i, "due", self.gossip[i].due, self.now)
        self.calls["wakes that asked nothing"] += not requests
        self.requests(i, requests)
        self.rearm(i)

    def sign(self, i: int, timestamp: int) -> None:
        proof = UptimeProof(self.keys[i], timestamp, "1.2.3.4", 1, 2, "0.1.0", bytes(64))
        self.accept(i, proof, None)
        for j in self.links[i]:
            self.send(i, j, "proof", proof)

    def announce(self, i: int) -> None:
        g = self.gossip[i]
        for peer, messages in self._call(i, "announcements", g.announcements, sorted(self.links[i])):
            for message in messages:
                self.send(i, peer, "inv", message.ids)
        self._call(i, "overdue", g.overdue, self.now)
        self.rearm(i)

    def run(self) -> None:
        end = self.rounds * PROOF_INTERVAL
        for r in range(self.rounds):
            for i in range(NODES):
                self.at(r * PROOF_INTERVAL + i * PROOF_INTERVAL / NODES, functools.partial(self.sign, i, 10**9 + 2 * r))
        for i in range(NODES):
            for k in range(int(end / INV_INTERVAL)):
                self.at(k * INV_INTERVAL + 0.0137 * i, functools.partial(self.announce, i))
        while self.events and self.events[0][0] <= end:
            self.now, _, action = heapq.heappop(self.events)
            action()


def replay(mesh: Mesh) -> float:
    """The CPU time of `mesh`'s ProofGossip calls made again, in order, on fresh nodes, with no
    clock read per call (the figure to compare; the live run's per-call times carry the
    clock's own cost)."""
    again = Mesh(mesh.rounds, mesh.keys)
    gossip, books = again.gossip, again.books
    start = time.process_time()
    for i, now, name, args in mesh.trace:
        again.now = now
        if name == "book":
            books[i][args[0]] = args[1]
        elif name == "learn":
            Mesh.learn(gossip[i], args[1], args[2])
        else:
            getattr(gossip[i], name)(*args)
    return time.process_time() - start


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    best = Mesh(rounds)
    best.run()
    print(f"{NODES} nodes, {rounds} rounds, {best.calls['accepted'] / NODES / rounds:.1f} proofs accepted a node "
          f"a round (of {NODES})")
    cpu = min(replay(best) for _ in range(5))
    print(f"ProofGossip CPU (its calls replayed): {cpu * 1e3 / NODES / rounds:.3f} ms a node a round "
          f"(best of 5), {cpu * 1e6 / max(1, best.calls['accepted']):.1f} us an accepted proof")
    print("a node a round:", ", ".join(f"{name} {count / NODES / rounds:.1f}"
                                       for name, count in sorted(best.calls.items())))

if __name__ == "__main__":
    main()
