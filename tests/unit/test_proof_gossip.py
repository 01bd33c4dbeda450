"""Uptime proofs by announcement (`net.proof_gossip`, sans-IO): what is announced to whom, what is
asked of whom, what is served, and the bounds a hostile peer meets."""

from __future__ import annotations

import os

import pytest

from snode.core.encoding import encode
from snode.core.proofs import UptimeProof
from snode.net import limits as L
from snode.net import protocol as P
from snode.net.proof_gossip import ProofGossip
from snode.net.protocol import MAX_PROOF_IDS, GetProofs

KEYS = [os.urandom(32) for _ in range(4)]


def proof(key: bytes, timestamp: int) -> UptimeProof:
    return UptimeProof(key, timestamp, "1.2.3.4", 1, 2, "0.1.0", bytes(64))


def gossip(accepted: dict[bytes, int] | None = None) -> ProofGossip:
    book = accepted if accepted is not None else {}
    return ProofGossip(registered=lambda key: key in KEYS, accepted_at=lambda key: book.get(key, 0))


def test_a_proof_is_announced_once_to_each_peer_not_known_to_have_it() -> None:
    g = gossip()
    a, b, c = "a", "b", "c"
    g.state(c).learn(KEYS[1], 10)  # c announced it to us
    g.accepted(proof(KEYS[1], 10), source=a)
    g.accepted(proof(KEYS[2], 10), source=None)
    sent = dict(g.announcements([a, b, c]))
    assert [m.ids for m in sent[a]] == [[(KEYS[2], 10)]], "the source is not told of its own proof"
    assert [m.ids for m in sent[b]] == [[(KEYS[1], 10), (KEYS[2], 10)]]
    assert [m.ids for m in sent[c]] == [[(KEYS[2], 10)]]
    assert g.announcements([a, b, c]) == [], "announced once"


def test_announcements_keep_the_newest_proof_per_signer_and_are_split_by_the_id_cap() -> None:
    g = gossip()
    many = [os.urandom(32) for _ in range(MAX_PROOF_IDS + 1)]
    for key in many:
        g.accepted(proof(key, 5), source=None)
    g.accepted(proof(many[0], 6), source=None)
    [(_, messages)] = g.announcements(["b"])
    assert [len(m.ids) for m in messages] == [MAX_PROOF_IDS, 1]
    assert messages[0].ids[0] == (many[0], 6)


def test_only_what_was_announced_is_served_and_only_once() -> None:
    g = gossip()
    g.accepted(proof(KEYS[0], 10), source=None)
    g.announcements(["b"])
    assert g.serve("c", [(KEYS[0], 10)]) == [], "never announced to c"
    assert g.serve("b", [(KEYS[0], 9)]) == [], "not the proof announced"
    assert g.serve("b", [(KEYS[0], 10)]) == [proof(KEYS[0], 10)]
    assert g.serve("b", [(KEYS[0], 10)]) == [], "served once"


def test_what_we_lack_is_asked_of_one_announcer_and_the_next_one_when_it_fails() -> None:
    g = gossip({KEYS[0]: 10})
    ids = [(KEYS[0], 10), (KEYS[1], 10), (os.urandom(32), 10)]  # had, lacked, not registered
    assert g.announced("a", ids, now=0) == GetProofs([(KEYS[1], 10)])
    assert g.announced("b", ids, now=0) is None, "already asked of a: b is its fallback"
    answer = g.answered("a", [], now=1)
    assert answer.problem == "" and answer.proofs == []
    assert answer.requests == [("b", GetProofs([(KEYS[1], 10)]))]
    answer = g.answered("b", [proof(KEYS[1], 10)], now=2)
    assert answer.proofs == [proof(KEYS[1], 10)] and answer.requests == []
    assert g.wanted == {}


def test_a_peer_that_goes_hands_its_requests_to_the_next_announcer() -> None:
    g = gossip()
    g.announced("a", [(KEYS[1], 10)], now=0)
    g.announced("b", [(KEYS[1], 10)], now=0)
    assert g.gone("a", now=1) == [("b", GetProofs([(KEYS[1], 10)]))]
    assert "a" not in g.peers


def test_an_answer_without_a_question_or_with_a_proof_not_asked_is_misbehaviour() -> None:
    g = gossip()
    assert g.answered("a", [proof(KEYS[1], 10)], now=0).problem
    g.announced("a", [(KEYS[1], 10)], now=0)
    answer = g.answered("a", [proof(KEYS[1], 11)], now=0)
    assert answer.problem and answer.proofs == []


def test_requests_per_peer_are_capped_and_an_unanswered_one_is_overdue() -> None:
    g = gossip()
    asked = 0
    for start in range(0, L.MAX_PROOFS_ASKED_PER_PEER + 2 * MAX_PROOF_IDS, MAX_PROOF_IDS):
        request = g.announced("a", [(KEYS[1], t) for t in range(start + 1, start + MAX_PROOF_IDS + 1)], now=0)
        asked += len(request.ids) if request is not None else 0
    assert asked == L.MAX_PROOFS_ASKED_PER_PEER
    assert g.overdue(L.PROOF_REQUEST_TIMEOUT - 1) == []
    assert g.overdue(L.PROOF_REQUEST_TIMEOUT + 1) == ["a"]


def test_what_a_peer_is_known_to_have_is_bounded() -> None:
    g = gossip()
    state = g.state("a")
    for _ in range(L.MAX_KNOWN_PROOFS_PER_PEER + 10):
        state.learn(os.urandom(32), 1)
    assert len(state.known) == L.MAX_KNOWN_PROOFS_PER_PEER


def test_an_announcement_over_the_id_cap_does_not_decode() -> None:
    ids = [(bytes(32), 1)] * (MAX_PROOF_IDS + 1)
    for kind in (P.ProofInv, P.GetProofs):
        with pytest.raises(P.ProtocolViolation, match="undecodable"):
            P.parse(encode(kind(ids)))
    with pytest.raises(P.ProtocolViolation, match="undecodable"):
        P.parse(encode(P.ProofInv([])))


def test_what_was_announced_to_a_peer_is_bounded() -> None:
    g = gossip()
    state = g.state("a")
    for _ in range(L.MAX_KNOWN_PROOFS_PER_PEER + 10):
        state.announce(os.urandom(32), 1)
    assert len(state.announced) == L.MAX_KNOWN_PROOFS_PER_PEER
