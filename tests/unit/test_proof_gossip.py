"""Uptime proofs by announcement (`net.proof_gossip`, sans-IO): what is announced to whom, what is
asked of whom, what is served, and the bounds a hostile peer meets."""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import pytest

from snode.core.encoding import encode
from snode.core.proofs import UptimeProof
from snode.net import limits as L
from snode.net import protocol as P
from snode.net.limits import DEFAULT_LIMITS, PeerLimits
from snode.net.proof_gossip import PeerProofs, ProofGossip
from snode.net.proof_peers import PARKED
from snode.net.protocol import MAX_PROOF_IDS, GetProofs
from snode.params import PROOF_CLOCK_TOLERANCE

KEYS = [os.urandom(32) for _ in range(4)]
MANY = [os.urandom(32) for _ in range(12_000)]
"""More registered signers, for the bounds."""
REGISTERED = frozenset(KEYS + MANY)
NOW = 2 * 10**9
"""The node's clock (seconds)."""


def proof(key: bytes, timestamp: int) -> UptimeProof:
    return UptimeProof(key, timestamp, "1.2.3.4", 1, 2, "0.1.0", bytes(64))


def gossip(accepted: dict[bytes, int] | None = None, left: set[str] | None = None,
           address: Callable[[Hashable], Hashable] = lambda peer: peer,
           limits: PeerLimits = DEFAULT_LIMITS, kind: type[ProofGossip] = ProofGossip) -> ProofGossip:
    """Peers are names: those that start with "out" we dialled; those in `left` are gone."""
    book = accepted if accepted is not None else {}
    gone = left if left is not None else set()
    return kind(Side(book, gone, address), StoppedClock(), limits=limits)


class StoppedClock:
    def time(self) -> float:
        return NOW


@dataclass
class Side:
    """The node and the peers as the gossip sees them (`proof_gossip.GossipSide`)."""

    book: dict[bytes, int]
    gone: set[str]
    address: Callable[[Hashable], Hashable]

    def registry(self) -> frozenset[bytes]:
        return REGISTERED

    def accepted_at(self, key: bytes) -> int:
        return self.book.get(key, 0)

    def connected(self, peer: Hashable) -> bool:
        return peer not in self.gone

    def outbound(self, peer: Hashable) -> bool:
        return str(peer).startswith("out")


def state(g: ProofGossip, peer: str) -> PeerProofs:
    known = g.state(peer)
    assert known is not None
    return known


def announce(g: ProofGossip, peer: str, ids: list[P.ProofId], now: float = 0) -> None:
    for i in range(0, len(ids), MAX_PROOF_IDS):
        g.announced(peer, ids[i:i + MAX_PROOF_IDS], now=now)


def test_a_proof_is_announced_once_to_each_peer_not_known_to_have_it() -> None:
    g = gossip()
    a, b, c = "a", "b", "c"
    state(g, c).learn(KEYS[1], 10)  # c announced it to us
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


def test_the_proof_a_newer_one_replaced_is_served_until_the_newer_is_announced() -> None:
    """A peer told of a signer's proof may ask for it in the second before it is told of the
    signer's newer one, or as that announcement crosses its request: it gets the copy it was told
    of, not an empty answer that would count against us as an announcer that failed (the
    censorship defence's ranking)."""
    g = gossip()
    g.accepted(proof(KEYS[0], 10), source=None)
    g.announcements(["b", "c"])
    g.accepted(proof(KEYS[0], 12), source=None)
    g.accepted(proof(KEYS[0], 14), source=None)
    assert g.serve("b", [(KEYS[0], 10)]) == [proof(KEYS[0], 10)], "told of 10, not yet of the newer"
    assert g.serve("b", [(KEYS[0], 10)]) == [], "served once"
    assert g.serve("b", [(KEYS[0], 12)]) == [], "never announced"
    [(_, [message])] = [(peer, m) for peer, m in g.announcements(["b", "c"]) if peer == "c"]
    assert message.ids == [(KEYS[0], 14)]
    assert g.serve("c", [(KEYS[0], 10), (KEYS[0], 10)]) == [proof(KEYS[0], 10)], \
        "its request crossed our announcement of 14: served, once"
    assert g.serve("c", [(KEYS[0], 14)]) == [proof(KEYS[0], 14)]
    assert g.serve("b", [(KEYS[0], 12)]) == [], "never announced to b either"
    g.accepted(proof(KEYS[0], 16), source=None)
    g.announcements(["b", "c"])
    g.announcements(["b", "c"])
    assert g.serve("b", [(KEYS[0], 14)]) == [], "two rounds later a replaced proof is not kept"
    assert g.serve("b", [(KEYS[0], 16)]) == [proof(KEYS[0], 16)]


def test_what_we_lack_is_asked_of_one_announcer_and_the_next_one_when_it_fails() -> None:
    g = gossip({KEYS[0]: 10})
    ids = [(KEYS[0], 10), (KEYS[1], 10), (os.urandom(32), 10)]  # had, lacked, not registered
    assert g.announced("out-a", ids, now=0) == GetProofs([(KEYS[1], 10)])
    assert g.announced("out-b", ids, now=0) is None, "already asked of out-a: out-b is its fallback"
    answer = g.answered("out-a", [], now=1)
    assert answer.problem == "" and answer.proofs == []
    assert answer.requests == [("out-b", GetProofs([(KEYS[1], 10)]))]
    answer = g.answered("out-b", [proof(KEYS[1], 10)], now=2)
    assert answer.proofs == [proof(KEYS[1], 10)] and answer.requests == []
    assert list(g.wanted) == [(KEYS[1], 10)], "wanted until a copy is accepted, not on arrival"
    g.accepted(proof(KEYS[1], 10), source="out-b")
    assert g.wanted == {} and g.inbound_offers == 0
    assert all(not s.offered for s in g.peers.values())


def test_a_want_settled_leaves_no_wake_up_behind() -> None:
    """An asked id accepted leaves its request's and its judging's deadlines in the heap: they
    are not due times any more, so a wake-up timer is not set for them to ask nothing."""
    g = gossip()
    g.announced("out-a", [(KEYS[1], 10)], now=0)
    assert g.next_due() == L.PROOF_REQUEST_TIMEOUT, "asked at once: its deadline is what is due"
    g.answered("out-a", [proof(KEYS[1], 10)], now=1)
    assert g.next_due() == 1 + L.PROOF_JUDGE_TIMEOUT
    g.accepted(proof(KEYS[1], 10), source="out-a")
    assert g.next_due() is None and g.due(100) == []
    g.announced("in-b", [(KEYS[2], 10)], now=2)
    g.announced("out-c", [(KEYS[3], 10)], now=2)
    g.accepted(proof(KEYS[3], 10), source="out-c")
    assert g.next_due() == 2 + L.INBOUND_ASK_DELAY, "a live want is still due at its time"
    assert g.due(2 + L.INBOUND_ASK_DELAY) == [("in-b", GetProofs([(KEYS[2], 10)]))]


def test_a_peer_that_goes_hands_its_requests_to_the_next_announcer() -> None:
    g = gossip()
    g.announced("out-a", [(KEYS[1], 10)], now=0)
    g.announced("out-b", [(KEYS[1], 10)], now=0)
    assert g.gone("out-a", now=1) == [("out-b", GetProofs([(KEYS[1], 10)]))]
    assert "out-a" not in g.peers and g.failures == {"out-a": 1}, "it left with what it owed"


def test_a_peer_that_left_is_never_given_state_again() -> None:
    """Its state goes at its disconnect; a proof judged after it left, its late messages or an
    announcement round do not make it again, nor keep what it announced wanted."""
    left: set[str] = set()
    g = gossip(left=left)
    g.announced("out-a", [(KEYS[1], 10)], now=0)
    g.announced("b", [(KEYS[2], 10)], now=0)
    left.update({"out-a", "b"})
    g.gone("out-a", now=1)
    g.gone("b", now=1)
    g.accepted(proof(KEYS[3], 10), source="out-a")  # its proof, judged after it left
    assert g.announced("out-a", [(KEYS[0], 10)], now=2) is None
    assert g.answered("out-a", [proof(KEYS[1], 10)], now=2).proofs == []
    assert g.serve("out-a", [(KEYS[3], 10)]) == []
    assert g.announcements(["out-a", "b"]) == []
    assert g.peers == {} and g.wanted == {} and g.inbound_offers == 0
    assert g.due(100) == [], "nothing is asked of a peer that is gone"


def test_inbound_announcers_first_cannot_censor_a_proof() -> None:
    """Four inbound connections of one attacker announce first; an outbound peer announces
    later and is asked at once; with no outbound announcer, each inbound one is asked in turn
    (an empty answer, a copy never accepted, a disconnect) until the honest one."""
    wanted = (KEYS[1], 10)
    g = gossip()
    for x in ("x1", "x2", "x3", "x4"):
        assert g.announced(x, [wanted], now=0) is None, "an inbound announcer is not asked at once"
    assert g.announced("out-h", [wanted], now=0.5) == GetProofs([wanted])
    assert g.due(L.INBOUND_ASK_DELAY + 1) == [], "asked of the outbound peer, nobody else"

    g = gossip()
    for x in ("x1", "x2", "x3", "x4", "h"):
        g.announced(x, [wanted], now=0)
    assert g.due(L.INBOUND_ASK_DELAY - 0.1) == []
    assert g.due(L.INBOUND_ASK_DELAY) == [("x1", GetProofs([wanted]))]
    assert g.answered("x1", [], now=3).requests == [("x2", GetProofs([wanted]))]
    forged = proof(KEYS[1], 10)  # judged, never accepted (forged, or invalid)
    answer = g.answered("x2", [forged], now=4)
    assert answer.proofs == [forged] and answer.requests == [] and wanted in g.wanted
    assert g.due(4 + L.PROOF_JUDGE_TIMEOUT - 0.1) == []
    assert g.due(4 + L.PROOF_JUDGE_TIMEOUT) == [("x3", GetProofs([wanted]))]
    assert g.gone("x3", now=10) == [("x4", GetProofs([wanted]))]
    assert g.due(10 + L.PROOF_REQUEST_TIMEOUT) == [("h", GetProofs([wanted]))], "x4 never answered"
    g.accepted(proof(KEYS[1], 10), source="h")
    assert g.wanted == {}
    later = (KEYS[1], 12)
    for x in ("x1", "x2", "x4", "h"):
        g.announced(x, [later], now=30)
    assert g.due(30 + L.INBOUND_ASK_DELAY) == [("h", GetProofs([later]))], "those that failed are asked last"


def test_an_answer_without_a_question_or_with_a_proof_not_asked_is_misbehaviour() -> None:
    g = gossip()
    assert g.answered("out-a", [proof(KEYS[1], 10)], now=0).problem
    g.announced("out-a", [(KEYS[1], 10)], now=0)
    answer = g.answered("out-a", [proof(KEYS[1], 11)], now=0)
    assert answer.problem and answer.proofs == []


def test_requests_per_peer_are_capped_and_an_unanswered_one_is_overdue() -> None:
    g = gossip()
    asked = 0
    for start in range(0, L.MAX_PROOFS_ASKED_PER_PEER + 2 * MAX_PROOF_IDS, MAX_PROOF_IDS):
        request = g.announced("out-a", [(key, 10) for key in MANY[start:start + MAX_PROOF_IDS]], now=0)
        asked += len(request.ids) if request is not None else 0
    assert asked == L.MAX_PROOFS_ASKED_PER_PEER
    assert g.overdue(L.PROOF_REQUEST_TIMEOUT - 1) == []
    assert g.overdue(L.PROOF_REQUEST_TIMEOUT + 1) == ["out-a"]


def test_announcers_are_bounded_per_peer_and_inbound_ones_in_all() -> None:
    """Every announcer is remembered, within MAX_ANNOUNCED_PER_PEER a peer and MAX_ANNOUNCEMENTS
    for inbound peers together; an outbound peer's announcements are remembered when inbound
    peers have filled theirs."""
    g = gossip()
    announce(g, "out-a", [(key, 10) for key in MANY[:L.MAX_ANNOUNCED_PER_PEER + 50]])
    assert len(state(g, "out-a").offered) == L.MAX_ANNOUNCED_PER_PEER
    g.inbound_offers = L.MAX_ANNOUNCEMENTS  # as if many inbound peers had announced their fill
    late = (KEYS[0], 10**9)
    assert g.announced("b", [late], now=0) is None and late not in g.wanted
    assert g.announced("out-c", [late], now=0) == GetProofs([late])


def test_what_a_peer_is_known_to_have_is_bounded() -> None:
    """By each way it is learnt: a proof it pushes (`learn`), its announcement, ours to it."""
    g = gossip()
    known = state(g, "a")
    for _ in range(L.MAX_KNOWN_PROOFS_PER_PEER + 10):
        known.learn(os.urandom(32), 1)
    assert len(known.known) == L.MAX_KNOWN_PROOFS_PER_PEER
    g = gossip({key: 10 for key in MANY[:12]}, limits=PeerLimits(max_known_proofs_per_peer=8))
    g.announced("out-a", [(key, 10) for key in MANY[:12]], now=0)  # all of them had
    assert list(state(g, "out-a").known) == MANY[4:12], "the newest 8"
    for key in MANY[:12]:
        g.accepted(proof(key, 10), source=None)
    g.announcements(["out-b"])
    told = state(g, "out-b")
    assert list(told.known) == MANY[4:12] and list(told.announced) == MANY[4:12]


def test_an_announcement_over_the_id_cap_does_not_decode() -> None:
    ids = [(bytes(32), 1)] * (MAX_PROOF_IDS + 1)
    for kind in (P.ProofInv, P.GetProofs):
        with pytest.raises(P.ProtocolViolation, match="undecodable"):
            P.parse(encode(kind(ids)))
    with pytest.raises(P.ProtocolViolation, match="undecodable"):
        P.parse(encode(P.ProofInv([])))


def test_what_was_announced_to_a_peer_is_bounded() -> None:
    g = gossip()
    known = state(g, "a")
    for _ in range(L.MAX_KNOWN_PROOFS_PER_PEER + 10):
        known.announce(os.urandom(32), 1)
    assert len(known.announced) == L.MAX_KNOWN_PROOFS_PER_PEER
    keys = [os.urandom(32) for _ in range(L.MAX_KNOWN_PROOFS_PER_PEER + 10)]
    known.told([(key, 1) for key in keys])
    known.told([(key, 2) for key in keys])  # each told of twice, none fetched
    assert len(known.superseded) == len(known.announced) == L.MAX_KNOWN_PROOFS_PER_PEER


def test_reconnecting_does_not_put_an_announcer_ahead() -> None:
    """Outbound announcers are asked before inbound ones whatever they failed before; an
    address's failures outlive its connection ("x#2" is x again), and of two inbound
    announcers that failed alike the older connection is asked first."""
    g = gossip(address=lambda peer: str(peer).split("#")[0])
    first, wanted = (KEYS[0], 10), (KEYS[1], 10)
    g.announced("out-h", [first], now=0)
    g.answered("out-h", [], now=1)  # the honest peer failed once (it has a newer proof now)
    assert g.failures == {"out-h": 1}
    g.announced("x#1", [wanted], now=2)
    assert g.due(2 + L.INBOUND_ASK_DELAY) == [("x#1", GetProofs([wanted]))]
    g.announced("out-h", [wanted], now=3)
    g.announced("x#2", [wanted], now=9.8)  # x reconnected meanwhile: a fresh connection
    assert g.answered("x#1", [], now=9.9).requests == [("out-h", GetProofs([wanted]))]

    g = gossip(address=lambda peer: str(peer).split("#")[0])
    g.announced("h", [first], now=0)
    g.due(L.INBOUND_ASK_DELAY)
    g.answered("h", [], now=1)  # the honest inbound peer failed once
    g.announced("x#1", [wanted], now=2)
    g.announced("h", [wanted], now=2.1)
    assert g.due(2 + L.INBOUND_ASK_DELAY) == [("x#1", GetProofs([wanted]))]
    assert g.answered("x#1", [], now=9.9).requests == [("h", GetProofs([wanted]))]
    assert g.failures == {"h": 1, "x": 1}
    g.gone("x#1", now=10)
    g.announced("x#2", [(KEYS[1], 12)], now=10)  # it reconnects and announces first again
    g.announced("h", [(KEYS[1], 12)], now=10.1)
    assert g.due(10 + L.INBOUND_ASK_DELAY) == [("h", GetProofs([(KEYS[1], 12)]))]
    g.accepted(proof(KEYS[1], 12), source="h")
    assert g.failures == {"x": 1}, "an accepted copy clears its address"


class Counting(ProofGossip):
    """Counts the wants it looks at (a subclass: a compiled ProofGossip's methods cannot be
    replaced on it, `make test-compiled`)."""

    calls = 0

    def _choose(self, announcers: list[Any], asks: dict[Any, list[P.ProofId]]) -> Any:
        self.calls += 1
        return super()._choose(announcers, asks)


def test_wants_whose_announcers_have_their_fill_wait_without_work() -> None:
    """Five peers announce twice what may be asked of them: what is not asked waits (parked)
    and `due` does not look at it again; it is asked when its announcer answers, within room."""
    g = gossip(kind=Counting)
    assert isinstance(g, Counting)
    cap, peers = L.MAX_PROOFS_ASKED_PER_PEER, [f"out-{n}" for n in range(5)]
    for n, peer in enumerate(peers):
        announce(g, peer, [(key, 10) for key in MANY[n * 2 * cap:(n + 1) * 2 * cap]])
    assert all(state(g, p).asked == cap for p in peers)
    g.due(0)
    g.calls = 0
    for second in range(1, 30):
        assert g.due(second) == []
    assert g.calls == 0, "parked wants cost nothing while their announcers are full"
    answer = g.answered("out-0", [], now=30)  # its first GetProofs: room for that many more
    assert sum(len(request.ids) for _, request in answer.requests) == MAX_PROOF_IDS
    assert {peer for peer, _ in answer.requests} == {"out-0"} and state(g, "out-0").asked == cap
    assert g.calls == MAX_PROOF_IDS, "only the wants asked now were looked at"


def test_an_inbound_peer_offers_a_bounded_share_one_id_a_signer_and_none_from_the_future() -> None:
    """An inbound peer is remembered for MAX_ANNOUNCED_PER_INBOUND ids, one a signer (a newer
    proof replaces the older offer); MAX_WANTED_PROOFS counts the wants inbound peers made, not
    the outbound ones; an id further ahead of our clock than the tolerance is not wanted."""
    g = gossip()
    cap = L.MAX_ANNOUNCED_PER_INBOUND
    assert cap * L.MAX_INBOUND <= L.MAX_WANTED_PROOFS
    announce(g, "a", [(key, 10) for key in MANY[:cap + 100]])
    assert len(state(g, "a").offered) == cap and g.inbound_wants == cap
    announce(g, "out-b", [(key, 10) for key in MANY[cap + 100:cap + 300]])
    assert g.inbound_wants == cap and len(g.wanted) == cap + 200, "outbound wants are not counted"
    g.announced("a", [(MANY[0], 11)], now=0)
    assert state(g, "a").offered[MANY[0]] == 11 and (MANY[0], 10) not in g.wanted, "the newer replaces"
    g.announced("a", [(MANY[0], 9)], now=0)
    assert state(g, "a").offered[MANY[0]] == 11 and (MANY[0], 9) not in g.wanted
    assert len(state(g, "a").offered) == cap and g.inbound_wants == cap
    future = (KEYS[0], NOW + PROOF_CLOCK_TOLERANCE + 1)
    assert g.announced("out-c", [future], now=0) is None and future not in g.wanted
    assert not state(g, "out-c").has(*future)
    g.inbound_wants = L.MAX_WANTED_PROOFS  # as if inbound peers had filled it
    assert g.announced("d", [(KEYS[1], 10)], now=0) is None and (KEYS[1], 10) not in g.wanted
    assert g.announced("out-e", [(KEYS[1], 10)], now=0) == GetProofs([(KEYS[1], 10)])


def test_a_copy_answered_at_the_deadline_moves_on_to_one_announcer_only() -> None:
    """An answer PROOF_JUDGE_TIMEOUT or less before the ask's deadline does not schedule the
    want a second time: when its copy is not accepted, the next announcer is asked, once, and
    not charged a failure it never had the chance to avoid."""
    wanted = (KEYS[1], 10)
    g = gossip()
    for peer in ("out-a", "out-b", "out-c"):
        g.announced(peer, [wanted], now=0)
    g.answered("out-a", [proof(*wanted)], now=L.PROOF_REQUEST_TIMEOUT - L.PROOF_JUDGE_TIMEOUT)
    assert g.due(L.PROOF_REQUEST_TIMEOUT) == [("out-b", GetProofs([wanted]))]
    assert g.failures == {"out-a": 1} and g.wanted[wanted].asked == "out-b"


def test_an_asked_announcer_that_withdraws_and_answers_empty_is_charged() -> None:
    """The review's delay: one attacker's connections, older than the honest announcer's, are
    each asked in turn and, before answering empty, announce a made-up newer id of the signer
    (withdrawing the offer asked for). It is charged all the same, so the honest announcer is
    asked next; a proof it pushes unasked, even one accepted, takes nothing off its failures."""
    g = gossip(address=lambda peer: str(peer).split("#")[0])
    wanted, made_up = (KEYS[1], 10), (KEYS[1], 11)
    attackers = ["x#0", "x#1", "x#2", "x#3", "x#4"]  # literals: peers are compared by identity
    for peer in [*attackers, "h"]:
        state(g, peer)  # the attacker's connections are the older ones
        g.announced(peer, [wanted], now=0)
    assert g.due(L.INBOUND_ASK_DELAY) == [("x#0", GetProofs([wanted]))]
    g.announced("x#0", [made_up], now=5)
    assert g.answered("x#0", [], now=5.1).requests == [("h", GetProofs([wanted]))]
    assert g.failures == {"x": 1}
    g.accepted(proof(KEYS[2], 10), source="x#1")  # a proof pushed, never asked for
    g.accepted(proof(*made_up), source="x#2")  # a copy of what it announced, before it was asked
    assert g.failures == {"x": 1}, "only a copy brought in answer to our GetProofs takes one off"
    g.accepted(proof(*made_up), source="h")
    assert g.failures == {"x": 1}, "nothing asked of h: nothing to forgive, nothing charged"

    g = gossip()  # five addresses: each is charged once, and is asked after h from then on
    for peer in [*attackers, "h"]:
        g.announced(peer, [wanted], now=0)
    requests, now = g.due(L.INBOUND_ASK_DELAY), L.INBOUND_ASK_DELAY
    while requests[0][0] != "h":
        [(asked, _)] = requests
        now += L.PROOF_REQUEST_TIMEOUT - 0.1
        g.announced(asked, [made_up], now=now - 0.05)
        requests = g.answered(asked, [], now=now).requests
    assert g.failures == dict.fromkeys(attackers, 1)
    later = (KEYS[1], 12)
    for peer in [*attackers, "h"]:
        g.announced(peer, [later], now=now)
    assert g.due(now + L.INBOUND_ASK_DELAY) == [("h", GetProofs([later]))], "h first the next time"


def test_an_answer_asks_for_every_live_parked_want_it_has_room_for() -> None:
    """The review's stranding, scaled down: what was parked on a peer and has since been
    outdated (a newer proof of its signer accepted) does not take the room of the live wants
    when the peer answers: no live want stays parked while an announcer of it has room."""
    book: dict[bytes, int] = {}
    g = gossip(book)
    cap = L.MAX_PROOFS_ASKED_PER_PEER
    announce(g, "out-a", [(key, 10) for key in MANY[:2 * cap + 1]])
    g.due(0)
    a = state(g, "out-a")
    assert a.asked == cap and len(a.parked) == cap + 1
    live = sorted(a.parked)[0]
    for key, _ in sorted(a.parked)[1:]:  # their signers proved again, straight to us
        book[key] = 20
        g.accepted(proof(key, 20), source=None)
    now = 1.0
    while a.requests:
        _, ids = a.requests[0]
        g.answered("out-a", [proof(*key) for key in ids], now=now)
        for signer, timestamp in ids:
            book[signer] = timestamp
            g.accepted(proof(signer, timestamp), source="out-a")
        for want in g.wanted.values():
            assert want.due != PARKED or all(g.peers[p].asked >= cap for p in want.announcers)
        now += 0.01
    assert live not in g.wanted and g.wanted == {} and not a.parked


def test_an_outbound_announcer_is_asked_before_an_inbound_one_that_failed_less() -> None:
    g = gossip()
    wanted = (KEYS[1], 10)
    g.announced("out-a", [wanted], now=0)
    g.announced("h", [wanted], now=0)
    g.announced("out-b", [wanted], now=0)
    g.failures["out-b"] = 2
    assert g.answered("out-a", [], now=1).requests == [("out-b", GetProofs([wanted]))]


def test_a_parked_want_is_asked_when_a_new_peer_announces_it() -> None:
    """A want parked on a full outbound announcer is looked at again when an inbound peer with
    room announces it, and asked of it after INBOUND_ASK_DELAY."""
    g = gossip()
    announce(g, "out-a", [(key, 10) for key in MANY[:L.MAX_PROOFS_ASKED_PER_PEER]])
    late = (KEYS[1], 10)
    assert g.announced("out-a", [late], now=0) is None
    assert g.due(0) == [] and late in state(g, "out-a").parked
    g.announced("b", [late], now=1)
    assert g.due(1 + L.INBOUND_ASK_DELAY) == [("b", GetProofs([late]))]


def test_the_failed_addresses_are_bounded_oldest_out() -> None:
    g = gossip()
    extra = 10
    for n in range(L.MAX_FAILED_ADDRESSES + extra):
        peer = f"out-{n}"  # one object: peers are compared by identity
        g.announced(peer, [(MANY[n % len(MANY)], 10)], now=0)
        g.answered(peer, [], now=1)
        g.gone(peer, now=1)
    assert len(g.failures) == L.MAX_FAILED_ADDRESSES
    assert "out-0" not in g.failures and f"out-{L.MAX_FAILED_ADDRESSES + extra - 1}" in g.failures
