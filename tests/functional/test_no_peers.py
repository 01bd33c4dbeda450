"""A daemon that cannot reach its peers says so (issue #24, item 4): the default log says once
that a priority node cannot be reached and once that it can again; with no peers, outside
regtest, `snode-cli status` says `no peers` (never `synced`) and `/readyz` names it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET
from tests.functional.framework import assert_equal, narrator, snode_cli, wait_until

log = narrator(__name__)
UNREACHABLE = "cannot be reached ("
BACK = "can be reached again"


def readyz(node: Any) -> tuple[int, dict[str, Any]]:
    status, _, data = node.rpc.raw("", method="GET", path="/readyz")
    return status, json.loads(data)


@pytest.mark.slow
def test_an_unreachable_priority_node_is_logged_once_and_no_peers_is_never_synced(nodes, tmp_path):
    genesis = tmp_path / "genesis.json"
    genesis.write_bytes(encode_genesis(GenesisDoc(
        network="devnet", timestamp=1_767_225_600, authorities=[key_from_label("devnet authority").public.hex()],
        outputs=[GenesisOutput(encode_address(DEVNET.address_prefix, SigningKey(bytes(32)).public), COIN)],
    )))
    absent = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}"], start=False)
    address = f"{absent.ip}:{absent.p2p_port}"
    log.info("A devnet daemon whose only priority node (%s) is not running, at the default log level", address)
    node = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}", f"--add-priority-node={address}"])
    wait_until(lambda: UNREACHABLE in node.stderr_text(), timeout=30, what="the unreachable priority node logged")
    line = next(li for li in node.stderr_text().splitlines() if UNREACHABLE in li)
    assert f"WARNING snode.net.peers: priority node {address} cannot be reached (" in line, line

    log.info("snode-cli status says 'no peers', not 'synced'; /readyz is 503 and names it")
    out = snode_cli(node, "status")
    assert_equal(out.returncode, 0, out.stderr)
    assert ", no peers, " in out.stdout and "synced" not in out.stdout, out.stdout
    status, body = readyz(node)
    assert_equal((status, body["ready"]), (503, False))
    assert any(reason.startswith("no peers: ") for reason in body["unmet"]), body

    log.info("The priority node starts: the log says it is back, once; status says synced; ready")
    absent.start()
    wait_until(lambda: BACK in node.stderr_text(), timeout=60, what="the priority node reachable again")
    assert_equal(node.stderr_text().count(UNREACHABLE), 1)  # not once per try
    assert ", synced, " in snode_cli(node, "status").stdout
    status, body = readyz(node)
    assert_equal((status, body["unmet"]), (200, []))

    log.info("It stops again: said once more")
    assert_equal(absent.stop(), 0)
    wait_until(lambda: node.stderr_text().count(UNREACHABLE) == 2, timeout=60, what="the second outage logged")
    assert_equal(node.stderr_text().count(BACK), 1)
