"""A registered node cannot aim the quorum's probes at an address of its choice (issue #33 item
9), against real daemons: a hub and a registered service node, stopped once registered so that
only the fake peers below speak for its key.

A proof passed off as relayed from the address its node's last proof declared is its signer's
own, and must declare that address as a direct one must. From any other address a relayed proof
is judged, but its node's endpoint moves at most `ENDPOINT_CHANGES_BURST` times at once (then one
an hour): the next move is refused (RATE), a proof that keeps the endpoint is still taken.
"""

from __future__ import annotations

import time

from snode.core.crypto import SigningKey
from snode.core.proofs import make_proof
from snode.net import protocol as P
from snode.node.proofs import ENDPOINT_CHANGES_BURST
from snode.params import REGTEST
from tests.functional.framework import connect_nodes, narrator, next_loopback_ip, wait_until
from tests.functional.p2p import FakePeer
from tests.functional.sn_helpers import record, registered_solo

log = narrator(__name__)


def test_a_node_cannot_move_its_endpoint_by_calling_its_proof_relayed_nor_move_it_often(nodes):
    log.info("A hub (logging at debug) and a service node, registered and active")
    hub = nodes.add(extra_args=["--log-level=3"])
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    pk = registered_solo(hub, sn, "endpoint op")
    key = SigningKey(bytes.fromhex((sn.data_dir / "key").read_text().strip()))
    wait_until(lambda: record(hub, pk)["last_uptime_proof"], timeout=30, what="the hub taking the node's proof")
    sn.stop()
    start = max(int(time.time()), record(hub, pk)["last_uptime_proof"]) + 2

    def proof(timestamp: int, ip: str) -> P.Proof:
        return P.Proof(make_proof(key, REGTEST, timestamp=timestamp, public_ip=ip, p2p_port=sn.p2p_port,
                                  quorumnet_port=REGTEST.quorumnet_port, version="0.1.0"), relayed=True)

    log.info("From the node's own address a proof 'relayed' with another IP is refused as a direct one is")
    own = FakePeer(hub, source_ip=sn.ip)
    own.handshake()
    own.send(proof(start, "127.77.0.1"))
    wait_until(lambda: "passed off as relayed, from the address its last proof declared" in hub.stderr_text(),
               timeout=15, what="the hub refusing the node's own proof passed off as relayed")
    assert record(hub, pk)["last_uptime_proof"] < start
    own.close()

    log.info("From another address: %d endpoint moves are taken, the next is refused, the same endpoint "
             "still is", ENDPOINT_CHANGES_BURST)
    relay = FakePeer(hub, source_ip=next_loopback_ip())
    relay.handshake()
    for i in range(ENDPOINT_CHANGES_BURST):
        at = start + 1 + i
        relay.send(proof(at, f"127.77.0.{i + 2}"))
        wait_until(lambda: record(hub, pk)["last_uptime_proof"] == at, timeout=15,  # noqa: B023  # waited on here
                   what=f"endpoint move {i + 1} taken")
    moved = start + 1 + ENDPOINT_CHANGES_BURST
    relay.send(proof(moved, "127.77.0.99"))
    wait_until(lambda: "endpoint changes are rate-limited" in hub.stderr_text(), timeout=15,
               what="the hub refusing one move too many")
    assert record(hub, pk)["last_uptime_proof"] == moved - 1
    relay.send(proof(moved + 1, f"127.77.0.{ENDPOINT_CHANGES_BURST + 1}"))
    wait_until(lambda: record(hub, pk)["last_uptime_proof"] == moved + 1, timeout=15,
               what="a proof that keeps the endpoint taken")
    assert not relay.closed_by_node(timeout=1), "a relayer of a refused proof is not dropped"
    relay.close()
