"""The services take only the events of the topics they handle (issue #37 item 3): the
obligations duties hear obligations votes, not the other quorum messages, and of the accepted
proofs only this node's own (which it sends and then waits for its peers' word on)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from snode.core.finality import CheckpointVote
from snode.core.service_nodes import Reason
from snode.net.events import QuorumMessageReceived
from snode.node.events import ProofAccepted
from tests.unit.test_open_votes import KEYS, duties, vote


def test_the_obligations_duties_hear_their_votes_and_our_own_proofs_only(monkeypatch: pytest.MonkeyPatch) -> None:
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
