"""An insider floods quorumnet (issue #33, item 5), against a real service-node daemon: the test
holds the keys of five registered, active service nodes (their uptime proofs come from a fake
P2P peer, and the daemon, the quorum while the network is small, activates them), so the ZAP
handler admits a CurveZMQ client with each.

One of them floods: checkpoint votes for a block that is not the chain's, with an undecodable
message now and then, as many as it can send for a bounded count and time. Its budget drops what
exceeds it unread, its junk scores it, and past the threshold the daemon cuts its connection and
refuses its handshakes; the daemon writes a bounded number of log lines for all of it. Meanwhile
the other four, honest members of the obligations quorum (all five active nodes), send their
votes to decommission the flooder: the daemon collects them and submits the state change, which
the next block carries. The daemon's CPU seconds over the flood are written to the figures.
"""

from __future__ import annotations

import time
from typing import Any

import zmq

from snode.common.procs import cpu_seconds
from snode.core.crypto import SigningKey, x25519_public
from snode.core.encoding import encode
from snode.core.finality import CheckpointVote
from snode.core.proofs import make_proof
from snode.core.registration import sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.transactions import Reservation, state_change_hash
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.net.quorum_guard import CHECKPOINT_VOTE_BURST
from snode.params import COIN, REGTEST
from tests.functional.figures import write_figures
from tests.functional.framework import (
    narrator,
    next_loopback_ip,
    scaled,
    send_spend,
    wait_until,
)
from tests.functional.p2p import FakePeer
from tests.functional.sn_helpers import SOLO, fund_and_unlock, mine_until, record

log = narrator(__name__)

FLOOD_COUNT = 30_000
"""Messages the flooder tries to send at most..."""
FLOOD_S = 6.0
"""...within this many seconds."""
MAX_FLOOD_LINES = 40
"""Log lines the daemon may write while flooded: the ban's, a few of each limited kind, the
honest verdict's; today's quorumnet wrote one a junk message."""
UNDECODABLE_EVERY = 100
"""One undecodable message in this many (the rest well-formed checkpoint votes)."""


def _cpu_seconds(pid: int) -> float:
    """User and system CPU seconds process `pid` has used."""
    seconds = cpu_seconds(pid)
    assert seconds is not None, f"process {pid} is gone"
    return seconds


def _idle_cpu(pid: int) -> float:
    """Process `pid`'s CPU seconds once it is idle again (under 0.05 s in each of two half
    seconds): what it took from the queues of a flood, not only while the flood was sent."""
    readings = [_cpu_seconds(pid)]

    def idle() -> bool:
        readings.append(_cpu_seconds(pid))
        return len(readings) > 2 and readings[-1] - readings[-3] < 0.1
    wait_until(idle, timeout=120, interval=0.5, what="the daemon idle again")
    return readings[-1]


def _register(node: Any, keys: list[SigningKey]) -> None:
    """Register each key as a solo node and activate it: its uptime proof comes from a fake
    peer at the address it declares, and the daemon's authority quorum votes it in."""
    operators = [key_from_label(f"qnet flood op {i}") for i in range(len(keys))]
    fund_and_unlock(node, {op.public: SOLO + COIN for op in operators})
    expiry = int(time.time()) + REGTEST.registration_validity
    for key, operator in zip(keys, operators):
        reg = sign_registration(key, REGTEST, 0, (Reservation(operator.public, SOLO),), expiry)
        send_spend(node, operator, [], reg)
    node.generate_blocks(blocks=1)
    ip = next_loopback_ip()
    peer = FakePeer(node, source_ip=ip)
    try:
        peer.handshake()
        for key in keys:
            proof = make_proof(key, REGTEST, timestamp=int(time.time()), public_ip=ip, p2p_port=1,
                               quorumnet_port=1, version="0.1.0")
            peer.send(P.Proof(proof, relayed=False))
        wait_until(lambda: all(record(node, k.public.hex())["last_uptime_proof"] > 0 for k in keys),
                   timeout=20, what="the five uptime proofs accepted")
    finally:
        peer.close()
    mine_until(node, lambda: all(record(node, k.public.hex())["active"] for k in keys), timeout=60,
               what="the five nodes active")


def _client(ctx: Any, key: SigningKey, server: bytes, address: str) -> tuple[Any, Any]:
    """A DEALER holding `key`, connected to the daemon's quorumnet, and its socket monitor."""
    sock = ctx.socket(zmq.DEALER)
    sock.curve_secretkey = key.x25519_secret()
    sock.curve_publickey = x25519_public(key.public)
    sock.curve_serverkey = x25519_public(server)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IMMEDIATE, 1)
    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    sock.connect(address)
    assert sock.poll(int(scaled(10) * 1000), zmq.POLLOUT), "the CurveZMQ handshake completes"
    return sock, monitor


def _events(monitor: Any) -> set[int]:
    from zmq.utils.monitor import recv_monitor_message

    seen = set()
    while monitor.poll(0):
        seen.add(int(recv_monitor_message(monitor)["event"]))
    return seen


def _flood(sock: Any, junk: list[bytes], honest: Any) -> int:
    """Send the junk round and round for FLOOD_COUNT messages or FLOOD_S seconds (a message
    ZeroMQ will not take, the connection gone, is not counted); `honest()` is called once, a
    tenth of the way in (of the count or of the time). The messages sent."""
    sent = tries = 0
    started = time.monotonic()
    voted = False
    while tries < FLOOD_COUNT and time.monotonic() - started < FLOOD_S:
        if not voted and (tries >= FLOOD_COUNT // 10 or time.monotonic() - started >= FLOOD_S / 10):
            honest()
            voted = True
        try:
            sock.send(junk[tries % len(junk)], zmq.NOBLOCK)
            sent += 1
        except zmq.Again:
            sock.poll(timeout=1, flags=zmq.POLLOUT)  # until the queue takes more, 1 ms at most
        tries += 1
    return sent


def test_a_flooding_member_is_cut_off_while_the_honest_ones_decommission_it(nodes):
    log.info("A service-node daemon; five registered, active keys for the test's clients")
    victim = nodes.add(extra_args=["--service-node", "--skip-doppelganger-check"])
    flooder, *honest = keys = [key_from_label(f"qnet flood sn {i}") for i in range(5)]
    _register(victim, keys)
    server = bytes.fromhex(victim.get_service_node_key()["service_node_pubkey"])
    address = f"tcp://{victim.ip}:{REGTEST.quorumnet_port}"
    ctx = zmq.Context()
    try:
        flood_sock, flood_monitor = _client(ctx, flooder, server, address)
        honest_socks = [_client(ctx, key, server, address)[0] for key in honest]
        height = victim.get_info()["height"]
        message = state_change_hash(REGTEST.network_id, flooder.public, StateChangeKind.DECOMMISSION,
                                    Reason.MISSED_UPTIME_PROOFS, height)

        def vote() -> None:
            for key, sock in zip(honest, honest_socks):
                sock.send(encode(P.QuorumVote(flooder.public, StateChangeKind.DECOMMISSION,
                                              Reason.MISSED_UPTIME_PROOFS, height, key.public,
                                              key.sign(message))))

        wrong = CheckpointVote(4, bytes(32), flooder.public, bytes(64))
        junk = [encode(wrong)] * (UNDECODABLE_EVERY - 1) + [b"\x92\x04not a checkpoint vote"]
        lines_before = len(victim.stderr_text().splitlines())
        pid = victim.process.pid
        cpu_before, started = _cpu_seconds(pid), time.monotonic()
        log.info("The flooder sends up to %d messages in %.0f s; the honest four vote a tenth of the way in",
                 FLOOD_COUNT, FLOOD_S)
        sent = _flood(flood_sock, junk, vote)
        wait_until(lambda: f"quorum: decommission {flooder.public.hex()[:16]}" in victim.stderr_text(),
                   timeout=20, what="the honest members' verdict submitted")
        cpu = _idle_cpu(pid) - cpu_before
        elapsed = time.monotonic() - started
        text = victim.stderr_text()
        flood_lines = text.splitlines()[lines_before:]

        log.info("The flooder was banned once, its connection cut, its handshakes refused after")
        assert text.count(f"quorumnet: banned member {flooder.public.hex()[:16]}") == 1, flood_lines
        seen: set[int] = set()

        def cut_and_refused() -> bool:
            seen.update(_events(flood_monitor))
            return {zmq.EVENT_DISCONNECTED, zmq.EVENT_HANDSHAKE_FAILED_AUTH} <= seen

        wait_until(cut_and_refused, timeout=10, what="the flooder's connection cut and its reconnection refused")
        assert not flood_sock.poll(int(scaled(1) * 1000), zmq.POLLOUT), "the flooder got back in"
        assert sent > CHECKPOINT_VOTE_BURST + 100, sent  # past its burst and the threshold

        log.info("%d messages sent, %d log lines, %.2f CPU-s in %.1f s", sent, len(flood_lines), cpu, elapsed)
        assert len(flood_lines) <= MAX_FLOOD_LINES, flood_lines
        assert "Traceback" not in text

        log.info("The honest votes got through: the state change is mined, the flooder decommissioned")
        mine_until(victim, lambda: not record(victim, flooder.public.hex())["active"], timeout=30,
                   what="the flooder decommissioned")
        write_figures("quorumnet flood by a member", {
            "messages_sent": sent, "log_lines": len(flood_lines), "victim_cpu_s": round(cpu, 2),
            "seconds": round(elapsed, 1), "banned": True, "honest_verdict_mined": True,
        })
    finally:
        ctx.destroy(linger=0)
