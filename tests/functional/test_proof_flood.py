"""A flood of uptime proofs on a real daemon (issue #16): the proofs of one read are checked as a
batch on the daemon's signature workers, every one is accepted in order and relayed, and a peer
that sends a forged one is banned while the honest peer stays."""

from __future__ import annotations

import os
import signal
import time

import msgspec

from snode.common.procs import child_pids
from snode.core.crypto import SigningKey
from snode.core.proofs import make_proof
from snode.net import protocol as P
from snode.params import REGTEST
from tests.functional.framework import connect_nodes, narrator, next_loopback_ip, wait_until
from tests.functional.p2p import FakePeer
from tests.functional.sn_helpers import record, registered_solos

log = narrator(__name__)

SERVICE_NODES = 4
PER_NODE = 16
"""Proofs per node in the flood, a second apart: 64 in one write, the batch threshold
(`verifier.INLINE_BELOW`); 16 seconds fit regtest's clock tolerance of 10 s either way."""


def test_a_flood_of_proofs_is_checked_on_the_workers_and_a_forger_is_banned(nodes):
    log.info("A hub and %d service nodes, registered and active", SERVICE_NODES)
    hub = nodes.add()
    sns = [nodes.add(extra_args=["--service-node"]) for _ in range(SERVICE_NODES)]
    for sn in sns:
        connect_nodes(sn, hub)
    pks = registered_solos(hub, sns, [f"flood op {i}" for i in range(SERVICE_NODES)])
    keys = [SigningKey(bytes.fromhex((sn.data_dir / "key").read_text().strip())) for sn in sns]
    assert hub.process is not None
    assert child_pids(hub.process.pid) == [], "no signature worker before any large batch"

    log.info("The service nodes paused (SIGSTOP) until their last proofs are 7 s old: the flood's "
             "timestamps then fit the clock tolerance and are newer than any of theirs")
    for sn in sns:
        assert sn.process is not None
        os.kill(sn.process.pid, signal.SIGSTOP)
    newest = max(record(hub, pk)["last_uptime_proof"] for pk in pks)
    wait_until(lambda: int(time.time()) - 6 > newest, timeout=15, what="the nodes' last proofs 7 s old")
    start = int(time.time()) - 6  # the flood from 6 s behind to 9 s ahead, the forged one 10 s ahead
    log.info("A fake peer sends %d proofs (%d per node, passed off as relayed) in one write; another "
             "sends a forged one", SERVICE_NODES * PER_NODE, PER_NODE)
    flood = [make_proof(key, REGTEST, timestamp=start + i, public_ip=sn.ip, p2p_port=sn.p2p_port,
                        quorumnet_port=REGTEST.quorumnet_port, version="0.1.0")
             for i in range(PER_NODE) for key, sn in zip(keys, sns)]
    last = start + PER_NODE - 1
    forged = msgspec.structs.replace(flood[-1], timestamp=last + 1, signature=bytes(64))
    relay, forger = FakePeer(hub, source_ip=next_loopback_ip()), FakePeer(hub, source_ip=next_loopback_ip())
    try:
        relay.handshake()
        forger.handshake()
        relay.send_raw(b"".join(P.frame(P.Proof(proof=p, relayed=True)) for p in flood))
        forger.send(P.Proof(proof=forged, relayed=True))

        log.info("Every genuine proof is accepted in order (each node at its last timestamp), the "
                 "forger is banned, and the daemon started its signature workers for the flood")
        wait_until(lambda: all(record(hub, pk)["last_uptime_proof"] == last for pk in pks), timeout=30,
                   what="the hub at every node's last proof")
        assert forger.closed_by_node(), "the hub keeps talking to a peer that sent a forged proof"
        assert "sent a forged uptime proof" in hub.stderr_text()
        assert not relay.closed_by_node(timeout=1), "the hub dropped the honest peer"
        assert len(child_pids(hub.process.pid)) >= 1, "the flood was checked on the event loop, not the workers"
        for sn in sns:
            assert sn.process is not None
            os.kill(sn.process.pid, signal.SIGCONT)
        log.info("The accepted proofs were relayed: every service node sees every other at its last proof")
        wait_until(lambda: all(record(sn, pk)["last_uptime_proof"] >= last for sn in sns for pk in pks
                               if pk != sn.get_service_node_key()["service_node_pubkey"]),
                   timeout=30, what="the relays reaching the service nodes")
    finally:
        for sn in sns:
            if sn.process is not None:
                os.kill(sn.process.pid, signal.SIGCONT)
        relay.close()
        forger.close()
