"""A node's declared endpoint (issue #33 item 9): a relayed proof's IP cannot be checked against
its signer's connection, so a registered node could call its own proof relayed and declare any
address, turning every quorum member's reachability probes on it. Two rules bound that: a proof
that comes from the address its node's last accepted proof declared is its signer's own and is
checked as a direct one; and a node's endpoint moves at most `ENDPOINT_CHANGES_BURST` times at
once, then once per `ENDPOINT_CHANGE_EVERY` seconds (`EndpointChanges`). The functional side,
with a fake peer against a real daemon: tests/functional/test_proof_endpoints.py."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from snode.core.proofs import InvalidProof, ProofRefusal, UptimeProof, make_proof
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.net.events import ProofMessage
from snode.net.peers import PeerManager
from snode.node.node import Node
from snode.node.proofs import ENDPOINT_CHANGE_EVERY, ENDPOINT_CHANGES_BURST, EndpointChanges, ProofBook
from snode.services.sn_duties import ServiceNodeDuties, same_ip
from tests.unit.conftest import new_chain, node_on, peer_manager

SIGNER = "endpoint sn"


def signed(node: Node, timestamp: int, ip: str, port: int = 9232) -> UptimeProof:
    return make_proof(key_from_label(SIGNER), node.params, timestamp=timestamp, public_ip=ip, p2p_port=9230,
                      quorumnet_port=port, version="0.1.0")


@pytest.fixture
def node() -> Node:
    chain = new_chain()
    chain.new_node(operator="operator", sn_label=SIGNER)
    chain.mine(1)
    return node_on(chain)


def test_a_first_endpoint_is_free_and_changes_take_a_token_each() -> None:
    changes = EndpointChanges(burst=2, every=100)
    book = ProofBook(changes)
    key = bytes(32)
    book.record(key, 10, ("198.51.100.1", 9232), now=10)
    assert changes.allowed(key, 10), "the first endpoint spent nothing"
    book.record(key, 11, ("198.51.100.1", 9232), now=11)  # the same endpoint again: no change
    book.record(key, 12, ("198.51.100.2", 9232), now=12)
    book.record(key, 13, ("198.51.100.2", 9233), now=13)  # a new port is a new endpoint too
    assert not changes.allowed(key, 13)
    assert not changes.allowed(key, 111), "a token comes back over 100 s, not sooner"
    assert changes.allowed(key, 113)


def test_the_buckets_are_bounded() -> None:
    changes = EndpointChanges(capacity=3)
    for i in range(10):
        changes.spend(bytes([i]) * 32, 0)
    assert len(changes._buckets) == 3


def test_a_node_moving_its_endpoint_too_often_is_refused_with_rate(node: Node) -> None:
    now = node.now()
    key = key_from_label(SIGNER).public
    node.accept_proof(signed(node, now - 200, "198.51.100.1"), now - 200)
    for i in range(ENDPOINT_CHANGES_BURST):
        at = now - 190 + 10 * i
        node.accept_proof(signed(node, at, f"198.51.100.{i + 2}"), at)
    with pytest.raises(InvalidProof) as refused:
        node.accept_proof(signed(node, now, "203.0.113.66"), now)
    assert refused.value.code is ProofRefusal.RATE
    assert "endpoint changes are rate-limited" in str(refused.value)
    assert node.proofs.endpoint(key) == (f"198.51.100.{ENDPOINT_CHANGES_BURST + 1}", 9232)
    node.accept_proof(signed(node, now + 1, f"198.51.100.{ENDPOINT_CHANGES_BURST + 1}"), now + 1)
    later = now + ENDPOINT_CHANGE_EVERY
    node.accept_proof(signed(node, later, "203.0.113.66"), later)
    assert node.proofs.endpoint(key) == ("203.0.113.66", 9232)


class Intake:
    def __init__(self) -> None:
        self.added: list[object] = []

    def add(self, arrival: object) -> None:
        self.added.append(arrival)


class Recorded:
    """A peer manager whose `send` records the message (a compiled PeerManager's own `send`
    cannot be replaced on it: `make test-compiled`)."""

    def __init__(self, manager: PeerManager, sent: list[object]) -> None:
        self.manager, self.sent = manager, sent

    def __getattr__(self, name: str) -> Any:
        return getattr(self.manager, name)

    def send(self, peer: object, message: object) -> None:
        self.sent.append(message)


def test_a_proof_passed_off_as_relayed_from_its_own_address_is_checked_as_direct(node: Node) -> None:
    sent: list[object] = []
    duties = ServiceNodeDuties(node, Recorded(peer_manager()[0], sent), quorumnet=None)  # type: ignore[arg-type]
    intake = Intake()
    duties.intake = intake  # type: ignore[assignment]  # only what comes through is looked at
    now = node.now()
    node.accept_proof(signed(node, now - 10, "198.51.100.1"), now - 10)
    peer = object()

    def arrive(proof: UptimeProof, peer_ip: str, *, relayed: bool = True) -> None:
        duties.on_peer_proof(ProofMessage(peer, peer_ip, f"{peer_ip}:9230", P.Proof(proof, relayed=relayed)))

    arrive(signed(node, now, "203.0.113.66"), "198.51.100.1")
    assert intake.added == [], "its node's own address, another IP declared: refused unjudged"
    assert sent == [], "no verdict for what came as relayed"
    arrive(signed(node, now, "198.51.100.1"), "198.51.100.1")
    assert len(intake.added) == 1, "its own address, declared: judged"
    arrive(signed(node, now + 1, "203.0.113.66"), "192.0.2.9")
    assert len(intake.added) == 2, "from another address a relayed proof is judged (its endpoint rate-limited)"
    arrive(signed(node, now + 2, "203.0.113.66"), "192.0.2.9", relayed=False)
    assert len(intake.added) == 2, "a direct one must declare its connection's address"
    assert [type(m) for m in sent] == [P.ProofRejected]


def test_a_proof_copy_is_not_an_endpoint_change(node: Node) -> None:
    first = signed(node, node.now() - 5, "198.51.100.1")
    node.accept_proof(first, node.now() - 5)
    again = msgspec.structs.replace(signed(node, node.now(), "198.51.100.1"))
    node.accept_proof(again, node.now())
    assert node.proofs.changes.allowed(first.pubkey, node.now())


def test_an_address_written_another_way_is_the_same_address(node: Node) -> None:
    assert same_ip("2001:db8::1", "2001:db8:0:0::0001") and same_ip("::ffff:203.0.113.5", "203.0.113.5")
    assert not same_ip("2001:db8::1", "2001:db8::2") and not same_ip("203.0.113.5", "203.0.113.6")
    sent: list[object] = []
    duties = ServiceNodeDuties(node, Recorded(peer_manager()[0], sent), quorumnet=None)  # type: ignore[arg-type]
    intake = Intake()
    duties.intake = intake  # type: ignore[assignment]
    now = node.now()
    for timestamp, declared, seen in ((now, "2001:db8:0:0::0001", "2001:db8::1"),
                                      (now + 1, "203.0.113.5", "::ffff:203.0.113.5")):
        proof = signed(node, timestamp, declared)
        duties.on_peer_proof(ProofMessage(object(), seen, f"[{seen}]:9230", P.Proof(proof, relayed=False)))
    assert len(intake.added) == 2 and sent == [], "a direct proof from its declared address, however written"
