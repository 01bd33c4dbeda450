"""Snapshots with real daemons (issue #36 items 2, 3, 7): a regtest daemon with `--snapshots`
writes a snapshot at each settled multiple of the network's spacing (regtest: 5, two blocks
below the tip), keeps the newest two, whose parts sum to the root their block's header carries;
a new node given only the trusted point fetches one from peers and syncs on from it."""

from __future__ import annotations

from pathlib import Path

from snode.core.blocks import Block, block_hash, header_state_root
from snode.core.encoding import decode
from snode.core.snapshot import check_manifest
from snode.params import REGTEST
from snode.store.snapshot import Snapshots
from tests.functional.framework import assert_equal, narrator, wait_until

log = narrator(__name__)
V2_AT = 2


def _header(node, height: int):
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block).header


def _written(data_dir: Path) -> list[int]:
    return [int(p.name[:10]) for p in Snapshots(data_dir).paths()]


def test_a_node_writes_snapshots_at_settled_heights_and_keeps_the_newest_two(nodes):
    log.info("A regtest daemon with --snapshots and fork v2 at %d", V2_AT)
    node = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", "--snapshots"])
    node.generate_blocks(blocks=7)
    log.info("At height 7 the height 5 is settled (two below the tip): its snapshot is written")
    wait_until(lambda: _written(node.data_dir) == [5], timeout=30)
    node.generate_blocks(blocks=10)
    wait_until(lambda: _written(node.data_dir) == [10, 15], timeout=30)
    log.info("Each manifest's parts sum to the root its block's header carries")
    snapshots = Snapshots(node.data_dir)
    for path in snapshots.paths():
        manifest = snapshots.verified(path)
        header = _header(node, manifest.height)
        check_manifest(manifest, REGTEST.network_id, header.height, block_hash(header), header_state_root(header))
    assert_equal(node.get_info()["height"], 17, "the tip")
