"""What an obligations-quorum member votes about one node (`core.obligations.judge`): every
verdict, at the mainnet thresholds (healthy under 120 s, decommissioned past 1,800 s), the
warm-up that keeps a restarted member from voting everyone out, and block-production
participation (more than 4 misses of the last 8 duties; a cooldown before recommission)."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.obligations import Verdict, judge
from snode.core.participation import Participation
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import NO_HEIGHT, ServiceNode
from snode.params import MAINNET
from tests.unit.conftest import sn_record as sn

NOW = 1_800_000_000
def verdict(node: ServiceNode, last_proof: int, *, warm: bool = True,
            participation: Participation | None = None, height: int = 100) -> Verdict | None:
    return judge(node, last_proof=last_proof, now=NOW, params=MAINNET, may_decommission=warm,
                 participation=participation, height=height)


DECOMMISSION_PROOFS = Verdict(StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)
DECOMMISSION_BLOCKS = Verdict(StateChangeKind.DECOMMISSION, Reason.MISSED_BLOCK_PRODUCTION)
ACTIVATE = Verdict(StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF)
RECOMMISSION = Verdict(StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED)


@pytest.mark.parametrize(("age", "expected"), [
    (0, None), (120, None), (1_800, None), (1_801, DECOMMISSION_PROOFS), (86_400, DECOMMISSION_PROOFS),
])
def test_an_active_node_is_decommissioned_only_past_the_decommission_age(age, expected):
    assert verdict(sn(), NOW - age) == expected


def test_an_active_node_never_proven_is_decommissioned_and_a_cold_member_votes_nothing():
    assert verdict(sn(), 0) == DECOMMISSION_PROOFS
    assert verdict(sn(), 0, warm=False) is None
    assert verdict(sn(), NOW - 5_000, warm=False) is None


@pytest.mark.parametrize(("age", "expected"), [(0, ACTIVATE), (120, ACTIVATE), (121, None)])
def test_a_funded_node_is_activated_by_a_healthy_proof(age, expected):
    assert verdict(sn(active=False, active_since=NO_HEIGHT), NOW - age) == expected


@pytest.mark.parametrize(("age", "expected"), [(0, RECOMMISSION), (120, RECOMMISSION), (121, None)])
def test_a_decommissioned_node_is_recommissioned_by_a_healthy_proof(age, expected):
    node = sn(active=False, reason=Reason.MISSED_UPTIME_PROOFS)
    assert verdict(node, NOW - age) == expected


def test_unfunded_nodes_and_nodes_without_proofs_get_no_verdict():
    assert verdict(sn(funded=False, active=False, active_since=NO_HEIGHT), NOW) is None
    assert verdict(sn(active=False), 0) is None


@pytest.mark.parametrize(("misses", "expected"), [
    (0b0000_0000, None), (0b0000_1111, None), (0b0001_1111, DECOMMISSION_BLOCKS), (0b1111_1111, DECOMMISSION_BLOCKS),
])
def test_more_than_four_missed_duties_of_eight_decommission_a_proving_node(misses, expected):
    assert verdict(sn(), NOW, participation=Participation(misses, 8)) == expected
    # Missed proofs come first: the reason names what an operator must fix first.
    assert verdict(sn(), NOW - 2_000, participation=Participation(misses, 8)) == DECOMMISSION_PROOFS


def test_missed_duties_are_judged_only_once_they_have_lasted_the_grace_span():
    """A restart for an upgrade misses duties for a few minutes: no verdict until the failing
    stretch is `participation_grace` old (docs/PARTICIPATION.md)."""
    began = NOW - MAINNET.participation_grace
    assert verdict(sn(), NOW, participation=Participation(0b1_1111, 8, began + 1)) is None
    assert verdict(sn(), NOW, participation=Participation(0b1_1111, 8, began)) == DECOMMISSION_BLOCKS


def test_a_node_decommissioned_for_missed_blocks_waits_out_the_cooldown():
    node = sn(active=False, reason=Reason.MISSED_BLOCK_PRODUCTION, changed=100)
    assert verdict(node, NOW, height=100 + MAINNET.participation_cooldown - 1) is None
    assert verdict(node, NOW, height=100 + MAINNET.participation_cooldown) == RECOMMISSION
    other = msgspec.structs.replace(node, last_decommission_reason=Reason.MISSED_UPTIME_PROOFS)
    assert verdict(other, NOW, height=101) == RECOMMISSION


@pytest.mark.parametrize(("failing_for", "expected"), [
    (0, None), (1, None), (1_800, None),
    (1_801, Verdict(StateChangeKind.DECOMMISSION, Reason.UNREACHABLE)),
])
def test_an_active_node_that_cannot_be_reached_is_decommissioned_past_the_decommission_age(failing_for, expected):
    assert judge(sn(), last_proof=NOW - 10, now=NOW, params=MAINNET, may_decommission=True,
                 height=100, unreachable_for=failing_for) == expected


def test_missed_proofs_come_before_unreachable_and_an_unreachable_node_is_not_recommissioned():
    assert judge(sn(), last_proof=0, now=NOW, params=MAINNET, may_decommission=True, height=100,
                 unreachable_for=5_000) == DECOMMISSION_PROOFS
    down = sn(active=False, reason=Reason.UNREACHABLE)
    assert judge(down, last_proof=NOW - 10, now=NOW, params=MAINNET, may_decommission=True, height=100,
                 unreachable_for=60) is None
    assert judge(down, last_proof=NOW - 10, now=NOW, params=MAINNET, may_decommission=True,
                 height=100) == RECOMMISSION
    assert Reason.UNREACHABLE.label == "unreachable"


def test_a_failing_node_without_the_credit_for_a_decommission_is_deregistered():
    poor = sn(credit=MAINNET.credit_min - 1, changed=100)
    assert judge(poor, last_proof=0, now=NOW, params=MAINNET, may_decommission=True, height=100) == Verdict(
        StateChangeKind.DEREGISTER, Reason.MISSED_UPTIME_PROOFS)
    spent = sn(active=False, credit=20, changed=80, reason=Reason.MISSED_BLOCK_PRODUCTION)
    assert judge(spent, last_proof=0, now=NOW, params=MAINNET, may_decommission=True, height=99) is None
    assert judge(spent, last_proof=0, now=NOW, params=MAINNET, may_decommission=True, height=100) == Verdict(
        StateChangeKind.DEREGISTER, Reason.MISSED_BLOCK_PRODUCTION)
