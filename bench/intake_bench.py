"""Uptime-proof intake per proof, in process (`python -m bench intake`): the CPU a service node's
event-loop thread spends on a peer's proof, against the one Ed25519 verification it needs.

The path measured is the daemon's own, wired as `app/daemon.py` wires it: a `Node` on a regtest
chain with SERVICE_NODES registered, active service nodes (built with DevChain; the node is one of
them), the event counters, the event feed, a `PeerManager` with PEERS handshaken peers on real
loopback TCP connections (the far ends read and discard in threads of their own), `Relay` and
`ServiceNodeDuties`. Every other service node's proof arrives straight from its signer's peer:
the `ProofMessage` event P2P publishes (`relay._on_proof`), the duties' IP check, the intake's
queue and its check (`Node.accept_proof`: the rules and the signature), the accept and its
`ProofAccepted` subscribers (the relay's announcement to the other peers, the metrics, the duties),
the verdict (`ProofAck`) and the peers' writes.

The proofs come as on the benchmark's 12-node devnet, where each node sends one every 2 s at its
own moment: at random (exponential gaps, seeded), RATE a second on average, each round of one
proof per node in a random order. To take seconds rather than minutes, they come SPEED times
faster. Then COPIES peers relay each proof of the last round back to us,
ROUNDS times over (each proof reaches a devnet node along 8-9 paths): each copy is dropped as known.

Figures, the median of TRIALS trials of ROUNDS rounds, on CPU clocks (`time.thread_time`: the
machine's other work does not count, the sleeps between proofs neither; each proof's wake-up does):
- this node's CPU per accepted proof (the loop thread), and per copy dropped;
- the peers' reads per proof and their threads' CPU reading (a floor for a daemon's reads: no
  frames decoded, no event loop);
- the limit, in the same trial: one first-sight verification of each proof's signature
  (`verify_uncached` of its signed message); this node's CPU per proof in verifications.
No target: figures to compare, in the same minutes (docs/PERFORMANCE.md, 2d).

`--profile` adds a cProfile of one more trial (its top functions, inclusive).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import pstats
import random
import socket
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from snode.common.clock import MockableClock
from snode.core.crypto import SigningKey, verify_uncached
from snode.core.proofs import UptimeProof, make_proof, proof_message
from snode.core.state import undo_block
from snode.devchain import DevChain, key_from_label
from snode.net import protocol as P
from snode.net.events import ProofMessage
from snode.net.peer import Peer, PeerProtocol
from snode.net.peers import PeerManager
from snode.net.relay import Relay
from snode.node.node import Identity, Node
from snode.node.writer import ChainWriter
from snode.params import COIN, REGTEST
from snode.rpc.counters import EventCounters
from snode.services.event_feed import EventFeed
from snode.services.sn_duties import ServiceNodeDuties
from snode.store.memory import MemoryStore

SERVICE_NODES: Final = 12
"""As the blocks benchmark's devnet: this node and 11 others."""
PEERS: Final = SERVICE_NODES - 1
COPIES: Final = 8
"""Relayed copies of each accepted proof that reach the node afterwards (8-9 on the devnet)."""
RATE: Final = PEERS / REGTEST.proof_interval
"""Proofs a second the node accepts: each other node's one a proof interval (2 s, as devnet's)."""
SPEED: Final = 20
"""The proofs come SPEED times faster than RATE."""
POLL_S: Final = 0.0125
"""How often the end of a trial looks whether the last round's proofs are accepted."""
ROUNDS: Final = 50
TRIALS: Final = 5
IP: Final = "127.0.0.1"


@dataclass(frozen=True)
class Trial:
    intake_us: float
    """This node's CPU per accepted proof, from its ProofMessage to its verdict and relay written."""
    peers_us: float
    """The far ends' CPU per accepted proof, reading what we wrote (all PEERS together)."""
    reads: float
    """Reads at the far ends per accepted proof (all PEERS together)."""
    copy_us: float
    """CPU per relayed copy of a proof the node has."""
    verify_us: float
    """One first-sight verification of a proof's signature."""


def _chain() -> tuple[DevChain, list[SigningKey]]:
    operators = [key_from_label(f"intake bench operator {i}") for i in range(SERVICE_NODES)]
    keys = [key_from_label(f"intake bench node {i}") for i in range(SERVICE_NODES)]
    chain = DevChain.create({k.public: 200_001 * COIN for k in operators})
    chain.register_active(list(zip(operators, keys)))
    return chain, keys


class FarEnd:
    """A peer's side of a connection, reading and discarding in a thread of its own: how many
    reads our writes cost it, and its thread's CPU (a floor for a daemon's: no frames decoded)."""

    def __init__(self, sock: socket.socket) -> None:
        self.reads = 0
        self.cpu_s = 0.0
        threading.Thread(target=self._drain, args=(sock,), daemon=True).start()

    def _drain(self, sock: socket.socket) -> None:
        with sock:
            while sock.recv(1 << 16):
                self.reads += 1
                self.cpu_s = time.thread_time()


async def _peer(listener: socket.socket, hello: P.Hello, ends: list[FarEnd]) -> Peer:
    """Our end of a loopback connection whose far end reads and discards everything."""
    ours = socket.create_connection(listener.getsockname())
    far, _ = listener.accept()
    ends.append(FarEnd(far))
    _, protocol = await asyncio.get_running_loop().create_connection(lambda: PeerProtocol(outbound=True), sock=ours)
    peer = protocol.peer
    assert peer is not None
    peer.hello = hello
    return peer


class Bench:
    """The daemon's proof path, wired on one node."""

    def __init__(self, chain: DevChain, keys: list[SigningKey]) -> None:
        state = chain.state
        for undo in reversed(chain.undos):
            state = undo_block(state, undo)
        self.clock = MockableClock()
        self.clock.set_mock(chain.now)
        self.keys = keys[1:]
        self.node = node = Node(
            params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], state),
            state=state, identity=Identity(keys[0], IP, 9230, 9232), producer_key=None, clock=self.clock)
        self.writer = ChainWriter(node)
        self.chain = chain
        EventCounters(node.hub)
        EventFeed(node)
        self.peers = PeerManager(node, bind_ip=IP, listen_port=0, priority=[])
        Relay(self.peers, self.writer)
        self.duties = ServiceNodeDuties(node, self.peers, quorumnet=None)
        self.now = chain.now + 1_000
        self.random = random.Random(27)
        self.ends: list[FarEnd] = []

    async def start(self) -> None:
        for block in self.chain.blocks[1:]:
            await self.writer.accept_block(block)
        node = self.node
        hello = P.Hello(node.params.network_id, node.consensus.genesis_hash, P.PROTOCOL_VERSION, "bench",
                        node.height, node.state.tip_hash, 0, 1)
        with socket.create_server((IP, 0)) as listener:
            for _ in range(PEERS):
                self.peers.peers.add(await _peer(listener, hello, self.ends))

    def proofs(self) -> list[list[UptimeProof]]:
        """ROUNDS rounds of a fresh proof of each other service node, a proof interval apart."""
        rounds = []
        for _ in range(ROUNDS):
            self.now += self.node.params.proof_interval
            rounds.append([make_proof(k, self.node.params, timestamp=self.now, public_ip=IP, p2p_port=9230,
                                      quorumnet_port=9232, version="bench") for k in self.keys])
        return rounds

    async def trial(self) -> Trial:
        rounds = self.proofs()
        accepted = ROUNDS * PEERS
        peers = sorted(self.peers.peers, key=lambda p: p.port)
        hub, book = self.node.hub, self.node.proofs
        gaps = iter([self.random.expovariate(RATE * SPEED) for _ in range(accepted)])
        reads, far_cpu = sum(e.reads for e in self.ends), sum(e.cpu_s for e in self.ends)
        t0 = time.thread_time()
        for proofs in rounds:
            self.clock.set_mock(proofs[0].timestamp)
            for i in self.random.sample(range(PEERS), PEERS):
                await asyncio.sleep(next(gaps))
                hub.publish(ProofMessage(peers[i], IP, peers[i].name, P.Proof(proofs[i], relayed=False)))
        for _ in range(100):
            await asyncio.sleep(POLL_S)
            if all(book.last_accepted(p.pubkey) == p.timestamp for p in rounds[-1]):
                break
        else:
            raise AssertionError("the last round's proofs were not accepted")
        await asyncio.sleep(0)  # the writes queued by the last accept
        intake_s = time.thread_time() - t0
        await asyncio.sleep(0.05)  # the far ends read the last writes
        return Trial(
            1e6 * intake_s / accepted,
            1e6 * (sum(e.cpu_s for e in self.ends) - far_cpu) / accepted,
            (sum(e.reads for e in self.ends) - reads) / accepted,
            self._copies(rounds[-1], peers), self._verifications(rounds))

    def _copies(self, proofs: list[UptimeProof], peers: list[Peer]) -> float:
        """CPU per copy of a proof the node has, relayed to it by a peer: dropped as known."""
        relayed = [ProofMessage(peers[(i + j) % PEERS], IP, "copy", P.Proof(p, relayed=True))
                   for i, p in enumerate(proofs) for j in range(1, COPIES + 1)]
        hub = self.node.hub
        t0 = time.thread_time()
        for _ in range(ROUNDS):
            for event in relayed:
                hub.publish(event)
        return 1e6 * (time.thread_time() - t0) / (ROUNDS * len(relayed))

    def _verifications(self, rounds: list[list[UptimeProof]]) -> float:
        """CPU of one first-sight verification of one of these proofs' signatures."""
        network_id = self.node.params.network_id
        messages = [(p.pubkey, proof_message(network_id, p), p.signature) for proofs in rounds for p in proofs]
        t0 = time.thread_time()
        for key, message, signature in messages:
            verify_uncached(key, message, signature)
        return 1e6 * (time.thread_time() - t0) / len(messages)


async def _run(profile: bool, trial_count: int) -> dict[str, Any]:
    bench = Bench(*_chain())
    await bench.start()
    await bench.trial()  # warm-up: caches, the first writes
    trials = [await bench.trial() for _ in range(trial_count)]
    results: dict[str, Any] = {"trials": trials}
    if profile:
        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        await bench.trial()
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        results["profile"] = out.getvalue()
    for peer in list(bench.peers.peers):
        peer.writer.close()
    return results


def run(profile: bool = False, trial_count: int = TRIALS) -> dict[str, Any]:
    """Every figure of this benchmark (see `report`); fewer trials for a quick look (the smoke test)."""
    return asyncio.run(_run(profile, trial_count))


def report(results: dict[str, Any], console: Console) -> None:
    trials: list[Trial] = results["trials"]
    console.print(f"uptime-proof intake, in process ({SERVICE_NODES} service nodes, {PEERS} peers, {RATE:g} proofs/s "
                  f"x {SPEED}, {ROUNDS} rounds a trial, median of {len(trials)} trials; CPU clocks):")
    table = Table()
    for column in ("per accepted proof", "median", "min", "max"):
        table.add_column(column, justify="left" if column.startswith("per") else "right")
    rows = (("this node's CPU (us)", "intake_us", ".1f"), ("the peers' reads", "reads", ".2f"),
            ("the peers' CPU, reading (us)", "peers_us", ".1f"))
    for name, field, form in rows:
        values = [getattr(t, field) for t in trials]
        table.add_row(name, *(format(f(values), form) for f in (statistics.median, min, max)))
    console.print(table)
    verifying = statistics.median(t.verify_us for t in trials)
    console.print(f"  one verification {verifying:.1f} us; a copy dropped as known "
                  f"{statistics.median(t.copy_us for t in trials):.1f} us; this node's CPU per proof, in "
                  f"verifications: {statistics.median(t.intake_us for t in trials) / verifying:.2f}x")
    if "profile" in results:
        console.print(results["profile"], markup=False, highlight=False)
