"""The relay's side of proof gossip, measured in one process (`python -m bench.gossip_relay`): the
CPU a service node's event-loop thread spends a round of uptime proofs on what surrounds their
checks (the relay's handlers, the ProofAccepted and ProofMessage events and their subscribers,
the announcements, the wake-up timer), against the checks themselves.

Wired as the intake benchmark wires a daemon (`bench.intake_bench.Bench`: a `Node` with 12
registered service nodes, `PeerManager` with 11 handshaken peers on loopback TCP whose far ends
read and discard, `Relay`, `ServiceNodeDuties`, the counters and the event feed). Each round, as
on the blocks benchmark's devnet (node2 had 7-9 peers; the others' proofs reach it announced):
DIRECT proofs arrive straight from their signers' peers (`Proof`), the others are announced
first (`ProofInv`) and asked for and answered (`GetProofs`, `Proofs`); every peer then announces
ANNOUNCED ids of proofs we have; the relay announces twice (its INV_INTERVAL is half a round).
The handlers are called as `PeerManager` calls them, without the sockets' reads (what the relay
does, not what the frames cost). Figures: the best of TRIALS trials of ROUNDS rounds, on the
thread's CPU clock, and in the same trials the proofs' first-sight verifications alone.
Run it with PYTHONPATH pointing at each tree's src/ to compare two versions of the code."""

from __future__ import annotations

import asyncio
import time
from typing import Final

from bench.intake_bench import IP, PEERS, Bench, _chain
from snode.core.crypto import verify_uncached
from snode.core.proofs import UptimeProof, make_proof, proof_message
from snode.net import protocol as P
from snode.net.peer import Peer
from snode.net.relay import Relay

ROUNDS: Final = 50
TRIALS: Final = 5
DIRECT: Final = 7
ANNOUNCED: Final = 4


async def _settle(bench: Bench, proofs: list[UptimeProof]) -> None:
    """Loop turns until the intake has accepted `proofs` (it checks them on a later turn)."""
    book = bench.node.proofs
    for _ in range(1_000):
        if all(book.last_accepted(p.pubkey) == p.timestamp for p in proofs):
            return
        await asyncio.sleep(0)
    raise AssertionError("the round's proofs were not accepted")


async def _round(bench: Bench, relay: Relay, peers: list[Peer], proofs: list[UptimeProof]) -> None:
    for peer, proof in zip(peers, proofs[:DIRECT]):
        await relay._on_proof(peer, P.Proof(proof, relayed=False))
    late = list(zip(peers[DIRECT:], proofs[DIRECT:]))
    for peer, proof in late:
        await relay._on_proof_inv(peer, P.ProofInv([(proof.pubkey, proof.timestamp)]))
    await _settle(bench, proofs[:DIRECT])
    relay._announce_proofs()
    for peer, proof in late:
        await relay._on_proofs(peer, P.Proofs([proof]))
    await _settle(bench, proofs)
    for j, peer in enumerate(peers):
        ids = [(p.pubkey, p.timestamp) for p in (proofs * 2)[j:j + ANNOUNCED]]
        await relay._on_proof_inv(peer, P.ProofInv(ids))
    relay._announce_proofs()


async def _trial(bench: Bench, relay: Relay) -> tuple[float, float]:
    node = bench.node
    peers = sorted(bench.peers.peers, key=lambda p: p.port)
    rounds = []
    for _ in range(ROUNDS):
        bench.now += node.params.proof_interval
        rounds.append([make_proof(k, node.params, timestamp=bench.now, public_ip=IP, p2p_port=9230,
                                  quorumnet_port=9232, version="bench") for k in bench.keys])
    spent = 0.0
    for proofs in rounds:
        bench.clock.set_mock(proofs[0].timestamp)
        t0 = time.thread_time()
        await _round(bench, relay, peers, proofs)
        spent += time.thread_time() - t0
        await asyncio.sleep(0.001)  # the far ends read
    network_id = node.params.network_id
    checks = [(p.pubkey, proof_message(network_id, p), p.signature) for proofs in rounds for p in proofs]
    t0 = time.thread_time()
    for key, message, signature in checks:
        verify_uncached(key, message, signature)
    return spent / ROUNDS, (time.thread_time() - t0) / ROUNDS


async def _run() -> None:
    bench = Bench(*_chain())
    await bench.start()
    relay = bench.peers._handlers[P.ProofInv].__self__  # type: ignore[attr-defined]
    assert isinstance(relay, Relay)
    await _trial(bench, relay)  # warm-up
    trials = [await _trial(bench, relay) for _ in range(TRIALS)]
    spent, verifying = min(t[0] for t in trials), min(t[1] for t in trials)
    print(f"{PEERS} peers, {len(bench.keys)} proofs a round ({DIRECT} direct), {ROUNDS} rounds, best of {TRIALS}:")
    print(f"  event-loop CPU a round {spent * 1e3:.3f} ms; of it the proofs' verifications {verifying * 1e3:.3f} ms; "
          f"the rest {(spent - verifying) * 1e3:.3f} ms ({(spent - verifying) * 1e6 / len(bench.keys):.1f} us a proof)")
    for peer in list(bench.peers.peers):
        peer.writer.close()


if __name__ == "__main__":
    asyncio.run(_run())
