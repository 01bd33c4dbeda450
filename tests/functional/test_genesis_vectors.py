"""Real daemons start from the genesis blocks the consensus vectors pin (tests/vectors/genesis.json).

One plain `snoded` per network (devnet from the vector's own genesis document, given with
--genesis, since devnet has none built in); each one's `get_info` genesis hash and its
`get_block` of height 0 (hash, coinbase id, the whole encoded block) must equal the vector.
"""

from __future__ import annotations

import json

import pytest

from tests.functional.framework import assert_equal, narrator
from tests.vectors.make import HERE

log = narrator(__name__)
CASES = {c["network"]: c for c in json.loads((HERE / "genesis.json").read_text())["cases"]}
"""Today's block 0 of each network (the file also keeps those of version 1 transactions)."""


@pytest.mark.parametrize("network", ["regtest", "testnet", "mainnet", "devnet"])
def test_daemon_genesis_equals_the_vector(nodes, tmp_path, network):
    case = CASES[network]
    extra = []
    if case["source"] == "doc":
        genesis = tmp_path / "genesis.json"
        genesis.write_text(json.dumps(case["doc"]))
        extra = [f"--genesis={genesis}"]
    log.info(f"Start a plain {network} daemon; its block 0 must be the vector's")
    node = nodes.add(network=network, extra_args=extra)
    expected = case["expected"]
    assert_equal(node.get_info()["genesis_hash"], expected["block_hash"], "get_info genesis_hash")
    block = node.get_block(height=0)
    assert_equal(block["hash"], expected["block_hash"], "get_block hash")
    assert_equal(block["tx_ids"], [expected["coinbase_txid"]], "get_block tx_ids")
    assert_equal(block["block_hex"], expected["block_encoding"], "get_block block_hex")
