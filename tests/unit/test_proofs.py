"""Uptime-proof rules (`core.proofs.check_proof`, DESIGN.md section 5), at mainnet numbers: a
registered key, a clock within 300 s, newer than the last accepted proof, at most two in any half
interval (so an operator's `send_uptime_proof` right after the automatic proof is always taken),
a public IP on mainnet (any IP on devnet), and a good signature checked last."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.proofs import BadProofSignature, InvalidProof, check_proof, make_proof
from snode.devchain import key_from_label
from snode.params import DEVNET, MAINNET, NETWORKS, PROOF_CLOCK_TOLERANCE

NOW = 1_800_000_000
KEY = key_from_label("proof sn")
HALF = MAINNET.proof_interval // 2


def proof(timestamp: int = NOW, ip: str = "93.184.216.34", params=MAINNET):
    return make_proof(KEY, params, timestamp=timestamp, public_ip=ip, p2p_port=9230,
                      quorumnet_port=9232, version="0.1.0")


def check(p, *, registered=True, now=NOW, last=0, previous=0, params=MAINNET):
    check_proof(p, params, registered=registered, now=now, last_accepted=last, previous_accepted=previous)


def test_a_good_proof_is_accepted():
    check(proof())


def test_an_unregistered_key_is_refused():
    with pytest.raises(InvalidProof, match="is not a registered service node"):
        check(proof(), registered=False)


@pytest.mark.parametrize(("skew", "ok"), [
    (0, True), (PROOF_CLOCK_TOLERANCE, True), (-PROOF_CLOCK_TOLERANCE, True),
    (PROOF_CLOCK_TOLERANCE + 1, False), (-PROOF_CLOCK_TOLERANCE - 1, False),
])
def test_the_clock_window(skew, ok):
    if ok:
        check(proof(NOW + skew))
    else:
        with pytest.raises(InvalidProof, match="check the sender's clock"):
            check(proof(NOW + skew))


@pytest.mark.parametrize("last", [NOW, NOW + 1])
def test_a_proof_must_be_newer_than_the_last_accepted(last):
    with pytest.raises(InvalidProof, match="not newer than the last accepted one"):
        check(proof(), last=last)


def test_one_extra_proof_between_two_regular_ones_is_taken_but_not_a_third():
    regular = NOW - MAINNET.proof_interval
    check(proof(NOW), last=regular, previous=regular - MAINNET.proof_interval)  # the regular one
    check(proof(NOW + 1), last=NOW, previous=regular)  # the operator's, a second later
    with pytest.raises(InvalidProof, match=f"rate-limited to two per {HALF} s"):
        check(proof(NOW + 2), last=NOW + 1, previous=NOW)  # a third inside the half interval
    check(proof(NOW + HALF), last=NOW + 1, previous=NOW)  # the next regular one


@pytest.mark.parametrize("ip", ["10.0.0.1", "127.0.0.1", "192.168.1.1", "100.64.0.1", "::1"])
def test_mainnet_refuses_a_non_public_ip_and_devnet_takes_it(ip):
    with pytest.raises(InvalidProof, match=f"declared IP {ip} is not a public address"):
        check(proof(ip=ip))
    check(proof(ip=ip, params=DEVNET), params=DEVNET)


def test_an_ip_that_is_not_an_ip_is_refused():
    with pytest.raises(InvalidProof, match="is not an IP address"):
        check(proof(ip="node.example"))


def test_a_forged_signature_is_a_bad_signature_and_checked_after_the_cheap_rules():
    forged = msgspec.structs.replace(proof(), quorumnet_port=9999)
    with pytest.raises(BadProofSignature):
        check(forged)
    with pytest.raises(InvalidProof, match="not newer") as caught:
        check(forged, last=NOW)
    assert not isinstance(caught.value, BadProofSignature)
    with pytest.raises(BadProofSignature):  # a proof signed on another network
        check(proof(params=DEVNET))


@pytest.mark.parametrize("params", list(NETWORKS.values()), ids=lambda p: p.name)
def test_a_proof_from_the_future_cannot_outlive_the_decommission_age(params):
    """A proof stamped ahead counts as fresh that much longer: a node that signs one before it
    dies must still be decommissioned about on time (issue #33 item 9). Devnet's 30 s
    decommission age once sat inside the 300 s tolerance: a proof stamped 30 s ahead passed;
    regtest's too, until it took devnet's 10 s."""
    ahead = params.decommission_proof_age
    with pytest.raises(InvalidProof, match="check the sender's clock"):
        check(proof(NOW + ahead, ip="127.0.0.1" if params.private_public_ip_allowed else "93.184.216.34",
                    params=params), params=params)
    assert params.proof_clock_tolerance * 3 <= params.decommission_proof_age
