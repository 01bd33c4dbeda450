"""Verdicts on our own proofs count only when asked for (DESIGN.md section 11): `Asked` knows
which peer was sent which proof; a copy of our proof relayed back counts only if it is the one we
signed; a refusal becomes our own words, from its code, and says nothing once a later proof was
accepted. The functional side (a fake peer against a daemon) is tests/functional/test_hostile_verdicts.py."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable

import msgspec
import pytest

from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError
from snode.core.proofs import BadProofSignature, InvalidProof, ProofRefusal, refusal_words
from snode.net import protocol as P
from snode.node.events import OwnProofAccepted, OwnProofRefused
from snode.services.sn_duties import Answer, Asked
from tests.unit.conftest import service_node_daemon


class Peer:
    """Anything a peer manager hands out: `Asked` keys on identity."""


def test_a_verdict_counts_once_and_only_from_a_peer_sent_that_proof() -> None:
    asked, a, b, c = Asked(per_peer=3), Peer(), Peer(), Peer()
    asked.sent([a, b], 100)
    asked.sent([a], 102)
    assert asked.answer(a, 100) is Answer.ASKED
    assert asked.answer(a, 100) is Answer.UNASKED, "a second verdict on one proof"
    assert asked.answer(b, 102) is Answer.UNASKED, "b was not sent 102"
    assert asked.answer(c, 100) is Answer.UNASKED, "c was sent nothing"
    assert asked.answer(a, 101) is Answer.UNASKED, "a proof we never signed"
    assert asked.answer(b, 100) is Answer.ASKED


def test_a_verdict_on_a_proof_we_stopped_waiting_for_is_late_not_unasked() -> None:
    asked, a = Asked(per_peer=3), Peer()
    for timestamp in (100, 102, 104, 106, 108):
        asked.sent([a], timestamp)
    assert asked.answer(a, 100) is Answer.LATE
    assert asked.answer(a, 102) is Answer.LATE
    assert asked.answer(a, 101) is Answer.LATE, "older than what we remember: ignored, not punished"
    assert asked.answer(a, 104) is Answer.ASKED
    assert asked.answer(a, 109) is Answer.UNASKED


def test_a_peer_that_goes_is_forgotten() -> None:
    asked, a = Asked(), Peer()
    asked.sent([a], 100)
    del a
    gc.collect()
    assert len(asked._waiting) == 0


def test_the_wire_carries_a_code_from_a_closed_set() -> None:
    verdict = P.ProofRejected(bytes(32), 100, ProofRefusal.CLOCK)
    assert decode(encode(verdict), P.Message) == verdict  # type: ignore[arg-type]  # a Union alias; msgspec takes it
    unknown = msgspec.msgpack.encode([15, bytes(32), 100, 99])
    with pytest.raises(DecodeError):
        decode(unknown, P.Message)  # type: ignore[arg-type]
    text = msgspec.msgpack.encode([15, bytes(32), 100, "evil\nSTOPPING=1"])
    with pytest.raises(DecodeError):
        decode(text, P.Message)  # type: ignore[arg-type]
    version_1 = msgspec.msgpack.encode([12, bytes(32), "a reason in the peer's words"])
    with pytest.raises(DecodeError):
        decode(version_1, P.Message)  # type: ignore[arg-type]


def test_only_the_proof_we_signed_counts_when_relayed_back() -> None:
    node = service_node_daemon("verdict sn")
    own = node.own_proof
    sent = own.send(node.now())
    forged = msgspec.structs.replace(sent, signature=bytes(64))
    own.relayed_back(forged, "127.0.0.9:9230")
    assert node.proofs.last_accepted(sent.pubkey) == 0
    other = msgspec.structs.replace(sent, public_ip="198.51.100.7")
    own.relayed_back(other, "127.0.0.9:9230")
    assert node.proofs.last_accepted(sent.pubkey) == 0
    own.relayed_back(sent, "127.0.0.9:9230")
    assert node.proofs.last_accepted(sent.pubkey) == sent.timestamp


def test_a_refusal_is_worded_from_its_code_and_an_old_one_says_nothing() -> None:
    node = service_node_daemon("verdict sn")
    own = node.own_proof
    first = own.send(node.now())
    own.refused("127.0.0.9:9230", first.timestamp, ProofRefusal.IP_NOT_THE_CONNECTION, bytes([198, 51, 100, 7]))
    words = ("declared IP 203.0.113.5 is not the address peers see this node connect from (198.51.100.7): "
             "check --service-node-public-ip")
    assert node.own_proof.refused_reason == words
    assert node.own_proof.refusal == f"uptime proof rejected by 127.0.0.9:9230: {words}"
    assert node.status_line(node.now()).endswith(f", refused: {words}")
    own.accepted(first.timestamp, "127.0.0.10:9230")
    assert node.own_proof.refused_reason == ""
    own.refused("127.0.0.11:9230", first.timestamp - 1, ProofRefusal.CLOCK)
    assert node.own_proof.refused_reason == "", "a refusal of a proof older than the accepted one"
    own.refused("127.0.0.11:9230", first.timestamp, ProofRefusal.CLOCK)
    assert node.own_proof.refused_reason == "", "a refusal of the very proof the network accepted"
    for code in ProofRefusal:
        assert refusal_words(code, declared_ip="203.0.113.5", params=node.params).isprintable()
    odd = refusal_words(ProofRefusal.IP_NOT_THE_CONNECTION, declared_ip="203.0.113.5", params=node.params,
                        seen_ip=b"\n" * 7)
    assert "connect from: check" in odd, "a seen address that is no address is left out"


def test_waiting_for_the_networks_word_ends_at_the_verdict_not_at_the_timeout() -> None:
    node = service_node_daemon("verdict sn")
    own, hub = node.own_proof, node.hub
    handlers = {kind: len(hub._handlers.get(kind, ())) for kind in (OwnProofAccepted, OwnProofRefused)}
    times = iter(range(node.now(), node.now() + 10 * node.params.proof_interval, node.params.proof_interval))

    async def waits(verdict: Callable[[int], None], timeout: float) -> tuple[bool, float]:
        sent = own.send(next(times))
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, verdict, sent.timestamp)
        start = loop.time()
        answered = await own.wait_answer(sent.timestamp, timeout)
        return answered, loop.time() - start

    answered, took = asyncio.run(waits(lambda ts: own.accepted(ts, "127.0.0.9:9230"), 30))
    assert answered and took < 10 and own.accepted_by == "127.0.0.9:9230"
    answered, took = asyncio.run(waits(lambda ts: own.refused("127.0.0.9:9230", ts, ProofRefusal.CLOCK), 30))
    assert answered and took < 10 and "clock" in own.refused_reason
    answered, took = asyncio.run(waits(lambda ts: own.refused("127.0.0.9:9230", ts - 1, ProofRefusal.CLOCK), 0.2))
    assert not answered and took >= 0.2, "a word on an older proof is no word on this one"
    assert {kind: len(hub._handlers.get(kind, ())) for kind in handlers} == handlers, "its subscriptions end with it"


def test_a_peers_proof_is_checked_against_the_book_and_the_tip_in_one_place() -> None:
    node = service_node_daemon("verdict sn")
    proof = node.own_proof.make(node.now())
    forged = msgspec.structs.replace(proof, signature=bytes(64))
    node.check_proof(forged, node.now(), signature=False)  # its signature was checked in a batch
    with pytest.raises(BadProofSignature):
        node.check_proof(forged, node.now())
    node.accept_proof(proof, node.now())
    with pytest.raises(InvalidProof, match="not newer"):
        node.check_proof(proof, node.now(), signature=False)
