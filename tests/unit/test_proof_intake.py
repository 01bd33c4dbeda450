"""ProofIntake: peers' uptime proofs checked inline when few, in batches on the signature workers
when many, and accepted in the order they came, each proof judged once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import msgspec
import pytest

from snode.common.clock import MockableClock
from snode.core.proofs import BadProofSignature, InvalidProof, ProofRefusal, UptimeProof, make_proof
from snode.core.service_nodes import StateChangeKind
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.verifier import INLINE_BELOW, InlineVerifier, VerifierPool
from snode.node.writer import ChainWriter, store_thread
from snode.params import PROOF_CLOCK_TOLERANCE, REGTEST, V2, Fork
from snode.services.proof_intake import Arrival, ProofIntake
from snode.store.memory import MemoryStore
from tests.unit.conftest import FUNDS, PEOPLE, LabChain, node_on, wait_async

OPERATORS = ("alice", "bob", "carol", "dave")
SN_LABELS = tuple(f"intake sn {i}" for i in range(len(OPERATORS)))


class Verdicts:
    """What the intake said of each proof, in order."""

    def __init__(self) -> None:
        self.said: list[tuple[Arrival, InvalidProof | None]] = []

    def __call__(self, arrival: Arrival, refusal: InvalidProof | None) -> None:
        self.said.append((arrival, refusal))

    def accepted(self) -> list[tuple[bytes, int]]:
        return [(a.proof.pubkey, a.proof.timestamp) for a, refusal in self.said if refusal is None]

    def refused(self) -> list[tuple[int, InvalidProof]]:
        return [(a.proof.timestamp, refusal) for a, refusal in self.said if refusal is not None]


@pytest.fixture
async def node(chain: LabChain) -> AsyncIterator[Node]:
    """A node on a chain with four registered service nodes, checking signatures on two workers."""
    genesis_block, genesis_state = chain.blocks[0], chain.fork(at=0).state
    for operator, label in zip(OPERATORS, SN_LABELS):
        chain.new_node(operator=operator, sn_label=label)
    pool = VerifierPool(2)
    # The floods here span minutes of timestamps, a second apart (the proof rate's spacing):
    # mainnet's clock tolerance, not regtest's 10 s.
    params = replace(chain.params, proof_clock_tolerance=PROOF_CLOCK_TOLERANCE)
    node = Node(params=params, consensus=chain.consensus, store=MemoryStore(genesis_block, genesis_state),
                state=genesis_state, identity=None, producer_key=chain.authority, clock=MockableClock(),
                verifier=pool)
    writer = ChainWriter(node, store_thread())
    try:
        for block in chain.blocks[1:]:
            await writer.accept_block(block)
        yield node
    finally:
        writer.close()
        pool.close()


def proof(node: Node, label: str, timestamp: int) -> UptimeProof:
    return make_proof(key_from_label(label), node.params, timestamp=timestamp, public_ip="127.0.0.1",
                      p2p_port=9230, quorumnet_port=9232, version="0.1.0")


def arrivals(node: Node, per_node: int) -> list[Arrival]:
    """`per_node` proofs of each service node, a second apart, interleaved as peers relay them."""
    start = node.now() - per_node
    return [Arrival(proof(node, label, start + i), object(), "peer", relayed=True)
            for i in range(per_node) for label in SN_LABELS]


async def test_a_flood_is_checked_on_the_workers_and_accepted_in_arrival_order(node: Node) -> None:
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    flood = arrivals(node, 50)  # 200 proofs in one loop turn
    for arrival in flood:
        intake.add(arrival)
    await wait_async(lambda: len(verdicts.said) == len(flood), what="every proof judged")
    assert verdicts.accepted() == [(a.proof.pubkey, a.proof.timestamp) for a in flood]
    assert intake.batches >= 1
    for label in SN_LABELS:
        assert node.proofs.last_accepted(key_from_label(label).public) == flood[-1].proof.timestamp


async def test_a_forged_signature_in_a_batch_is_refused_alone(node: Node) -> None:
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    flood = arrivals(node, 40)
    forged_at = 101
    forged = flood[forged_at].proof
    flood[forged_at] = Arrival(msgspec.structs.replace(forged, signature=bytes(64)), object(), "peer", relayed=True)
    for arrival in flood:
        intake.add(arrival)
    await wait_async(lambda: len(verdicts.said) == len(flood), what="every proof judged")
    [(timestamp, refusal)] = verdicts.refused()
    assert timestamp == forged.timestamp and isinstance(refusal, BadProofSignature)
    assert len(verdicts.accepted()) == len(flood) - 1


async def test_copies_and_broken_rules_are_judged_once_each(node: Node) -> None:
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    flood = arrivals(node, 20)
    stranger = Arrival(proof(node, "not registered", node.now()), object(), "peer", relayed=False)
    stale = Arrival(proof(node, SN_LABELS[0], node.now() - 10_000), object(), "peer", relayed=False)
    for arrival in [*flood, *flood[:30], stranger, stale]:  # 30 copies by other paths
        intake.add(arrival)
    await wait_async(lambda: len(verdicts.said) == len(flood) + 2, what="every proof judged")
    assert len(verdicts.accepted()) == len(flood)
    unknown, late = sorted(str(refusal) for _, refusal in verdicts.refused())
    assert "is not a registered service node" in unknown and "check the sender's clock" in late


async def test_a_few_proofs_are_checked_inline_on_the_next_turn(node: Node) -> None:
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    few = arrivals(node, 2)
    assert len(few) < INLINE_BELOW
    for arrival in few:
        intake.add(arrival)
    assert verdicts.said == []  # nothing judged inside the peer's read
    await wait_async(lambda: len(verdicts.said) == len(few), what="the proofs judged")
    assert len(verdicts.accepted()) == len(few) and intake.batches == 0
    assert isinstance(node.verifier, VerifierPool) and node.verifier.worker_pids() == []


async def test_a_later_proof_never_overtakes_a_batch_that_is_out(chain: LabChain) -> None:
    """The batch's answer is there at once (inline verifier) and a later proof of one of its
    nodes arrives before the batch is taken: it waits for the batch."""
    genesis_block, genesis_state = chain.blocks[0], chain.fork(at=0).state
    for operator, label in zip(OPERATORS, SN_LABELS):
        chain.new_node(operator=operator, sn_label=label)
    node = Node(params=replace(chain.params, proof_clock_tolerance=PROOF_CLOCK_TOLERANCE), consensus=chain.consensus,
                store=MemoryStore(genesis_block, genesis_state), state=genesis_state, identity=None,
                producer_key=chain.authority, clock=MockableClock())
    writer = ChainWriter(node, store_thread())
    try:
        for block in chain.blocks[1:]:
            await writer.accept_block(block)
        verdicts = Verdicts()
        intake = ProofIntake(node, verdicts)
        flood = arrivals(node, 20)
        for arrival in flood:
            intake.add(arrival)
        await asyncio.sleep(0)  # one loop turn, an ordering step not a wait: the batch is out, its answer not yet taken
        later = Arrival(proof(node, SN_LABELS[0], flood[-1].proof.timestamp + 1), object(), "peer", relayed=True)
        intake.add(later)
        await wait_async(lambda: len(verdicts.said) == len(flood) + 1, what="every proof judged")
        assert verdicts.refused() == []
        assert verdicts.accepted()[-1] == (later.proof.pubkey, later.proof.timestamp)
    finally:
        writer.close()


class LostAnswer:
    """An answer that never comes right (a worker gone wrong)."""

    done = True

    def result(self) -> int:
        raise RuntimeError("worker answer lost")


class FailingOnce(InlineVerifier):
    """A verifier whose first batch answer fails: the next work as usual."""

    def __init__(self) -> None:
        self.failed = False

    def submit(self, checks):
        if not self.failed:
            self.failed = True
            return LostAnswer()
        return super().submit(checks)


async def test_a_batch_whose_answer_fails_is_checked_inline_and_the_intake_goes_on(node: Node) -> None:
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    node.verifier = FailingOnce()
    first = arrivals(node, 40)
    after = first[-1].proof.timestamp + 1
    second = [Arrival(proof(node, label, after + i), object(), "peer", relayed=True)
              for i in range(20) for label in SN_LABELS]
    for arrival in first:
        intake.add(arrival)
    await wait_async(lambda: len(verdicts.said) == len(first), what="the first batch judged")
    for arrival in second:
        intake.add(arrival)
    await wait_async(lambda: len(verdicts.said) == len(first) + len(second), what="the second batch judged")
    assert len(verdicts.accepted()) == len(first) + len(second)


async def test_two_forgers_in_one_batch_are_refused_and_the_honest_proofs_all_accepted(node: Node) -> None:
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    flood = arrivals(node, 40)
    forgers = [object(), object()]
    for at, forger in ((30, forgers[0]), (90, forgers[1])):
        bad = msgspec.structs.replace(flood[at].proof, signature=bytes(64))
        flood[at] = Arrival(bad, forger, "forger", relayed=True)
    after = Arrival(flood[120].proof, forgers[0], "forger", relayed=True)  # the first forger's next proof
    flood[120] = after
    for arrival in flood:
        intake.add(arrival)
    await wait_async(lambda: len(verdicts.said) == len(flood) - 1, what="every proof but the forger's last judged")
    assert sorted(t for t, _ in verdicts.refused()) == [flood[30].proof.timestamp, flood[90].proof.timestamp]
    assert all(isinstance(r, BadProofSignature) for _, r in verdicts.refused())
    assert all(a.peer not in forgers for a, r in verdicts.said if r is None)
    assert len(verdicts.accepted()) == len(flood) - 3


def _forked_node() -> tuple[LabChain, Node, bytes]:
    """A node past fork v2 (structured proof versions) with one active service node."""
    funds = {key_from_label(p).public: FUNDS for p in PEOPLE}
    chain = LabChain.create(funds, params=REGTEST.with_test_forks((Fork(V2, FORK_AT),)))
    pk = chain.new_node(operator="alice", sn_label=SN_LABELS[0])
    chain.change_state(pk, StateChangeKind.ACTIVATE)
    chain.mine(FORK_AT + 2 - chain.state.height)
    return chain, node_on(chain), pk


FORK_AT = 8


@pytest.mark.parametrize("filler", [0, INLINE_BELOW], ids=["inline", "batch"])
async def test_a_forged_outdated_proof_bans_its_sender_and_marks_no_node_outdated(filler: int) -> None:
    """Anyone can make up a proof of another's key with a version the fork refuses. Checked in a
    batch, the rules (the version rule among them) once ran before the signature, and the refusal
    as outdated marked the honest node outdated (its decommission reason became
    outdated_software) without a word to the forger. Now the signature decides first, inline
    and in a batch; a real outdated proof, signed by its key, still marks its node."""
    _, node, pk = _forked_node()
    verdicts = Verdicts()
    intake = ProofIntake(node, verdicts)
    now = node.now()
    key = key_from_label(SN_LABELS[0])
    good = make_proof(key, node.params, timestamp=now - 5, public_ip="127.0.0.1", p2p_port=1,
                      quorumnet_port=2, version=f"0.2.0 v2@{FORK_AT}")
    forged = msgspec.structs.replace(good, timestamp=now + 1, version="0.2.0", signature=bytes(64))
    outdated = make_proof(key, node.params, timestamp=now + 2, public_ip="127.0.0.1", p2p_port=1,
                          quorumnet_port=2, version="0.1.0")
    fillers = [make_proof(key_from_label(f"nobody {i}"), node.params, timestamp=now, public_ip="127.0.0.1",
                          p2p_port=1, quorumnet_port=2, version=f"0.2.0 v2@{FORK_AT}") for i in range(filler)]
    intake.add(Arrival(good, "honest", "honest", relayed=False))
    await wait_async(lambda: len(verdicts.said) == 1, what="the honest proof judged")
    for proof in [forged, *fillers]:
        intake.add(Arrival(proof, "forger", "forger", relayed=True))
    await wait_async(lambda: len(verdicts.said) == 2 + filler, what="the forged proof judged")
    [refusal] = [r for a, r in verdicts.said if a.proof is forged]
    assert isinstance(refusal, BadProofSignature), refusal
    assert not node.is_outdated(pk), "a forged proof marked an honest node outdated"
    for proof in [outdated, *fillers]:
        intake.add(Arrival(proof, "old", "old", relayed=True))
    await wait_async(lambda: len(verdicts.said) == 3 + 2 * filler, what="the outdated proof judged")
    [refusal] = [r for a, r in verdicts.said if a.proof is outdated]
    assert refusal is not None and refusal.code is ProofRefusal.OUTDATED, refusal
    assert node.is_outdated(pk), "its own signed outdated proof marks it"
