"""The daemon's log under attack and under logrotate (issue #22, item 6), on real daemons.

300 anonymous CurveZMQ clients (keys of no service node) each fail quorumnet's handshake; the
daemon warns about the first few and then counts, writing one summary line when the minute ends
(`... and 295 more in the last minute`), while its RPC keeps answering within a second. Each
comes from an address of its own, GROUP at a time once the group before was refused: quorumnet
cuts a ninth connection of one address still in its handshake, or the oldest of 128, before ZAP
is asked (test_descriptor_flood.py), and this test counts what ZAP refuses. And the
log file renamed under a running daemon, as logrotate does: the next lines go to a new file.
"""

from __future__ import annotations

import time

import pytest

from snode.common.logs import REPEAT_BURST, REPEAT_WINDOW
from snode.params import REGTEST
from tests.functional.framework import narrator, next_loopback_ip, wait_until

log = narrator(__name__)

CLIENTS = 300
GROUP = 50
REFUSED = "quorumnet: refused a client whose key"


@pytest.mark.slow
@pytest.mark.scenario  # 61 s: run by `make scenario-test`, so that `make test` stays under CI's 15 minutes
def test_a_flood_of_anonymous_quorumnet_clients_is_counted_not_logged(nodes):
    import zmq
    from zmq.utils import z85

    from snode.core.crypto import x25519_public

    sn = nodes.add(extra_args=["--service-node", "--skip-doppelganger-check"])
    server = x25519_public(bytes.fromhex(sn.get_service_node_key()["service_node_pubkey"]))
    log.info("Open %d CurveZMQ connections with keys of no service node", CLIENTS)
    ctx = zmq.Context()
    sockets = []
    try:
        started = time.monotonic()
        group: list = []

        def refused() -> None:
            """Wait until each of the group heard of its refusal (ZAP's 400)."""
            for client, monitor in group:
                assert monitor.poll(10_000), "a handshake neither refused nor done in 10 s"
                client.disable_monitor()
                monitor.close(linger=0)
            group.clear()

        for _ in range(CLIENTS):
            if len(group) == GROUP:
                refused()
            public, secret = zmq.curve_keypair()
            sock = ctx.socket(zmq.DEALER)
            sock.curve_secretkey, sock.curve_publickey = secret, public
            sock.curve_serverkey = z85.encode(server)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RECONNECT_IVL, 600_000)  # one handshake each while the test runs
            group.append((sock, sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)))
            sock.connect(f"tcp://{next_loopback_ip()}:0;{sn.ip}:{REGTEST.quorumnet_port}")
            sockets.append(sock)
        refused()
        log.info("The daemon answers RPC within a second while they are refused")
        asked = time.monotonic()
        sn.get_info()
        assert time.monotonic() - asked < 1
        wait_until(lambda: sn.stderr_text().count(REFUSED) >= REPEAT_BURST, timeout=30,
                   what="the first refusals written")
        log.info("At the end of the minute: one line that counts the rest")
        summary = wait_until(lambda: next((line for line in sn.stderr_text().splitlines()
                                           if REFUSED in line and "more in the last minute" in line), None),
                             timeout=REPEAT_WINDOW + 30, what="the summary line")
        counted = int(summary.rpartition("... and ")[2].split()[0])
        lines = [line for line in sn.stderr_text().splitlines() if REFUSED in line]
        log.info("%d lines for %d refusals in %.0f s: %s", len(lines), REPEAT_BURST + counted,
                 time.monotonic() - started, summary[-60:])
        assert REPEAT_BURST + counted >= CLIENTS, summary
        assert len(lines) == REPEAT_BURST + 1, lines
        assert "WARNING" in summary
    finally:
        for sock in sockets:
            sock.close(linger=0)
        ctx.term()


def test_a_renamed_log_file_is_followed_by_a_new_one(nodes):
    node = nodes.add()
    current = node.data_dir / "snoded.log"
    rotated = node.data_dir / "snoded.log.1"
    wait_until(lambda: current.exists() and "snoded v" in current.read_text(), timeout=10,
               what="the start-up line in the log file")
    log.info("Rename the log file as logrotate does, then make the daemon log a block")
    current.rename(rotated)
    node.generate_blocks(blocks=1)
    wait_until(lambda: current.exists() and "block 1 " in current.read_text(), timeout=10,
               what="the block's line in a new log file")
    assert "block 1 " not in rotated.read_text(), "the renamed file got the new line"
    assert "snoded v" in rotated.read_text() and "snoded v" not in current.read_text()
    log.info("Remove the new file too: the daemon makes another")
    current.unlink()
    node.generate_blocks(blocks=1)
    wait_until(lambda: current.exists() and "block 2 " in current.read_text(), timeout=10,
               what="the next block's line in a file made again")
