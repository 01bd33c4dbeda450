"""Outdated service nodes (issue #34 item 5): the structured proof version from a fork of
`proof_version` 2, the refusal of a proof below the fork's `min_sn_version`, its sender's words,
the quorum's `outdated_software` decommission, and no deregistration within the upgrade grace."""

from __future__ import annotations

import pytest

from snode import __version__
from snode.app.config import advertised_sn_version
from snode.common.endpoints import ConfigError
from snode.core.errors import InvalidStateChange
from snode.core.obligations import Verdict, judge
from snode.core.proofs import (
    InvalidProof,
    ProofRefusal,
    ProofVersion,
    check_proof_version,
    make_proof,
    parse_proof_version,
    refusal_words,
)
from snode.core.service_nodes import Reason, StateChangeKind, apply_state_change
from snode.devchain import key_from_label
from snode.params import REGTEST, V1, V2, Fork
from tests.unit.conftest import sn_record as sn

H = 100
"""The height of v2 in these tests."""
FORKED = REGTEST.with_test_forks((Fork(V2, H),))
NOW = 1_800_000_000
KEY = key_from_label("outdated sn")


def _proof(version: str):
    return make_proof(KEY, FORKED, timestamp=NOW, public_ip="127.0.0.1", p2p_port=1, quorumnet_port=2,
                      version=version)


def test_the_structured_version_reads_back_and_free_text_is_not_one():
    assert parse_proof_version("0.2.0 v2@100") == ProofVersion((0, 2, 0), "v2", 100)
    assert ProofVersion((1, 22, 333), "v3", 9_999).text() == "1.22.333 v3@9999"
    for text in ("0.2.0", "0.2.0 v2", "0.2.0  v2@1", "v2@1 0.2.0", "0.2.0 V2@1", "0.2.0 v2@1 extra"):
        assert parse_proof_version(text) is None, text


def test_v1_takes_any_version_and_v2_refuses_an_outdated_or_unstructured_one():
    check_proof_version(_proof("anything at all"), V1)
    check_proof_version(_proof("0.2.0 v2@100"), V2)
    check_proof_version(_proof("1.0.0 v3@500"), V2)
    for version, why in (("0.2.0", "says no snoded version"),
                         ("0.1.9 v2@100", "is from snoded 0.1.9, below the 0.2.0")):
        with pytest.raises(InvalidProof, match=why) as caught:
            check_proof_version(_proof(version), V2)
        assert caught.value.code is ProofRefusal.OUTDATED


def test_the_sender_reads_an_outdated_refusal_as_upgrade_snoded_to():
    words = refusal_words(ProofRefusal.OUTDATED, declared_ip="1.2.3.4", params=FORKED,
                          upgrade_to="0.2.0 or later (fork v2 at height 100)")
    assert words == ("peers refuse this snoded's proofs as outdated: upgrade snoded to 0.2.0 or later "
                     "(fork v2 at height 100)")


def test_an_outdated_silent_node_is_decommissioned_outdated_software_from_the_fork_only():
    def verdict(height: int, outdated: bool = True) -> Verdict | None:
        return judge(sn(), last_proof=0, now=NOW, params=FORKED, may_decommission=True, height=height,
                     outdated=outdated)
    assert verdict(H) == Verdict(StateChangeKind.DECOMMISSION, Reason.OUTDATED_SOFTWARE)
    assert verdict(H, outdated=False) == Verdict(StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)
    assert verdict(H - 1) == Verdict(StateChangeKind.DECOMMISSION, Reason.MISSED_UPTIME_PROOFS)  # v1: no such reason
    # It still proves itself to this member (it has not missed proofs yet): nothing to vote.
    assert judge(sn(), last_proof=NOW - 5, now=NOW, params=FORKED, may_decommission=True, height=H,
                 outdated=True) is None


def test_an_outdated_node_is_not_deregistered_within_the_grace_and_is_after_it():
    grace = FORKED.upgrade_grace_blocks
    poor = sn(credit=FORKED.credit_min - 1, changed=H)
    assert judge(poor, last_proof=0, now=NOW, params=FORKED, may_decommission=True, height=H + 1, outdated=True) is None
    spent = sn(active=False, credit=1, changed=H, reason=Reason.OUTDATED_SOFTWARE)
    assert judge(spent, last_proof=0, now=NOW, params=FORKED, may_decommission=True, height=H + grace - 1) is None
    assert judge(spent, last_proof=0, now=NOW, params=FORKED, may_decommission=True, height=H + grace) == Verdict(
        StateChangeKind.DEREGISTER, Reason.OUTDATED_SOFTWARE)
    with pytest.raises(InvalidStateChange, match="not deregistered within 20 blocks of a fork"):
        apply_state_change(spent, StateChangeKind.DEREGISTER, Reason.OUTDATED_SOFTWARE, H + grace - 1, FORKED)
    assert apply_state_change(spent, StateChangeKind.DEREGISTER, Reason.OUTDATED_SOFTWARE, H + grace, FORKED) is None


def test_once_upgraded_it_is_recommissioned():
    down = sn(active=False, credit=500, changed=H, reason=Reason.OUTDATED_SOFTWARE)
    assert judge(down, last_proof=NOW - 1, now=NOW, params=FORKED, may_decommission=True, height=H + 5) == Verdict(
        StateChangeKind.RECOMMISSION, Reason.UPTIME_PROOFS_RESUMED)


def test_the_reason_is_refused_below_the_fork():
    with pytest.raises(InvalidStateChange, match="reason outdated_software is not one of fork v1"):
        apply_state_change(sn(), StateChangeKind.DECOMMISSION, Reason.OUTDATED_SOFTWARE, H - 1, FORKED)
    assert apply_state_change(sn(), StateChangeKind.DECOMMISSION, Reason.OUTDATED_SOFTWARE, H, FORKED) is not None


def test_the_test_version_is_for_devnet_and_regtest_only(monkeypatch):
    assert advertised_sn_version("regtest") is None
    monkeypatch.setenv("SNODE_TEST_SN_VERSION", "0.1.0")
    assert advertised_sn_version("regtest") == (0, 1, 0)
    with pytest.raises(ConfigError, match="^SNODE_TEST_SN_VERSION is for devnet and regtest tests; unset it to run "
                                          "on mainnet$"):
        advertised_sn_version("mainnet")
    monkeypatch.setenv("SNODE_TEST_SN_VERSION", "0.1")
    with pytest.raises(ConfigError, match="is not a version MAJOR.MINOR.PATCH"):
        advertised_sn_version("devnet")


def test_an_own_proof_is_free_text_below_the_fork_and_structured_from_it():
    from snode.common.events import EventHub
    from snode.node.own_proof import Identity, OwnProof
    from snode.node.proofs import ProofBook
    from tests.unit.conftest import new_chain

    chain = new_chain()
    state = chain.state
    ident = Identity(KEY, "127.0.0.1", 1, 2)
    below = OwnProof(FORKED, ident, (KEY,), book=ProofBook(), hub=EventHub(), tip=lambda: state)
    assert below.make(NOW).version == __version__  # v1's proofs are what they always were
    at = REGTEST.with_test_forks((Fork(V2, state.height + 1),))
    own = OwnProof(at, ident, (KEY,), book=ProofBook(), hub=EventHub(), tip=lambda: state)
    assert own.make(NOW).version == f"{__version__} v2@{state.height + 1}"
    own.advertised = (0, 1, 0)
    assert own.make(NOW).version == f"0.1.0 v2@{state.height + 1}"
