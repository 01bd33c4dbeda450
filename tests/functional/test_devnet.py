"""snode-devnet as an operator uses it: up prints where things are, status shows a table, down
stops exactly the processes up started; and the whole demo (the issue's lifecycle, through the
real wallet and CLI) completes against real daemons.

`snode-devnet` runs as a child process on this worker's own 127.x.251.* addresses; the test reads
what it prints and checks the daemons it started by their pids in /proc.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys

import pytest

from snode.api.client import call_once
from snode.common.procs import all_pids, process_args
from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.params import COIN, DEVNET
from tests.functional.devnet_helpers import ENV, devnet, rows
from tests.functional.framework import assert_equal, narrator, process_gone, scaled, wait_until

log = narrator(__name__)


def test_up_status_stop_start_down(tmp_path):
    base = tmp_path / "net"
    log.info("devnet up with 2 nodes: the authority and node1, node2 start, and it says where")
    out = devnet(base, "up", "--nodes", "2")
    pids = []
    try:
        assert_equal(out.returncode, 0, out.stderr)
        assert f"running in {base}" in out.stdout
        pids = [int(line.split("pid ")[1].split(",")[0]) for line in out.stdout.splitlines() if "pid " in line]
        assert_equal(len(pids), 3)
        assert all(not process_gone(p) for p in pids)
        assert (base / "wallets" / "faucet.wallet").is_file()
        log.info("devnet up again: refused, already running")
        again = devnet(base, "up", "--nodes", "2")
        assert_equal(again.returncode, 1)
        assert "already running" in again.stderr
        log.info("devnet status: a table of the three processes; --json names their roles and pids")
        status = devnet(base, "status")
        assert_equal(status.returncode, 0, status.stderr)
        assert all(name in status.stdout for name in ("authority", "node1", "node2", "not registered"))
        rows = json.loads(devnet(base, "status", "--json").stdout)
        assert_equal([(r["name"], r["role"], r["pid"]) for r in rows],
                     [("authority", "authority", pids[0]), ("node1", "service_node", pids[1]),
                      ("node2", "service_node", pids[2])])
        assert rows[0]["sn_pubkey"] is None and len(rows[1]["sn_pubkey"]) == 64
        log.info("devnet stop node2: that one process stops, by its pid; starting it again catches up")
        assert "stopped node2" in devnet(base, "stop", "node2").stdout
        wait_until(lambda: process_gone(pids[2]), timeout=20, what="node2 gone")
        assert all(not process_gone(p) for p in pids[:2])
        stopped_again = devnet(base, "stop", "node2")
        assert_equal((stopped_again.returncode, stopped_again.stderr.strip()),
                     (1, "snode-devnet: node2 is not running"))
        started = devnet(base, "start", "node2")
        assert_equal(started.returncode, 0, started.stderr)
        rows = json.loads(devnet(base, "status", "--json").stdout)
        pids[2] = rows[2]["pid"]
        wait_until(lambda: json.loads(devnet(base, "status", "--json").stdout)[2]["height"]
                   == json.loads(devnet(base, "status", "--json").stdout)[0]["height"], timeout=30,
                   what="node2 caught up with the authority")
        log.info("Unknown names and starting a running process: one line each")
        unknown = devnet(base, "stop", "node9")
        assert_equal(unknown.returncode, 1)
        assert "no process named 'node9' in this devnet; the names are authority, node1, node2" in unknown.stderr
        running = devnet(base, "start", "node1")
        assert_equal(running.returncode, 1)
        assert "node1 is already running" in running.stderr
    finally:
        log.info("devnet down: every daemon stops")
        stopped = devnet(base, "down")
    assert_equal(stopped.returncode, 0, stopped.stderr)
    assert "stopped 3 of 3" in stopped.stdout
    wait_until(lambda: all(process_gone(p) for p in pids), timeout=20, what="devnet daemons gone")
    log.info("devnet status after down: no devnet")
    missing = devnet(base, "status")
    assert_equal(missing.returncode, 1)
    assert "no devnet in" in missing.stderr


def test_printed_stop_command_works_as_printed(tmp_path):
    base = tmp_path / "my net"
    log.info("devnet up --nodes 1 in a base dir with a space: it says how to stop it")
    out = devnet(base, "up", "--nodes", "1")
    pids = [int(line.split("pid ")[1].split(",")[0]) for line in out.stdout.splitlines() if "pid " in line]
    stopped = None
    try:
        assert_equal(out.returncode, 0, out.stderr)
        assert f"devnet of 1 service node and the authority running in {base}" in out.stdout, out.stdout
        hint = next(line for line in out.stdout.splitlines() if line.startswith("stop it with: "))
        words = shlex.split(hint.removeprefix("stop it with: "))
        assert_equal(words[0], "snode-devnet")
        log.info("--base-dir also goes after the subcommand; given twice, the two must agree")
        after = devnet(base, "status", "--json", "--base-dir", str(base))
        assert_equal(after.returncode, 0, after.stderr)
        assert_equal(len(json.loads(after.stdout)), 2)
        twice = devnet(base, "status", "--base-dir", str(tmp_path / "other"))
        assert_equal((twice.returncode, twice.stderr.strip()),
                     (1, f"snode-devnet: --base-dir given twice, as {base} and as {tmp_path / 'other'}; "
                         "give it once"))
        log.info("Run the printed command as printed, from another directory: %s", hint)
        env = {k: v for k, v in ENV.items() if k != "SNODE_DEVNET_DIR"}
        stopped = subprocess.run([sys.executable, "-m", "snode.tools.devnet", *words[1:]], capture_output=True,
                                 text=True, timeout=scaled(60), stdin=subprocess.DEVNULL, env=env, cwd=os.sep)
    finally:
        if stopped is None or stopped.returncode != 0:
            devnet(base, "down")
    assert_equal(stopped.returncode, 0, stopped.stderr)
    assert f"stopped 2 of 2 daemons in {base}" in stopped.stdout, stopped.stdout
    wait_until(lambda: all(process_gone(p) for p in pids), timeout=20, what="devnet daemons gone")


def test_up_register_reaches_service_node_block_production(tmp_path):
    base = tmp_path / "net"
    log.info("devnet up --nodes 4 --register: every node is registered by its own operator")
    out = devnet(base, "up", "--nodes", "4", "--register")
    try:
        assert_equal(out.returncode, 0, out.stderr)
        assert all(f"node{i} registered by its operator" in out.stdout for i in range(1, 5))
        log.info("The quorum activates them and the service nodes take over block production")
        node1 = json.loads(devnet(base, "status", "--json").stdout)[1]
        cli = [sys.executable, "-m", "snode.tools.cli", "--rpc", node1["rpc"]]

        def production() -> str:
            info = subprocess.run([*cli, "--json", "status"], capture_output=True, text=True, timeout=scaled(30))
            return json.loads(info.stdout)["block_production"] if info.returncode == 0 else ""
        wait_until(lambda: production() == "service_nodes", timeout=90, what="service-node block production")
        log.info("snode-cli blocks shows blocks from service-node leaders with k/n signatures")
        wait_until(lambda: "/3" in subprocess.run([*cli, "blocks", "--count", "3"], capture_output=True,
                                                  text=True, timeout=scaled(30)).stdout,
                   timeout=30, what="a service-node block in snode-cli blocks")
        rows = json.loads(devnet(base, "status", "--json").stdout)
        assert all(r["status"] == "Active" for r in rows[1:]), rows
    finally:
        devnet(base, "down")


@pytest.mark.slow
@pytest.mark.scenario
def test_demo_runs_the_operator_flow(tmp_path):
    log.info("Run the whole demo; its output must state every step of the lifecycle")
    out = devnet(tmp_path / "demo", "demo", timeout=300)
    assert_equal(out.returncode, 0, out.stdout[-3000:] + out.stderr[-2000:])
    for claim in ("node2 shows Await", "node2 is full: 3 contributors", "node1 and node2 are Active",
                  "node1 is payable", "the service nodes produce the blocks", "stopped the authority",
                  "carries", "are final", "node1 is Decomm, decommission_count 1, reason missed_",
                  "node1 is Active again", "rewards arrived", "demo complete", "stopped 5 daemons;"):
        assert claim in out.stdout, claim


def test_up_after_down_and_snode_cli_by_node_name(tmp_path):
    base = tmp_path / "net"
    cli = [sys.executable, "-m", "snode.tools.cli"]

    def snode_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cli, *args], capture_output=True, text=True, timeout=scaled(30),
                              stdin=subprocess.DEVNULL, env=ENV, cwd=tmp_path)

    log.info("up, down: down says the data dirs stay; up again in the same base dir starts afresh")
    first = devnet(base, "up", "--nodes", "1")
    try:
        assert_equal(first.returncode, 0, first.stderr)
    finally:
        stopped = devnet(base, "down")
    assert "their data dirs stay for reading (the next 'up' there replaces them)" in stopped.stdout
    old_genesis = (base / "genesis.json").read_bytes()
    (base / "notes.txt").write_text("an operator's own file\n")
    (base / "node7").mkdir()  # a name up uses, but not a data dir up made (no daemon.out)
    (base / "node7" / "mine").write_text("kept\n")
    again = devnet(base, "up", "--nodes", "2")
    try:
        assert_equal(again.returncode, 0, again.stderr)
        assert f"removed the stopped devnet's data dirs, wallets and genesis from {base}" in again.stdout
        assert (base / "genesis.json").read_bytes() != old_genesis
        assert_equal((base / "notes.txt").read_text(), "an operator's own file\n")
        assert_equal((base / "node7" / "mine").read_text(), "kept\n")
        rows = json.loads(devnet(base, "status", "--json").stdout)
        log.info("snode-cli --devnet --node node2: that process; no --node: the first, the authority")
        by_name = snode_cli("--devnet", "--base-dir", str(base), "--node", "node2", "call", "get_service_node_key")
        assert_equal(by_name.returncode, 0, by_name.stderr)
        assert_equal(json.loads(by_name.stdout)["service_node_pubkey"], rows[2]["sn_pubkey"])
        default = snode_cli("--devnet", "--base-dir", str(base), "--json", "status")
        assert_equal(json.loads(default.stdout)["service_node"], False)
        log.info("the devnet found from the working directory, as snode-devnet finds it")
        (tmp_path / "devnet").symlink_to(base)
        here = snode_cli("--devnet", "--node", "node1", "call", "get_service_node_key")
        assert_equal(json.loads(here.stdout)["service_node_pubkey"], rows[1]["sn_pubkey"])
        unknown = snode_cli("--devnet", "--base-dir", str(base), "--node", "node9", "status")
        assert_equal((unknown.returncode, unknown.stderr.strip()),
                     (1, "snode-cli: no process named 'node9' in this devnet; the names are "
                         "authority, node1, node2"))
        both = snode_cli("--devnet", "--node", "node1", "--rpc", rows[1]["rpc"], "status")
        assert_equal(both.stderr.strip(), "snode-cli: --node and --daemon-address both name the daemon: give one")
        log.info("--daemon-address and --rpc are one option of snode-cli")
        for spelling in ("--daemon-address", "--rpc"):
            out = snode_cli(spelling, rows[2]["rpc"].removeprefix("http://"), "call", "get_service_node_key")
            assert_equal(json.loads(out.stdout)["service_node_pubkey"], rows[2]["sn_pubkey"])
    finally:
        devnet(base, "down")


def test_up_that_fails_stops_what_it_started(tmp_path):
    base = tmp_path / "net"
    prefix = ENV["SNODE_DEVNET_IP_PREFIX"]
    log.info("Something else holds node1's RPC port: up fails naming node1 and stops the authority it started")
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind((f"{prefix}2", 38091))
        taken.listen()
        out = devnet(base, "up", "--nodes", "1")
    assert_equal(out.returncode, 1, out.stdout)
    assert out.stderr.startswith("snode-devnet: node1 exited during start-up"), out.stderr
    assert out.stderr.rstrip().endswith("; the devnet's other daemons were stopped"), out.stderr
    assert "Traceback" not in out.stderr
    assert not (base / "devnet.json").exists()
    wait_until(lambda: not _running_on(base / "authority"), timeout=20, what="the authority stopped")
    missing = devnet(base, "status")
    assert "no devnet in" in missing.stderr
    log.info("up again, with the port free: it starts afresh")
    again = devnet(base, "up", "--nodes", "1")
    try:
        assert_equal(again.returncode, 0, again.stderr)
    finally:
        devnet(base, "down")


def _running_on(data_dir) -> list[int]:
    """Pids of the processes whose command line names data_dir as --data-dir."""
    flag = f"--data-dir={data_dir}".encode()
    return [pid for pid in all_pids() if flag in (process_args(pid) or ())]


def test_up_with_a_test_fork_runs_every_daemon_and_wallet_on_that_schedule(tmp_path):
    base = tmp_path / "forked"
    log.info("A malformed --test-fork is one line, and nothing starts")
    bad = devnet(base, "up", "--nodes", "1", "--test-fork", "v2")
    assert_equal((bad.returncode, bad.stderr.strip()),
                 (1, "snode-devnet: --test-fork: 'v2' is not NAME@HEIGHT (example: v2@20)"))
    assert not (base / "devnet.json").exists()
    log.info("up --test-fork v2@40: devnet.json keeps it, each daemon shows v2 as its next fork")
    out = devnet(base, "up", "--nodes", "1", "--test-fork", "v2@40")
    try:
        assert_equal(out.returncode, 0, out.stderr)
        assert "forks scheduled: --test-fork=v2@40" in out.stdout, out.stdout
        assert_equal(json.loads((base / "devnet.json").read_text())["test_forks"], ["v2@40"])
        for name in ("authority", "node1"):
            cli = subprocess.run([sys.executable, "-m", "snode.tools.cli", "--devnet", "--node", name, "status"],
                                 capture_output=True, text=True, timeout=scaled(60), stdin=subprocess.DEVNULL,
                                 env={**ENV, "SNODE_DEVNET_DIR": str(base)})
            assert_equal(cli.returncode, 0, cli.stderr)
            assert "fork v2 at 40" in cli.stdout, cli.stdout
        log.info("stop and start node1: it comes back on the same schedule")
        assert_equal(devnet(base, "stop", "node1").returncode, 0)
        started = devnet(base, "start", "node1")
        assert_equal(started.returncode, 0, started.stderr)
        pid = next(n["pid"] for n in json.loads((base / "devnet.json").read_text())["nodes"] if n["name"] == "node1")
        args = process_args(pid)
        assert args is not None and b"--test-fork=v2@40" in args, args
    finally:
        devnet(base, "down")


def test_faucet_pays_an_address_and_says_why_not_in_one_line(tmp_path):
    base = tmp_path / "net"
    address = encode_address(DEVNET.address_prefix, SigningKey(b"\x07" * 32).public)
    log.info("devnet up --nodes 1, then faucet ADDRESS 12.5: the faucet wallet pays it")
    up = devnet(base, "up", "--nodes", "1")
    try:
        assert_equal(up.returncode, 0, up.stderr)
        paid = devnet(base, "faucet", address, "12.5")
        assert_equal(paid.returncode, 0, paid.stderr)
        tx_id = paid.stdout.strip().rsplit(" ", 1)[-1]
        assert_equal(paid.stdout.strip(), f"sent 12.5 coins to {address}: transaction {tx_id}")
        node1 = rows(base)[1]["rpc"]
        wait_until(lambda: [(o["txid"], o["amount"]) for o in call_once(node1, "get_outputs", {"address": address})
                            ["outputs"]] == [(tx_id, 12 * COIN + COIN // 2)], timeout=30,
                   what="node1 sees the faucet's output mined")
        log.info("Without an amount it pays %s coins; a second payment needs no unlock", "1000")
        again = devnet(base, "faucet", address)
        assert_equal(again.returncode, 0, again.stderr)
        assert again.stdout.startswith(f"sent 1000 coins to {address}: transaction "), again.stdout
        log.info("A wrong address or amount: one line each, nothing sent")
        for args, line in (
            (["snd1bad"], "snode-devnet: faucet: address contains characters that are not in an address: 'b'"),
            (["sn1" + address[4:]], "snode-devnet: faucet: address 'sn1" + address[4:13]
             + "...' has the wrong network prefix: addresses on this network begin with 'snd1'"),
            ([address, "abc"], f"snode-devnet: the faucet could not pay {address}: amount 'abc' is not a "
                               "decimal number: give digits such as 1.5"),
        ):
            refused = devnet(base, "faucet", *args)
            assert_equal((refused.returncode, refused.stdout, refused.stderr.strip()), (1, "", line))
        log.info("With every daemon stopped: one line saying how to start one")
        for name in ("node1", "authority"):
            assert_equal(devnet(base, "stop", name).returncode, 0)
        stopped = devnet(base, "faucet", address)
        assert_equal((stopped.returncode, stopped.stderr.strip()),
                     (1, "snode-devnet: no daemon of this devnet is running; start one with: "
                         f"snode-devnet --base-dir {base} start authority"))
    finally:
        devnet(base, "down")
