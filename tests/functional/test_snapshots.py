"""Snapshots with real daemons (issue #36 items 2, 3, 7): a regtest daemon with `--snapshots`
writes a snapshot at each settled multiple of the network's spacing (regtest: 5, two blocks
below the tip), keeps the newest two, whose parts sum to the root their block's header carries;
a new node given only the trusted point fetches one from peers and syncs on from it."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from snode.core.blocks import Block, block_hash, header_state_root
from snode.core.encoding import decode
from snode.core.snapshot import CHUNK_FRAME, Manifest, check_chunk, check_manifest
from snode.net import protocol as P
from snode.params import REGTEST
from snode.store.snapshot import Snapshots
from tests.functional.framework import (
    assert_equal, connect_nodes, narrator, next_loopback_ip, sync_blocks, wait_until,
)
from tests.functional.p2p import FakePeer

log = narrator(__name__)
T = TypeVar("T")
V2_AT = 2


def _header(node, height: int):
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block).header


def _answer(peer: FakePeer, kind: type[T]) -> T:
    """The next message of `kind` the node sends `peer` (the others skipped)."""
    message = peer.receive_until(lambda m: isinstance(m, kind))
    assert isinstance(message, kind)
    return message


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


def test_peers_get_a_snapshot_in_bounded_checked_chunks_and_a_node_without_answers_none(nodes):
    log.info("A node with snapshots and one without, fork v2 at %d", V2_AT)
    server = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", "--snapshots"])
    plain = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}"])
    server.generate_blocks(blocks=8)
    wait_until(lambda: _written(server.data_dir) == [5], timeout=30)
    log.info("A peer of protocol %d asks for the newest snapshot: the block and its manifest", P.SNAPSHOT_VERSION)
    peer = FakePeer(server, source_ip=next_loopback_ip())
    peer.handshake()
    peer.send(P.GetSnapshot(0))
    offer = _answer(peer, P.Snapshot)
    block = decode(offer.block, Block)
    manifest = decode(offer.manifest, Manifest)
    check_manifest(manifest, REGTEST.network_id, 5, block_hash(block.header), header_state_root(block.header))
    log.info("Every chunk it lists comes in one bounded frame and passes its check")
    for number in range(len(manifest.chunks)):
        peer.send(P.GetChunk(5, number))
        chunk = _answer(peer, P.SnapshotChunk)
        assert len(chunk.data) <= CHUNK_FRAME
        check_chunk(manifest, number, chunk.data)
    log.info("A chunk it does not have, and a node without snapshots: 'none' (empty answers)")
    peer.send(P.GetChunk(5, len(manifest.chunks)))
    assert_equal(_answer(peer, P.SnapshotChunk).data, b"", "a chunk past the last")
    other = FakePeer(plain, source_ip=next_loopback_ip())
    other.handshake()
    other.send(P.GetSnapshot(0))
    assert_equal(_answer(other, P.Snapshot), P.Snapshot(b"", b""), "no snapshots")
    peer.close()
    other.close()


def _trusted(node, height: int) -> str:
    return f"--trusted-checkpoint={height}:{block_hash(_header(node, height)).hex()}"


def test_a_new_node_given_a_trusted_point_starts_from_the_snapshot_and_syncs_on(nodes):
    log.info("Two nodes with snapshots at heights 5 and 10 (tip 12)")
    servers = [nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", "--snapshots"]) for _ in range(2)]
    connect_nodes(servers[1], servers[0])
    servers[0].generate_blocks(blocks=12)
    sync_blocks(servers)
    wait_until(lambda: all(_written(server.data_dir) == [5, 10] for server in servers), timeout=30)
    log.info("A new node with only the trusted point 10 fetches the snapshot from both and syncs on")
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(servers[0], 10)])
    for server in servers:
        connect_nodes(fresh, server)
    servers[0].generate_blocks(blocks=2)
    sync_blocks([*servers, fresh])
    assert_equal(fresh.get_info()["state_root"], servers[0].get_info()["state_root"], "the root at the tip")
    assert "loaded the snapshot of height 10" in fresh.log_tail(200)
    log.info("Blocks below the snapshot were never downloaded")
    assert_equal(fresh.get_info()["history_start"], 10, "where its history starts")
