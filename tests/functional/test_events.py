"""Events and notify on real daemons (issue #14, items 7 and 8): `GET /events` streams what the
daemon sees, `snode-cli watch` prints it, and `--notify` runs the operator's command for the
node's own events with the event in SNODE_* variables; a bad notify command stops the start-up
with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from snode.core.units import parse_coins
from snode.params import COIN
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    run_snoded,
    scaled,
    sync_blocks,
    wait_until,
)
from tests.functional.sn_helpers import (
    SOLO,
    fund_and_unlock,
    mine_until,
    move_clocks,
    notified,
    notify_script,
    record,
    registered_solo,
)
from tests.functional.wallet_helpers import Wallet, registration_cmd

log = narrator(__name__)


class Watch:
    """`snode-cli --json watch` on a daemon, its lines read by a thread until `close`."""

    def __init__(self, node: Any) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "snode.tools.cli", "--rpc", f"http://{node.ip}:{node.rpc_port}", "--json",
             "watch", "--count", "400"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        self.stderr = ""
        stdout = self.proc.stdout
        assert stdout is not None
        self.reader = threading.Thread(target=lambda: self.lines.extend(stdout), daemon=True)
        self.reader.start()

    def close(self) -> list[dict[str, Any]]:
        """Stop it (by its pid); the events it printed."""
        self.proc.terminate()
        self.proc.wait(timeout=scaled(10))
        self.reader.join(timeout=scaled(10))
        self.stderr = self.proc.stderr.read() if self.proc.stderr else ""
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return [json.loads(line) for line in self.lines if line.startswith("{")]


def _rewards(out: Path) -> dict[int, int]:
    """The rewards the notify command was run for: height -> atomic units."""
    return {int(e["SNODE_HEIGHT"]): int(e["SNODE_AMOUNT"]) for e in notified(out) if e["SNODE_EVENT"] == "reward"}


def test_watch_streams_events_and_notify_runs_for_the_nodes_own(nodes, tmp_path):
    script, out = notify_script(tmp_path)
    log.info("Start a hub and a service node with --notify=%s", script.name)
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node", f"--notify={script}"])
    connect_nodes(sn, hub)
    log.info("snode-cli watch --json on the service node, from before its registration")
    watch = Watch(sn)
    try:
        log.info("Mine until watch prints a block: it is connected")
        mine_until(hub, lambda: any('"block"' in line for line in list(watch.lines)), timeout=30,
                   what="watch printing a block")
        log.info("Register it and mine until the quorum activates it and it is payable")
        pubkey = registered_solo(hub, sn, "events op", until="payable")
        mine_until(hub, lambda: any(e.get("SNODE_EVENT") == "reward" for e in notified(out)),
                   timeout=60, what="a reward notified")
        sync_blocks([hub, sn])
    finally:
        events = watch.close()
    kinds = {e["event"] for e in events}
    log.info("watch printed %d events of kinds %s", len(events), sorted(kinds))
    assert {"block", "state", "proof_accepted", "reward"} <= kinds, (kinds, watch.stderr)
    states = [e["state"] for e in events if e["event"] == "state"]
    assert states[:4] == ["registered", "funded", "active", "payable"], states
    active = next(e for e in events if e.get("state") == "active")
    assert_equal((active["reason"], active["pubkey"]), ("first_uptime_proof", pubkey))

    log.info("The notify command ran for the node's own events, with SNODE_* set")
    ran = notified(out)
    assert [n["SNODE_STATE"] for n in ran if n["SNODE_EVENT"] == "state"][:4] == states[:4], ran
    first_active = next(n for n in ran if n["SNODE_STATE"] == "active")
    assert_equal((first_active["SNODE_REASON"], first_active["SNODE_PUBKEY"]), ("first_uptime_proof", pubkey))
    assert int(first_active["SNODE_HEIGHT"]) == active["height"]
    assert not any(n["SNODE_EVENT"] == "block" for n in ran), "blocks are not the node's own events"


def test_a_notify_command_that_cannot_run_stops_the_start_up(tmp_path):
    log.info("--notify naming a program that does not exist: one line, exit 1")
    out = run_snoded(["--regtest", f"--data-dir={tmp_path / 'd'}", "--notify=/nonexistent/notify-me --x"])
    assert_equal(out.returncode, 1)
    assert_equal(out.stderr.strip().splitlines(),
                 ["snoded: --notify: '/nonexistent/notify-me' is not an executable file or a program on PATH"])
    out = run_snoded(["--regtest", f"--data-dir={tmp_path / 'd'}", "--notify=echo 'unclosed"])
    assert_equal(out.returncode, 1)
    assert "--notify: cannot split the command" in out.stderr and "Traceback" not in out.stderr
    assert not os.path.exists(tmp_path / "d"), "nothing is created when the flags are wrong"


@pytest.mark.slow
def test_a_reward_event_only_for_a_block_that_paid_the_node_with_what_the_wallet_received(nodes, tmp_path):
    """Issue #24 item 1: a recommission puts the node at the back of the reward queue (its
    `last_reward_height` moves) but pays nothing; /events and --notify announced a reward for it
    all the same. Every reward announced must be a reward in the operator wallet's
    show_transfers, at that height, for that amount; the recommission height is none."""
    script, out = notify_script(tmp_path)
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node", f"--notify={script}"])
    connect_nodes(sn, hub)
    operator = Wallet(hub, tmp_path, "operator")
    fund_and_unlock(hub, {operator.public: SOLO + COIN})
    log.info("The operator registers the node from its wallet; mine until a block pays it")
    operator.ok(registration_cmd(sn, operator.address, SOLO), yes=True)
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    mine_until(hub, lambda: record(hub, pubkey)["payable"], timeout=60, what="the node payable")
    mine_until(hub, lambda: any(e.get("SNODE_EVENT") == "reward" for e in notified(out)), timeout=60,
               what="a reward notified")
    log.info("Stop the node and move the clocks 40 s on: decommissioned")
    sync_blocks([hub, sn])
    stopped = hub.get_info()["height"]
    wait_until(lambda: stopped in _rewards(out), what="the reward of the last block before the stop notified")
    assert_equal(sn.stop(), 0)
    later = int(time.time()) + 40
    move_clocks([hub], later, proving=[], judges=[hub])
    mine_until(hub, lambda: not record(hub, pubkey)["active"], timeout=30, what="the node decommissioned")
    log.info("Start it again, watched: its proofs resume and it is recommissioned, then paid again")
    sn.start()
    connect_nodes(sn, hub)
    move_clocks([hub, sn], later + 10, proving=[sn], judges=[hub])
    watch = Watch(sn)
    try:
        mine_until(hub, lambda: any('"block"' in line for line in list(watch.lines)), timeout=30,
                   what="watch printing a block")
        mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=30, what="the node recommissioned")
        recommissioned = record(hub, pubkey)["last_state_change_height"]
        mine_until(hub, lambda: any(h > recommissioned + 2 for h in _rewards(out)), timeout=60,
                   what="rewards after the recommission")
        sync_blocks([hub, sn])
        last = hub.get_info()["height"]  # the only payable node: every block pays it
        wait_until(lambda: last in _rewards(out), what="the reward of the last block notified")
    finally:
        events = watch.close()
    wallet = {}
    for line in operator.ok("show_transfers").lines[1:]:
        height, kind, amount = line.split()[:3]
        if kind == "reward":
            wallet[int(height)] = parse_coins(amount.lstrip("+"))
    announced = _rewards(out)
    streamed = {e["height"]: e["amount"] for e in events if e["event"] == "reward"}
    log.info("rewards: wallet %s, announced %s, streamed %s", wallet, announced, streamed)
    assert recommissioned not in announced and recommissioned not in streamed
    assert announced and all(wallet.get(h) == a for h, a in announced.items()), (wallet, announced)
    assert streamed and all(wallet.get(h) == a for h, a in streamed.items()), (wallet, streamed)
    # Every payment was announced but those of the blocks that reached it in one batch at its
    # restart (made while its daemon was down: a batch shows its last reward only).
    assert_equal({h for h in wallet if h <= stopped or h > recommissioned} - set(announced), set())
    assert {h for h in streamed if h > recommissioned} and set(streamed) <= set(announced)
