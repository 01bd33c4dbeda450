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

from snode.devchain import key_from_label
from snode.params import COIN
from tests.functional.framework import (
    assert_equal, connect_nodes, narrator, run_snoded, scaled, sync_blocks,
)
from tests.functional.sn_helpers import (
    SOLO, fund_and_unlock, mine_until, notified, notify_script, record, register,
)

log = narrator(__name__)


def test_watch_streams_events_and_notify_runs_for_the_nodes_own(nodes, tmp_path):
    script, out = notify_script(tmp_path)
    log.info("Start a hub and a service node with --notify=%s", script.name)
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node", f"--notify={script}"])
    connect_nodes(sn, hub)
    log.info("snode-cli watch --json on the service node, from before its registration")
    watch = subprocess.Popen(
        [sys.executable, "-m", "snode.tools.cli", "--rpc", f"http://{sn.ip}:{sn.rpc_port}", "--json",
         "watch", "--count", "400"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)  # type: ignore[arg-type]
    reader.start()
    try:
        log.info("Mine until watch prints a block: it is connected")
        mine_until(hub, lambda: any('"block"' in line for line in list(lines)), timeout=30,
                   what="watch printing a block")
        operator = key_from_label("events op")
        fund_and_unlock(hub, {operator.public: SOLO + COIN})
        sync_blocks([hub, sn])
        log.info("Register it and mine until the quorum activates it and it is payable")
        register(sn, hub, operator, SOLO)
        hub.generate_blocks(blocks=1)
        pubkey = sn.get_service_node_key()["service_node_pubkey"]
        mine_until(hub, lambda: record(hub, pubkey)["payable"], timeout=60, what="the node payable")
        mine_until(hub, lambda: any(e.get("SNODE_EVENT") == "reward" for e in notified(out)),
                   timeout=60, what="a reward notified")
        sync_blocks([hub, sn])
    finally:
        watch.terminate()  # by its pid
        watch.wait(timeout=scaled(10))
        reader.join(timeout=scaled(10))
        stderr = watch.stderr.read() if watch.stderr else ""
        for pipe in (watch.stdout, watch.stderr):
            if pipe is not None:
                pipe.close()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    kinds = {e["event"] for e in events}
    log.info("watch printed %d events of kinds %s", len(events), sorted(kinds))
    assert {"block", "state", "proof_accepted", "reward"} <= kinds, (kinds, stderr)
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
