"""Service nodes produce the blocks (issue #12), on a devnet of real daemons: an authority daemon
(holding the genesis authority key, not a service node) and service-node daemons, each its own
process on its own 127.x address, connected over P2P and quorumnet.

The genesis pays each operator directly, so registrations go in at once; the authority's quorum
activates the first nodes from their uptime proofs, then the service nodes' own quorum the rest.
Once enough are active and payable, production passes to the service nodes: every block comes
from its round's leader with its validators' signatures, the authority can be stopped, and
checkpoints make the chain final.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET
from tests.functional.framework import NodeSet, assert_equal, connect_nodes, narrator, sync_blocks, wait_until
from tests.functional.sn_helpers import SOLO, register

log = narrator(__name__)


class SnNet:
    """An authority daemon and `count` service-node daemons on a fresh devnet."""

    def __init__(self, nodes: NodeSet, tmp_path: Path, count: int) -> None:
        self.operators = [key_from_label(f"sn blocks op {i}") for i in range(count)]
        authority = SigningKey(os.urandom(32))
        genesis = tmp_path / "genesis.json"
        genesis.write_bytes(encode_genesis(GenesisDoc(
            network="devnet", timestamp=int(time.time()) - 4, authorities=[authority.public.hex()],
            outputs=[GenesisOutput(encode_address(DEVNET.address_prefix, op.public), SOLO + COIN)
                     for op in self.operators],
        )))
        self.authority = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}"], start=False)
        self.authority.data_dir.mkdir(parents=True)
        (self.authority.data_dir / "authority_key").write_text(authority.seed.hex() + "\n")
        self.authority.start()
        self.sns = [nodes.add(network="devnet", extra_args=[f"--genesis={genesis}", "--service-node"])
                    for _ in range(count)]
        for sn in self.sns:
            connect_nodes(sn, self.authority)
        self.pubkeys = [sn.get_service_node_key()["service_node_pubkey"] for sn in self.sns]

    @property
    def all(self) -> list[Any]:
        return [self.authority, *self.sns]

    def register_all(self) -> None:
        wait_until(lambda: all(sn.get_info()["target_height"] == 0 and sn.get_info()["height"] > 0
                               for sn in self.sns), timeout=30, what="service nodes synced")
        for sn, op in zip(self.sns, self.operators):
            register(sn, self.authority, op, SOLO)

    def active(self, node: Any) -> int:
        states = node.get_service_nodes()["service_node_states"]
        return sum(1 for s in states if s["active"])


def test_service_nodes_take_over_and_keep_producing_without_the_authority(nodes, tmp_path):
    log.info("Start an authority daemon and 12 service nodes on a fresh devnet; register them all")
    net = SnNet(nodes, tmp_path, 12)
    net.register_all()
    log.info("The quorums activate every node; production passes to the service nodes")
    wait_until(lambda: net.active(net.authority) == len(net.sns), timeout=120, what="all nodes active")
    wait_until(lambda: net.authority.get_info()["block_production"] == "service_nodes",
               timeout=60, what="service-node block production")
    handover = net.authority.get_info()["height"]

    log.info("Stop the authority: blocks keep coming from service-node leaders")
    sync_blocks(net.all)
    net.authority.stop()
    watcher = net.sns[0]
    start_height, start_time = watcher.get_info()["height"], time.monotonic()
    wait_until(lambda: watcher.get_info()["height"] >= start_height + 20, timeout=120,
               what="20 service-node blocks without the authority")
    elapsed = time.monotonic() - start_time
    sync_blocks(net.sns)
    log.info("Every block after the hand-over is a leader's, with enough validator signatures")
    for height in range(handover + 1, watcher.get_info()["height"] + 1):
        block = watcher.get_block(height=height)
        assert block["producer"] in net.pubkeys, (height, block["producer"])
        n = block["validator_count"]
        assert n == DEVNET.validator_count(len(net.sns)), (height, n, handover, watcher.get_service_nodes())
        assert len(block["validators"]) >= DEVNET.signatures_needed(n), (height, block["validators"])
    log.info("20 blocks in %.1f s (devnet block time %d s)", elapsed, DEVNET.target_block_time)
    assert elapsed <= 2 * 20 * DEVNET.target_block_time + 10

    log.info("Checkpoints carried by the chain make blocks final")
    wait_until(lambda: watcher.get_info()["immutable_height"] > handover, timeout=60, what="a final height")
    final = watcher.get_info()["immutable_height"]
    assert_equal(watcher.get_block(height=final)["checkpointed"], True)
