"""snode-cli against a real daemon: status, nodes, call, register-cmd, --json, and the errors an
operator meets (daemon not running, bad JSON, RPC errors): one line, exit 1, no traceback.

`snode-cli` runs as a child process (`framework.snode_cli`) against daemons of the framework;
the test reads its exit status, standard output and standard error.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from snode.core.registration import parse_command
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.framework import (
    address_of,
    assert_equal,
    connect_nodes,
    fund,
    narrator,
    next_loopback_ip,
    scaled,
    send_spend,
    snode_cli,
    wait_until,
)
from tests.functional.sn_helpers import record, registered_solo

log = narrator(__name__)


def test_status_and_call(nodes):
    node = nodes.add(extra_args=["--service-node"])
    log.info("status: the daemon's status line and sync state; --json status: the fields")
    out = snode_cli(node, "status")
    assert_equal(out.returncode, 0, out.stderr)
    assert out.stdout.startswith("v0.2.0; Height: 0, SN: not registered, proof: never\n")
    assert "synced" in out.stdout
    out = snode_cli(node, "--json", "status")
    assert_equal(json.loads(out.stdout)["height"], 0)
    log.info("call generate_blocks with JSON params mines 2 blocks")
    out = snode_cli(node, "call", "generate_blocks", '{"blocks": 2}')
    assert_equal(json.loads(out.stdout)["height"], 2)
    log.info("call with params that are not JSON, then an unknown method: one line each, exit 1")
    out = snode_cli(node, "call", "generate_blocks", "{blocks: 2}")
    assert_equal(out.returncode, 1)
    assert "not valid JSON" in out.stderr and "Traceback" not in out.stderr
    out = snode_cli(node, "call", "no_such_method")
    assert_equal(out.returncode, 1)
    assert_equal(out.stderr.strip(), "snode-cli: no_such_method: Method not found: no_such_method")


def test_daemon_not_running():
    url = f"http://{next_loopback_ip()}:38091"
    said = {}
    for command in (["status"], ["nodes"], ["call", "get_info"], ["watch"]):
        log.info("%s with no daemon at %s: one line saying so, exit 1", " ".join(command), url)
        out = snode_cli(url, *command)
        assert_equal(out.returncode, 1)
        assert out.stderr.startswith(f"snode-cli: Unable to connect to {url}"), out.stderr
        assert "Traceback" not in out.stderr
        said[command[0]] = out.stderr
    log.info("watch says it in the same words as status")
    assert_equal(said["watch"], said["status"])


def test_register_cmd_and_nodes_table(nodes):
    node = nodes.add(extra_args=["--service-node"])
    op = key_from_label("cli operator")
    log.info("register-cmd prints one registration line")
    out = snode_cli(node, "register-cmd", "--cut", "5", "--address", address_of(node, op), "--amount", "100000")
    assert_equal(out.returncode, 0, out.stderr)
    line = out.stdout.strip()
    assert line.startswith("register_service_node 5 ") and "\n" not in line
    log.info("register-cmd with an amount with a comma, then one below the pool minimum: refused")
    out = snode_cli(node, "register-cmd", "--address", address_of(node, op), "--amount", "1,000")
    assert_equal(out.returncode, 1)
    assert "--amount" in out.stderr and "comma" in out.stderr
    out = snode_cli(node, "register-cmd", "--address", address_of(node, op), "--amount", "50")
    assert_equal(out.returncode, 1)
    assert ("Failed to make registration command: operator contribution 50000000000 atomic units (50 coins) is "
            "below the pool minimum of 100000000000000 atomic units (100000 coins)") in out.stderr

    log.info("nodes before any registration says there are none")
    out = snode_cli(node, "nodes")
    assert_equal(out.returncode, 0)
    assert "no service nodes registered" in out.stdout
    log.info("Fund the operator, pay the printed line and mine it")
    fund(node, {op.public: 100_001 * COIN})
    node.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    send_spend(node, op, [], parse_command(line, REGTEST))
    node.generate_blocks(blocks=1)
    log.info("nodes shows the new node awaiting contributions; --json nodes the record")
    out = snode_cli(node, "nodes")
    assert_equal(out.returncode, 0, out.stderr)
    pubkey = node.get_service_node_key()["service_node_pubkey"]
    assert pubkey[:12] in out.stdout
    row = next(r for r in out.stdout.splitlines() if r.startswith(pubkey[:12]))
    # The proof column: "never", or the proof's age once the node's first one is in (its
    # doppelganger wait of 4 s may be over by now on a slow machine).
    assert re.search(r" Await +no +\d+ +100000 / 200000 +5 +1 +0 +(never|\d+s) ", row), row
    out = snode_cli(node, "--json", "nodes")
    assert_equal(json.loads(out.stdout)["service_node_states"][0]["service_node_pubkey"], pubkey)


def test_register_cmd_takes_a_percent_sign(nodes):
    node = nodes.add(extra_args=["--service-node"])
    op = address_of(node, key_from_label("cli operator"))
    log.info("--cut 5%% is the same fee (the wallet takes 50%% for a stake, so percent signs are natural)")
    out = snode_cli(node, "register-cmd", "--cut", "5%", "--address", op, "--amount", "100000")
    assert_equal(out.returncode, 0, out.stderr)
    assert out.stdout.startswith("register_service_node 5 "), out.stdout
    out = snode_cli(node, "register-cmd", "--cut", "5%%", "--address", op, "--amount", "100000")
    assert_equal(out.returncode, 1)
    assert "operator_cut: percent '5%' is not a decimal number" in out.stderr, out.stderr


def test_blocks_table_and_json(nodes):
    node = nodes.add()
    log.info("Mine 3 regtest blocks: snode-cli blocks lists them newest first, by the authority")
    node.generate_blocks(blocks=3)
    out = snode_cli(node, "blocks", "--count", "2")
    assert_equal(out.returncode, 0, out.stderr)
    rows = [line.split() for line in out.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert_equal([(r[0], r[2], r[4]) for r in rows], [("3", "authority", "-"), ("2", "authority", "-")])
    log.info("--json: the get_block records without the raw block")
    listed = json.loads(snode_cli(node, "--json", "blocks", "--count", "4").stdout)
    assert_equal([b["height"] for b in listed], [3, 2, 1, 0])
    assert all("block_hex" not in b for b in listed)
    assert all(b["producer"] == "authority" for b in listed[:3])
    log.info("A count that is not 1 to 1,000: one line naming the option")
    for bad in ("0", "abc", "1001"):
        refused = snode_cli(node, "blocks", "--count", bad)
        assert_equal(refused.returncode, 1)
        assert_equal(refused.stderr.strip(),
                     f"snode-cli: --count: '{bad}' is not a number of blocks from 1 to 1,000")


def test_fleet_shows_each_node_on_a_line_and_a_dead_one_as_unreachable(nodes, tmp_path):
    log.info("A hub and an active service node; a third address where nothing listens")
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    pk = registered_solo(hub, sn, "fleet operator")
    height = hub.generate_blocks(blocks=1)["height"]
    wait_until(lambda: sn.get_info()["height"] == height, timeout=30, what="the node at the hub's height")
    credit = record(sn, pk)["earned_downtime_blocks"]
    dead = f"{next_loopback_ip()}:38091"
    urls = [f"{n.ip}:{n.rpc_port}" for n in (hub, sn)]

    log.info("fleet --rpc x3: one line each, in the order given; the dead one says it is unreachable")
    out = subprocess.run([sys.executable, "-m", "snode.tools.cli", "fleet", "--rpc", urls[0], "--rpc", urls[1],
                          "--rpc", dead], capture_output=True, text=True, timeout=scaled(60))
    assert_equal(out.returncode, 0, out.stderr)
    rows = out.stdout.splitlines()
    assert_equal(len(rows), 3, out.stdout)
    width = max(map(len, [*urls, dead]))
    assert_equal(rows[0], f"{urls[0]:<{width}}  not a service node, height {height}, v0.2.0")
    name = re.escape(f"{urls[1]:<{width}}")
    assert re.fullmatch(rf"{name}  Active, proof (never|\d+s), credit {credit} blocks?, height {height}, "
                        r"v0\.2\.0, (no reward yet|last reward \d+)", rows[1]), rows[1]
    assert_equal(rows[2], f"{dead:<{width}}  unreachable: Unable to connect to http://{dead}: is snoded running?")

    log.info("--fleet-file with names, --json: one object a line, lag against the highest height")
    fleet_file = tmp_path / "fleet"
    fleet_file.write_text(f"# my nodes\nhub {urls[0]}\n\nsn http://{urls[1]}\ngone {dead}\n")
    out = subprocess.run([sys.executable, "-m", "snode.tools.cli", "--json", "fleet", "--fleet-file",
                          str(fleet_file)], capture_output=True, text=True, timeout=scaled(60))
    assert_equal(out.returncode, 0, out.stderr)
    views = [json.loads(line) for line in out.stdout.splitlines()]
    assert_equal([(v["name"], v["reachable"], v["lag"]) for v in views],
                 [("hub", True, 0), ("sn", True, 0), ("gone", False, None)])
    assert_equal((views[1]["state"], views[1]["service_node_pubkey"], views[1]["credit_blocks"]),
                 ("Active", pk, credit))
    assert_equal(views[0]["state"], "not a service node")
