"""An outdated service node on regtest with real daemons (issue #34 item 5, docs/UPGRADES.md): a
node whose proofs say snoded 0.1.0 (SNODE_TEST_SN_VERSION) is active under v1; from v2's height
its proofs are refused as outdated, its status line says `upgrade snoded to 0.2.0`, the quorum
decommissions it `outdated_software` and does not deregister it within the grace; restarted
as itself (0.2.0), its proofs are accepted and it is recommissioned."""

from __future__ import annotations

import time

from tests.functional.framework import assert_equal, connect_nodes, narrator, sync_blocks, wait_until
from tests.functional.sn_helpers import mine_until, move_clocks, record, registered_solo

log = narrator(__name__)
H = 40
"""The height of v2 (past the registration and activation, which take a dozen blocks)."""
OLD = {"SNODE_TEST_SN_VERSION": "0.1.0"}


def test_an_outdated_node_is_decommissioned_not_deregistered_and_recommissioned_once_upgraded(nodes):
    fork = f"--test-fork=v2@{H}"
    hub = nodes.add(extra_args=[fork])
    sn = nodes.add(extra_args=["--service-node", fork], start=False)
    sn.start(env=OLD)
    connect_nodes(sn, hub)
    log.info("Under v1 a node saying snoded 0.1.0 is registered and activated as any")
    pubkey = registered_solo(hub, sn, "outdated operator")
    assert hub.get_info()["height"] < H - 2, "v2 must come after the activation"
    log.info("Mine to v2's height: its proofs are refused as outdated, in its own words")
    hub.generate_blocks(blocks=H - hub.get_info()["height"])
    sync_blocks([hub, sn])
    words = "peers refuse this snoded's proofs as outdated: upgrade snoded to"
    wait_until(lambda: words in sn.get_info()["status_line"], timeout=30, what="the outdated refusal")
    log.info("Its proofs age past the decommission age: decommissioned outdated_software")
    later = int(time.time()) + 40
    move_clocks([hub, sn], later, proving=[], judges=[hub])
    mine_until(hub, lambda: not record(hub, pubkey)["active"], timeout=30, what="the node decommissioned")
    assert_equal(record(hub, pubkey)["last_decommission_reason"], "outdated_software", "the reason")
    log.info("Within the grace it is not deregistered")
    hub.generate_blocks(blocks=10)
    assert record(hub, pubkey) is not None
    log.info("Restarted as itself (0.2.0), its proofs are accepted and it is recommissioned")
    sn.stop()
    sn.start()
    connect_nodes(sn, hub)
    move_clocks([hub, sn], later + 10, proving=[sn], judges=[hub])
    mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=30, what="the node recommissioned")
    assert words not in sn.get_info()["status_line"]
