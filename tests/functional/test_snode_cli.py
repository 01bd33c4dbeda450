"""snode-cli against a real daemon: status, nodes, call, register-cmd, --json, and the errors an
operator meets (daemon not running, bad JSON, RPC errors): one line, exit 1, no traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys

from snode.core.registration import parse_command
from snode.params import COIN, REGTEST
from tests.functional.framework import address_of, assert_equal, fund, next_loopback_ip, send_spend
from tests.functional.test_rpc import operator_key


def snode_cli(node_or_url, *args):
    url = node_or_url if isinstance(node_or_url, str) else f"http://{node_or_url.ip}:{node_or_url.rpc_port}"
    return subprocess.run([sys.executable, "-m", "snode.tools.cli", "--rpc", url, *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def test_status_and_call(nodes):
    node = nodes.add(extra_args=["--service-node"])
    out = snode_cli(node, "status")
    assert_equal(out.returncode, 0, out.stderr)
    assert out.stdout.startswith("v0.1.0; Height: 0, SN: not registered\n")
    assert "synced" in out.stdout
    out = snode_cli(node, "--json", "status")
    assert_equal(json.loads(out.stdout)["height"], 0)
    out = snode_cli(node, "call", "generate_blocks", '{"blocks": 2}')
    assert_equal(json.loads(out.stdout)["height"], 2)
    out = snode_cli(node, "call", "generate_blocks", "{blocks: 2}")
    assert_equal(out.returncode, 1)
    assert "not valid JSON" in out.stderr and "Traceback" not in out.stderr
    out = snode_cli(node, "call", "no_such_method")
    assert_equal(out.returncode, 1)
    assert_equal(out.stderr.strip(), "snode-cli: no_such_method: Method not found: no_such_method")


def test_daemon_not_running():
    url = f"http://{next_loopback_ip()}:38091"
    for command in (["status"], ["nodes"], ["call", "get_info"]):
        out = snode_cli(url, *command)
        assert_equal(out.returncode, 1)
        assert out.stderr.startswith(f"snode-cli: Unable to connect to {url}"), out.stderr
        assert "Traceback" not in out.stderr


def test_register_cmd_and_nodes_table(nodes):
    node = nodes.add(extra_args=["--service-node"])
    op = operator_key("cli operator")
    out = snode_cli(node, "register-cmd", "--cut", "5", "--address", address_of(node, op), "--amount", "100000")
    assert_equal(out.returncode, 0, out.stderr)
    line = out.stdout.strip()
    assert line.startswith("register_service_node 5 ") and "\n" not in line
    out = snode_cli(node, "register-cmd", "--address", address_of(node, op), "--amount", "1,000")
    assert_equal(out.returncode, 1)
    assert "--amount" in out.stderr and "comma" in out.stderr
    out = snode_cli(node, "register-cmd", "--address", address_of(node, op), "--amount", "50")
    assert_equal(out.returncode, 1)
    assert "Failed to make registration command: operator contribution 50 is below the pool minimum" in out.stderr

    out = snode_cli(node, "nodes")
    assert_equal(out.returncode, 0)
    assert "no service nodes registered" in out.stdout
    fund(node, {op.public: 100_001 * COIN})
    node.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    send_spend(node, op, [], parse_command(line, REGTEST))
    node.generate_blocks(blocks=1)
    out = snode_cli(node, "nodes")
    assert_equal(out.returncode, 0, out.stderr)
    pubkey = node.get_service_node_key()["service_node_pubkey"]
    assert pubkey[:12] in out.stdout
    assert "Await" in out.stdout and "5" in out.stdout and "never" in out.stdout
    out = snode_cli(node, "--json", "nodes")
    assert_equal(json.loads(out.stdout)["service_node_states"][0]["service_node_pubkey"], pubkey)
