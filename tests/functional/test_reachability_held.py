"""Reachability by the connections the quorum already holds (issue #37, item 1), on a devnet of
real daemons: a member's live quorumnet connection to a node's declared address passes its
check, and a fresh handshake comes only once per refresh (`services.reachability.refresh_s`).
So a node whose listener stops taking new connections while its old ones live on (a fault
test's closed listener: `<data-dir>/quorumnet_closed` read on SIGUSR1, devnet and regtest only)
goes on validating over the connections its leaders hold, and is still decommissioned
`unreachable` within the bound docs/SECURITY.md states: the refresh, then the decommission age.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any

import pytest

from snode.params import DEVNET
from snode.services.reachability import PROBE_TIMEOUT, refresh_s
from tests.functional.framework import assert_equal, narrator, wait_until
from tests.functional.metrics_helpers import samples, value
from tests.functional.sn_helpers import SnNet

log = narrator(__name__)
BLOCKS_OF_SLACK = 5
"""Blocks the bound allows besides the refresh, the decommission age and one probe's timeout: the
block that schedules the fresh handshake, the judging block, the votes' and the change's blocks."""


def record_of(node: Any, pubkey: str) -> dict[str, Any]:
    [found] = node.get_service_nodes(service_node_pubkeys=[pubkey])["service_node_states"]
    return found


def _signal_listener(node: Any, closed: bool) -> None:
    flag = node.data_dir / "quorumnet_closed"
    if closed:
        flag.write_text("closed by test_reachability_held\n")
    else:
        flag.unlink()
    assert node.process is not None
    os.kill(node.process.pid, signal.SIGUSR1)
    said = "takes no new connection" if closed else "takes new connections"
    wait_until(lambda: f"the quorumnet listener {said}" in node.stderr_text(), timeout=10,
               what=f"the listener {said}")


def _connect_fails(ip: str, port: int) -> bool:
    """Whether a new TCP connection to ip:port times out (its SYN dropped)."""
    try:
        socket.create_connection((ip, port), timeout=1.0).close()
    except TimeoutError:
        return True
    return False


@pytest.mark.scenario  # 87 s: run by `make scenario-test`, so that `make test` stays under CI's 15 minutes
def test_a_node_whose_listener_stops_but_whose_old_connections_live_on_is_decommissioned_unreachable_in_time(
        nodes, tmp_path):
    log.info("An authority and 6 service nodes on a fresh devnet, all active")
    net = SnNet(nodes, tmp_path, 6)
    net.register_all()
    wait_until(lambda: net.active(net.authority) == len(net.sns), timeout=120, what="all nodes active")
    victim, victim_pk = net.sns[-1], net.pubkeys[-1]
    live, watcher = net.sns[:-1], net.sns[0]

    log.info("The members hold connections to each other: checks pass by them, between fresh handshakes")
    wait_until(lambda: all(value(samples(sn), "snode_reachability_checks_total", by="held") > 0 for sn in live),
               timeout=60, what="every live member passing a check by a held connection")

    log.info("Close the victim's quorumnet listener to new connections; its old ones live on")
    _signal_listener(victim, closed=True)
    stopped_at = time.time()
    assert _connect_fails(victim.ip, DEVNET.quorumnet_port), "a new connection to the closed listener"
    height = watcher.get_info()["height"]

    bound = (refresh_s(DEVNET) + DEVNET.decommission_proof_age + PROBE_TIMEOUT
             + BLOCKS_OF_SLACK * DEVNET.target_block_time)
    log.info("The quorum decommissions it as unreachable within %d s (refresh %d s + decommission age %d s + "
             "a probe's timeout + %d blocks)", bound, refresh_s(DEVNET), DEVNET.decommission_proof_age,
             BLOCKS_OF_SLACK)
    rec = wait_until(lambda: (r := record_of(watcher, victim_pk)) and not r["active"] and r,
                     timeout=bound + 60, what="the victim decommissioned")
    assert_equal((rec["last_decommission_reason"], rec["status"]), ("unreachable", "Decomm"))
    changed = rec["last_state_change_height"]
    elapsed = watcher.get_block(height=changed)["timestamp"] - stopped_at
    log.info("Decommissioned at height %d, %.0f s after its listener closed (bound %d s)", changed, elapsed, bound)
    assert elapsed <= bound, (elapsed, bound)

    log.info("Meanwhile it went on validating: leaders' templates came over the connections they held")
    signed = [h for h in range(height + 1, changed)
              if victim_pk in watcher.get_block(height=h)["validators"]]
    assert signed, f"no block of {height + 1}..{changed - 1} carries the victim's signature"
    assert all(record_of(watcher, pk)["active"] for pk in net.pubkeys[:-1])

    log.info("Open its listener again: fresh handshakes pass and the quorum recommissions it")
    _signal_listener(victim, closed=False)
    wait_until(lambda: record_of(watcher, victim_pk)["active"], timeout=90, what="the victim recommissioned")
