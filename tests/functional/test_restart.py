"""A restart for an upgrade costs nothing; a node that stays away is judged (issue #24, item 2;
docs/PARTICIPATION.md).

On a 6-SN devnet every node validates nearly every block, so a node stopped for a dozen seconds
misses more than 4 of its last 8 duties. Before the grace span, that was a decommission for
`missed_block_production` within seconds (credit 60 -> 40), whatever the decommission age (30 s
on devnet) promised. Now: the stopped node's failing stretch ends when its duties bring its record
back, within `participation_grace` (60 s on devnet), so it stays active with its credit; a node
that stays away is decommissioned once its proofs are older than the decommission age.
"""

from __future__ import annotations

from typing import Any

import pytest

from snode.params import DEVNET
from tests.functional.framework import assert_equal, connect_nodes, narrator, wait_until
from tests.functional.sn_helpers import SnNet, record

log = narrator(__name__)
NODES = 6


def chain_time(node: Any) -> int:
    """The tip's timestamp as `node` sees it."""
    return int(node.get_block(height=node.get_info()["height"])["timestamp"])


@pytest.mark.slow
@pytest.mark.scenario
def test_a_restart_shorter_than_the_decommission_age_costs_nothing_and_staying_away_does(nodes, tmp_path):
    log.info("An authority and %d service nodes take over block production", NODES)
    net = SnNet(nodes, tmp_path, NODES)
    net.register_all()
    wait_until(lambda: net.active(net.authority) == NODES, timeout=120, what="all nodes active")
    watcher, node, key = net.sns[0], net.sns[-1], net.pubkeys[-1]
    wait_until(lambda: watcher.get_info()["block_production"] == "service_nodes", timeout=60,
               what="service-node block production")
    credit = record(watcher, key)["earned_downtime_blocks"]

    log.info("Stop one node until it has missed more than 4 of its last 8 duties (about 12 s)")
    assert_equal(node.stop(), 0)
    stopped_at = chain_time(watcher)
    wait_until(lambda: record(watcher, key)["missed_duties"] > DEVNET.participation_max_misses, timeout=60,
               what="more than 4 duties missed")
    assert chain_time(watcher) - stopped_at < DEVNET.decommission_proof_age
    log.info("Start it again: it syncs, proves and does its duties; no decommission")
    node.start()
    for other in net.all:
        if other is not node:
            connect_nodes(node, other)
    wait_until(lambda: record(watcher, key)["missed_duties"] <= DEVNET.participation_max_misses // 2,
               timeout=90, what="the restarted node's record back to at most 2 misses")
    # Past the grace span from the stop: a failing stretch that had not ended would be judged by now.
    wait_until(lambda: chain_time(watcher) >= stopped_at + DEVNET.participation_grace + 10, timeout=120,
               what="the grace span passed")
    for other in net.sns:
        rec = record(other, key)
        assert rec["active"] and rec["decommission_count"] == 0, rec
        assert rec["earned_downtime_blocks"] >= credit, rec

    log.info("Stop it for good: the quorum decommissions it for its missed proofs")
    assert_equal(node.stop(), 0)
    wait_until(lambda: not record(watcher, key)["active"], timeout=120, what="the stopped node decommissioned")
    rec = record(watcher, key)
    assert_equal(rec["last_decommission_reason"], "missed_uptime_proofs")
    assert_equal(rec["decommission_count"], 1)
