"""What a service node's own daemon says of its standing (issue #38, items 1 to 4 and the pending
registration of 11), on regtest with real daemons: a hub (the authority, the quorum while the
network is small) and one service node with a --notify script.

The node's registration waits in the mempool (`registration pending`); it is activated, stopped
and decommissioned while down, and started again: its status line, `snode-cli status` and
`/readyz` name the reason, and the notify script gets the decommission at the height the chain
records, not the height the node synced to. Recommissioned with the penalty (credit below the 60
blocks an outage needs), every place that shows its state warns that the next outage deregisters
it, with the 40-block lock, and --notify gets `credit_low`. Stopped again, it is deregistered;
started after it, and once more with no block in between (it must look back), it says so with the
height, the reason and until when its stakes are locked, and `/readyz` no longer says "register
it" as for a key the chain never knew.
"""

from __future__ import annotations

import json
import time

from snode.core.blocks import Block
from snode.core.encoding import decode
from snode.core.transactions import StateChange
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    snode_cli,
    sync_blocks,
    wait_until,
)
from tests.functional.metrics_helpers import samples, value
from tests.functional.sn_helpers import (
    SOLO,
    fund_and_unlock,
    mine_until,
    move_clocks,
    notified,
    notify_script,
    record,
    register,
)

log = narrator(__name__)


def _get(node, path: str) -> tuple[int, str]:
    status, _, body = node.rpc.raw("", method="GET", path=path)
    return status, body.decode()


def _readyz(node) -> dict:
    return json.loads(_get(node, "/readyz")[1])


def _status(node) -> str:
    return node.get_info()["status_line"]


def _restart(sn, hub) -> None:
    sn.start()
    connect_nodes(sn, hub)
    sync_blocks([hub, sn])


def _deregistration_height(hub, pubkey: str) -> int:
    tip = hub.get_info()["height"]
    for h in range(tip, 0, -1):
        block = decode(bytes.fromhex(hub.get_block(height=h)["block_hex"]), Block)
        if any(isinstance(tx.payload, StateChange) and tx.payload.kind == 4
               and tx.payload.sn_pubkey.hex() == pubkey for tx in block.transactions):
            return h
    raise AssertionError("no block deregisters the node")


def _pending_then_active(hub, sn) -> str:
    operator = key_from_label("standing op")
    fund_and_unlock(hub, {operator.public: SOLO + COIN})
    sync_blocks([hub, sn])
    log.info("The registration waits in the mempool: the status line says registration pending")
    register(sn, hub, operator, SOLO)
    wait_until(lambda: "SN: registration pending, proof: never" in _status(sn), timeout=30,
               what="the pending registration in the node's status line")
    assert sn.get_info()["registration_pending"] is True
    assert any("registration pending" in u for u in _readyz(sn)["unmet"]), _readyz(sn)
    hub.generate_blocks(blocks=1)
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=60, what="the node active")
    sync_blocks([hub, sn])
    info = sn.get_info()
    assert_equal((info["downtime_credit"], info["credit_warning"], info["registration_pending"]),
                 (REGTEST.credit_initial, "", False))
    return pubkey


def test_a_node_is_warned_before_a_deregistration_and_told_after_it(nodes, tmp_path):
    script, out = notify_script(tmp_path)
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node", f"--notify={script}"])
    connect_nodes(sn, hub)
    pubkey = _pending_then_active(hub, sn)

    log.info("Stop the node; the quorum decommissions it while it is down; 3 blocks more")
    sn.stop()
    later = int(time.time()) + 40
    move_clocks([hub], later, proving=[], judges=[hub])
    mine_until(hub, lambda: not record(hub, pubkey)["active"], timeout=30, what="the node decommissioned")
    down = record(hub, pubkey)["last_state_change_height"]
    hub.generate_blocks(blocks=3)
    _restart(sn, hub)
    log.info("Started again: its status line, snode-cli status and /readyz name the reason")
    line = _status(sn)
    assert "SN: Decomm (missed_uptime_proofs), proof: " in line, line
    assert ", credit " in line and "unless its uptime proofs are accepted again" in line, line
    assert "SN: Decomm (missed_uptime_proofs)" in snode_cli(sn, "status").stdout
    assert any("status Decomm (missed_uptime_proofs)" in u for u in _readyz(sn)["unmet"]), _readyz(sn)
    wait_until(lambda: any(e.get("SNODE_STATE") == "decommissioned" for e in notified(out)), timeout=30,
               what="the decommission notified")
    (event,) = [e for e in notified(out) if e.get("SNODE_STATE") == "decommissioned"]
    assert_equal((event["SNODE_HEIGHT"], event["SNODE_REASON"]), (str(down), "missed_uptime_proofs"),
                 "the chain's height of the decommission, not the tip the node synced to")

    log.info("Its proofs resume: recommissioned with the penalty, below the credit an outage needs")
    move_clocks([hub, sn], later + 5, proving=[sn], judges=[hub])
    mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=60, what="the node recommissioned")
    sync_blocks([hub, sn])
    _warned_everywhere(sn, hub, pubkey, out)

    log.info("Stopped again while short of credit: the quorum deregisters it at once")
    sn.stop()
    move_clocks([hub], later + 50, proving=[], judges=[hub])
    mine_until(hub, lambda: not hub.get_service_nodes(service_node_pubkeys=[pubkey])["service_node_states"],
               timeout=30, what="the node deregistered")
    gone = _deregistration_height(hub, pubkey)
    hub.generate_blocks(blocks=2)
    _restart(sn, hub)
    _told_deregistered(sn, gone)
    log.info("Restarted with no new block: it looks back in the chain and says the same")
    sn.stop()
    sn.start()
    wait_until(lambda: "SN: deregistered" in _status(sn), timeout=30, what="the deregistration found again")
    _told_deregistered(sn, gone)


def _warned_everywhere(sn, hub, pubkey: str, out) -> None:
    credit = record(hub, pubkey)["earned_downtime_blocks"]
    assert 0 < credit < REGTEST.credit_min, credit
    info = sn.get_info()
    warning = info["credit_warning"]
    log.info("Credit %d: %s", credit, warning)
    assert warning.startswith(f"credit {credit} blocks: the next outage deregisters this node; stake "
                              f"locked {REGTEST.deregistration_lock} blocks; avoid downtime until height "), warning
    assert_equal(info["downtime_credit"], credit)
    assert info["status_line"].endswith(f", {warning}"), info["status_line"]
    assert f"WARNING: downtime {warning}" in snode_cli(sn, "status").stdout
    ready = _readyz(sn)
    assert warning in ready["warnings"], ready
    found = samples(sn)
    assert_equal((value(found, "snode_own_downtime_credit_blocks"),
                  value(found, "snode_own_downtime_credit_minimum_blocks")),
                 (float(credit), float(REGTEST.credit_min)))
    assert warning in _get(sn, "/")[1]
    wait_until(lambda: any(e.get("SNODE_EVENT") == "credit_low" for e in notified(out)), timeout=30,
               what="credit_low notified")
    (low,) = [e for e in notified(out) if e.get("SNODE_EVENT") == "credit_low"]
    assert_equal((low["SNODE_CREDIT"], low["SNODE_REASON"]), (str(credit), warning))


def _told_deregistered(sn, gone: int) -> None:
    unlock = gone + REGTEST.deregistration_lock
    height = sn.get_info()["height"]
    said = (f"SN: deregistered at height {gone} (missed_uptime_proofs); stakes locked, spendable from "
            f"height {unlock} (in {unlock - height} blocks)")
    assert said in _status(sn), _status(sn)
    departure = sn.get_info()["departure"]
    assert_equal((departure["height"], departure["kind"], departure["reason"], departure["stakes_unlock_height"]),
                 (gone, "deregistered", "missed_uptime_proofs", unlock))
    assert (f"deregistered at height {gone} for missed_uptime_proofs; stakes locked, spendable from height "
            f"{unlock} (in {unlock - height} blocks)") in snode_cli(sn, "status").stdout  # the status line's count
    unmet = _readyz(sn)["unmet"]
    assert any(u.startswith(f"service node deregistered at height {gone}") for u in unmet), unmet
    assert not any("not registered" in u for u in unmet), unmet
    assert_equal(value(samples(sn), "snode_own_state", state="Deregistered"), 1.0)
