"""The open-vote table of obligations verdicts (`ServiceNodeDuties.votes`, issue #33 item 9): one
quorum member cannot fill it and shut the others' verdicts out (MAX_OPEN_VOTES_PER_VOTER), and
a vote's junk is charged to the member whose connection brought it. Four active nodes on a lab
chain, so the quorum is theirs (not the authority's)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from snode.core.finality import CheckpointVote
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.transactions import state_change_hash
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.net.events import QuorumMessageReceived
from snode.node.events import ProofAccepted
from snode.node.node import Identity, Node
from snode.node.verifier import InlineVerifier
from snode.services.sn_duties import DEFAULT_DUTY_LIMITS, DutyLimits, ServiceNodeDuties
from snode.store.memory import MemoryStore
from tests.unit.conftest import new_chain, peer_manager

LABELS = [f"open votes sn {i}" for i in range(4)]
KEYS = [key_from_label(label) for label in LABELS]


def duties(limits: DutyLimits = DEFAULT_DUTY_LIMITS) -> tuple[ServiceNodeDuties, Node]:
    chain = new_chain()
    for operator, label in zip(("operator", "alice", "bob", "carol"), LABELS):
        chain.change_state(chain.new_node(operator=operator, sn_label=label), StateChangeKind.ACTIVATE)
    chain.mine(2)  # quorums of the four at the last heights
    node = Node(params=chain.params, consensus=chain.consensus,
                store=MemoryStore(chain.blocks[0], chain.fork(at=0).state), state=chain.state,
                identity=Identity(KEYS[0], "203.0.113.5", 9230, 9232), producer_key=None,
                verifier=InlineVerifier())
    assert set(node.state.quorums[node.height].members) == {k.public for k in KEYS}
    return ServiceNodeDuties(node, peer_manager()[0], quorumnet=None, limits=limits), node


def vote(node: Node, voter: int, target: int, reason: Reason, height: int, *, forged: bool = False) -> P.QuorumVote:
    key = KEYS[voter]
    message = state_change_hash(node.params.network_id, KEYS[target].public, StateChangeKind.DECOMMISSION,
                                reason, height)
    signature = KEYS[(voter + 1) % 4].sign(message) if forged else key.sign(message)
    return P.QuorumVote(KEYS[target].public, StateChangeKind.DECOMMISSION, reason, height, key.public, signature)


def test_one_voter_cannot_fill_the_open_vote_table() -> None:
    """Small bounds, the same rule: a table of 12 verdicts, 3 a voter. Member 1 votes on every
    (node, reason, height) it can; member 2's vote still finds room."""
    service, node = duties(DutyLimits(max_pending_verdicts=12, max_open_votes_per_voter=3))
    heights = [node.height - i for i in range(3)]
    for height in heights:
        for target in (0, 2, 3):
            for reason in (Reason.MISSED_UPTIME_PROOFS, Reason.UNREACHABLE):
                service.add_vote(vote(node, 1, target, reason, height))
    assert sum(KEYS[1].public in held for held in service.votes.values()) == 3
    service.add_vote(vote(node, 2, 3, Reason.MISSED_BLOCK_PRODUCTION, node.height))
    assert service.votes[(KEYS[3].public, StateChangeKind.DECOMMISSION, Reason.MISSED_BLOCK_PRODUCTION,
                          node.height)] == {KEYS[2].public: vote(node, 2, 3, Reason.MISSED_BLOCK_PRODUCTION,
                                                                 node.height).signature}


def test_a_voters_share_comes_back_as_its_heights_leave_the_window() -> None:
    service, node = duties(DutyLimits(vote_window=0))  # votes below our height have left the window
    old, new = node.height - 1, node.height
    service.add_vote(vote(node, 1, 0, Reason.UNREACHABLE, old), KEYS[1].public)
    service.add_vote(vote(node, 2, 0, Reason.UNREACHABLE, old), KEYS[2].public)
    service.add_vote(vote(node, 1, 3, Reason.UNREACHABLE, new), KEYS[1].public)
    assert service._open == {KEYS[1].public: 2, KEYS[2].public: 1}
    service._prune()
    assert service._open == {KEYS[1].public: 1}, "each voter's votes of the old height came back"
    assert [key[3] for key in service.votes] == [new]


class Junk:
    """A stand-in for the quorumnet's `junk` (the only call the duties make on it here)."""

    def __init__(self) -> None:
        self.calls: list[tuple[bytes, int, str]] = []

    def junk(self, member: bytes, points: int, reason: str) -> None:
        self.calls.append((member, points, reason))


def test_a_forged_vote_and_one_from_outside_the_quorum_cost_the_member_that_sent_it() -> None:
    from snode.net.quorum_guard import SCORE_FORGED, SCORE_NOT_OURS

    service, node = duties()
    junk = Junk()
    service.quorumnet = junk  # type: ignore[assignment]
    service.add_vote(vote(node, 1, 0, Reason.UNREACHABLE, node.height, forged=True), KEYS[1].public)
    outsider = key_from_label("open votes outsider")
    message = state_change_hash(node.params.network_id, KEYS[0].public, StateChangeKind.DECOMMISSION,
                                Reason.UNREACHABLE, node.height)
    service.add_vote(P.QuorumVote(KEYS[0].public, StateChangeKind.DECOMMISSION, Reason.UNREACHABLE, node.height,
                                  outsider.public, outsider.sign(message)), KEYS[2].public)
    resumed = state_change_hash(node.params.network_id, KEYS[0].public, StateChangeKind.RECOMMISSION,
                                Reason.UPTIME_PROOFS_RESUMED, node.height)
    service.add_vote(P.QuorumVote(KEYS[0].public, StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED,
                                  node.height, KEYS[3].public, KEYS[3].sign(resumed)), KEYS[3].public)  # not junk: late
    assert [(m, p) for m, p, _ in junk.calls] == [(KEYS[1].public, SCORE_FORGED), (KEYS[2].public, SCORE_NOT_OURS)]
    assert service.votes == {}


def test_a_held_voters_other_signature_and_a_late_vote_are_not_checked_again() -> None:
    """A signer can make any number of good signatures of one vote (any nonce), so neither a
    second vote of a voter we hold nor a late one is verified: each once cost a verification
    and a place in the good-signature cache (an insider could empty it every 16 s). Their
    signatures here are bad, so a check would show as junk."""
    service, node = duties()
    junk = Junk()
    service.quorumnet = junk  # type: ignore[assignment]
    held = vote(node, 1, 0, Reason.UNREACHABLE, node.height)
    service.add_vote(held, KEYS[1].public)
    service.add_vote(vote(node, 1, 0, Reason.UNREACHABLE, node.height, forged=True), KEYS[1].public)
    late = P.QuorumVote(KEYS[0].public, StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED, node.height,
                        KEYS[2].public, bytes(64))  # node 0 is active: no recommission fits it
    service.add_vote(late, KEYS[2].public)
    assert junk.calls == []
    key = (KEYS[0].public, StateChangeKind.DECOMMISSION, Reason.UNREACHABLE, node.height)
    assert service.votes == {key: {KEYS[1].public: held.signature}}


# --- the hub's topics (issue #37 item 3) ------------------------------------------------------


def test_the_obligations_duties_hear_their_votes_and_our_own_proofs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """They take only the events of their topics: obligations votes, not the other quorum
    messages, and of the accepted proofs only this node's own (it then waits for its peers' word)."""
    service, node = duties()
    hub = node.hub
    sent: list[int] = []
    monkeypatch.setattr(service.asked, "sent", lambda peers, timestamp: sent.append(timestamp))

    before = hub.deliveries
    checkpoint = CheckpointVote(node.height, b"h" * 32, KEYS[1].public, b"s" * 64)
    hub.publish(QuorumMessageReceived(checkpoint, KEYS[1].public))
    assert hub.deliveries == before, "a checkpoint vote is not the obligations duties' to hear"
    ours = vote(node, 1, 2, Reason.UNREACHABLE, node.height)
    hub.publish(QuorumMessageReceived(ours, KEYS[1].public))
    assert hub.deliveries == before + 1 and any(KEYS[1].public in held for held in service.votes.values())

    another = cast(Any, SimpleNamespace(pubkey=KEYS[2].public, timestamp=500))
    hub.publish(ProofAccepted(another, object(), True))  # a peer's proof, accepted from a peer
    assert hub.deliveries == before + 1 and sent == []
    own = cast(Any, SimpleNamespace(pubkey=KEYS[0].public, timestamp=501))
    hub.publish(ProofAccepted(own, None, False))
    assert hub.deliveries == before + 2 and sent == [501], "our own proof: its peers' word is waited for"
