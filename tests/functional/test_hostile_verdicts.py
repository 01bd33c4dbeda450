"""Spoofed verdicts on a service node's own uptime proofs (issue #22, item 1), against real
daemons: a hub that mines and a registered service node with `--notify`, attacked by fake peers.

A verdict (`ProofRejected`, `ProofAck`) counts only from a peer the node sent that very proof
to, once. Unasked ones, in version 1's free-text form or version 2's coded form, get their
sender banned (`sent a verdict on an uptime proof this node did not send it`) and reach nothing
the operator reads: the status line, get_info, /readyz, the log, the --notify command. An asked
refusal counts, in the node's own words made from its code. A peer still on protocol 1 is
dropped at the handshake.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import msgspec

from snode.core.proofs import ProofRefusal
from snode.net import protocol as P
from snode.services.sn_duties import UNASKED_VERDICT
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    next_loopback_ip,
    wait_until,
)
from tests.functional.p2p import FakePeer, cut_off_after
from tests.functional.sn_helpers import (
    notified,
    notify_script,
    record,
    registered_solo,
)

log = narrator(__name__)

HOSTILE = "evil\nSTOPPING=1\n\x1b]52;c;aGVsbG8=\x07\x1b[2J\u202e"
"""What version 1 let a peer write into our status line, log, sd_notify and --notify."""


def _refusals(out: Path) -> list[dict[str, str]]:
    return [e for e in notified(out) if e["SNODE_EVENT"] == "proof_refused"]


def _ban_of(node: Any, ip: str) -> dict[str, Any] | None:
    return next((b for b in node.get_peers()["bans"] if b["ip"] == ip), None)


def _attack(sn: Any, payload: bytes, what: str) -> str:
    """A fresh fake peer shakes hands and sends one frame; the node must ban it: the reason."""
    ip = cut_off_after(sn, payload, what)
    ban = wait_until(lambda: _ban_of(sn, ip), timeout=10, what=f"the ban of the peer that sent {what}")
    return ban["reason"]


def _nothing_shown(sn: Any, out: Path) -> None:
    """No refusal and no attacker text in any sink; RPC answers within 1 s."""
    started = time.monotonic()
    info = sn.get_info()
    assert time.monotonic() - started < 1, "get_info took a second or more"
    assert "refused" not in info["status_line"] and info["last_uptime_proof_rejection"] == "", info
    status, _, body = sn.rpc.raw("", method="GET", path="/readyz")
    unmet = json.loads(body)["unmet"]
    assert not any("refuse" in u for u in unmet), (status, unmet)
    assert _refusals(out) == []
    stderr = sn.stderr_text()
    assert "uptime proof rejected by" not in stderr
    assert "evil" not in stderr and "\x1b" not in stderr and "STOPPING" not in stderr


def test_unasked_verdicts_ban_their_sender_and_reach_no_sink(nodes, tmp_path):
    script, out = notify_script(tmp_path)
    log.info("Start a hub and a service node with --notify; register it and mine until it is active")
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node", "--skip-doppelganger-check", f"--notify={script}"])
    connect_nodes(sn, hub)
    pubkey = registered_solo(hub, sn, "verdicts op")
    key = bytes.fromhex(pubkey)
    wait_until(lambda: ", proof: never" not in sn.get_info()["status_line"], timeout=30,
               what="the hub acknowledging the node's proof")
    last = record(sn, pubkey)["last_uptime_proof"]

    log.info("Version 1's attack: ProofRejected with free text (tag 12): no longer a message, banned")
    old = msgspec.msgpack.encode([12, key, HOSTILE])
    reason = _attack(sn, len(old).to_bytes(P.HEADER_BYTES, "big") + old, "a version-1 ProofRejected")
    assert "undecodable message" in reason, reason
    log.info("ProofRejected with a code, for a proof never sent to that peer: banned as unasked")
    assert_equal(_attack(sn, P.frame(P.ProofRejected(key, last, ProofRefusal.CLOCK)), "an unasked refusal"),
                 UNASKED_VERDICT)
    log.info("ProofAck for a proof stamped an hour ahead (to hide real refusals): banned as unasked")
    assert_equal(_attack(sn, P.frame(P.ProofAck(key, last + 3_600)), "an unasked ack"), UNASKED_VERDICT)
    log.info("A verdict on another node's key: banned as unasked")
    assert_equal(_attack(sn, P.frame(P.ProofAck(bytes(32), last)), "an ack for another key"), UNASKED_VERDICT)
    assert record(sn, pubkey)["last_uptime_proof"] < last + 3_600, "the spoofed ack did not count"
    log.info("Nothing of it shows: status line, get_info, /readyz, the log, --notify")
    _nothing_shown(sn, out)

    log.info("An asked refusal counts: a peer the node sends its proof to refuses it with a code. "
             "The hub stops first: its ack of the same proof would make the refusal say nothing")
    assert_equal(hub.stop(), 0)
    ip = next_loopback_ip()
    fake = FakePeer(sn, source_ip=ip)
    try:
        fake.handshake()
        proof = _next_own_proof(fake, key)
        refusal = P.ProofRejected(key, proof.timestamp, ProofRefusal.IP_NOT_PUBLIC)
        fake.send(refusal)
        notified = wait_until(lambda: _refusals(out), timeout=15, what="the refusal notified")
        assert_equal(notified[0]["SNODE_REASON"], f"declared IP {proof.public_ip} is not a public address")
        assert f"uptime proof rejected by {ip}:" in sn.stderr_text()
        assert _ban_of(sn, ip) is None, "a peer asked for its verdict is not punished"
        log.info("The same verdict again: answered already, so unasked: banned")
        fake.send(refusal)
        assert fake.closed_by_node()
    finally:
        fake.close()
    assert_equal(wait_until(lambda: _ban_of(sn, ip), timeout=10, what="the ban")["reason"], UNASKED_VERDICT)


def _next_own_proof(fake: FakePeer, key: bytes) -> Any:
    """The next proof of `key` the node sends this fake peer straight from its signer."""
    def own() -> Any:
        message = fake.receive(timeout=10)
        return message.proof if isinstance(message, P.Proof) and message.proof.pubkey == key else None
    return wait_until(own, timeout=15, what="the node's own proof reaching the fake peer", interval=0)


def test_a_peer_on_protocol_1_is_dropped_at_the_handshake(nodes):
    log.info("A fake peer announcing protocol 1: dropped (its verdicts would not decode), not banned")
    node = nodes.add()
    ip = next_loopback_ip()
    fake = FakePeer(node, source_ip=ip)
    try:
        fake.send(fake.hello(version=1))
        assert isinstance(fake.receive(), P.Hello)
        assert fake.closed_by_node()
    finally:
        fake.close()
    assert _ban_of(node, ip) is None
    wait_until(lambda: "it speaks peer protocol 1, this node needs 2" in node.stderr_text(), timeout=10,
               what="the log line naming the versions")
