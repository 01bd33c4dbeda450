"""Who votes on obligations and which votes count (`core.obligations.quorum_signers` and
`accepts_vote`, the twin of `core.finality.accepts_vote` for checkpoints): a member keeps a vote
only from a member of the vote's quorum, on a state change the node can take next, signed by
that member over this network's message."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

from snode.core.obligations import accepts_vote, quorum_signers
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import Quorum
from snode.core.transactions import state_change_hash
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.params import MAINNET
from tests.unit.conftest import SN_KEY, new_chain, sn_record

MEMBERS = [key_from_label(f"obligations member {i}") for i in range(3)]
OUTSIDER = key_from_label("obligations outsider")
QUORUM = Quorum(height=50, members=tuple(k.public for k in MEMBERS), needed=2)


def vote(*, voter=MEMBERS[0], kind=StateChangeKind.DECOMMISSION, reason=Reason.MISSED_UPTIME_PROOFS,
         quorum_height=50, signer=None, network_id=MAINNET.network_id) -> P.QuorumVote:
    message = state_change_hash(network_id, SN_KEY, kind, reason, quorum_height)
    return P.QuorumVote(sn_pubkey=SN_KEY, kind=kind, reason=reason, quorum_height=quorum_height,
                        voter=voter.public, signature=(signer or voter).sign(message))


def accepted(v: P.QuorumVote, target=None) -> bool:
    return accepts_vote(v, QUORUM, target or sn_record(), 60, MAINNET)


def test_a_members_vote_for_a_change_the_node_can_take_is_kept() -> None:
    assert accepted(vote())
    assert accepted(vote(voter=MEMBERS[2]))


@pytest.mark.parametrize("why", ["outsider", "other quorum", "other node", "forged", "other network"])
def test_a_vote_from_outside_the_quorum_about_another_node_or_forged_is_not_kept(why: str) -> None:
    bad = {
        "outsider": vote(voter=OUTSIDER),
        "other quorum": vote(quorum_height=49),  # signed for another height than its quorum's
        "other node": msgspec.structs.replace(vote(), sn_pubkey=bytes(32)),
        "forged": vote(signer=OUTSIDER),
        "other network": vote(network_id=MAINNET.network_id + 1),
    }[why]
    assert not accepted(bad)


def test_a_vote_for_a_change_that_does_not_fit_the_nodes_state_is_not_kept() -> None:
    assert not accepted(vote(kind=StateChangeKind.RECOMMISSION, reason=Reason.UPTIME_PROOFS_RESUMED)), \
        "an active node cannot be recommissioned"
    assert not accepted(vote(), sn_record(funded=False)), "nor an unfunded one decommissioned"
    assert not accepted(vote(kind=99)), "an unknown kind is refused, never taken for another"
    decommissioned = sn_record(active=False)
    assert accepted(vote(kind=StateChangeKind.RECOMMISSION, reason=Reason.UPTIME_PROOFS_RESUMED), decommissioned)


def test_the_keys_a_daemon_votes_with_are_those_in_the_tips_quorum() -> None:
    chain = new_chain()
    sn_key = key_from_label("obligations sn")
    assert quorum_signers(chain.state, [sn_key, chain.authority]) == [chain.authority]
    assert quorum_signers(chain.state, [sn_key]) == []
    assert quorum_signers(chain.state, []) == []
    gone = dataclasses.replace(chain.state, height=chain.state.height + 5)  # no quorum at that height
    assert quorum_signers(gone, [chain.authority]) == []
