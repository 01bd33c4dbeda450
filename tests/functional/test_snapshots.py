"""Snapshots with real daemons (issue #36 items 2, 3, 7): a regtest daemon with `--snapshots`
writes a snapshot at each settled multiple of the network's spacing (regtest: 5, two blocks
below the tip), keeps the newest two, whose parts sum to the root their block's header carries;
a new node given only the trusted point fetches one from peers and syncs on from it."""

from __future__ import annotations

from typing import TypeVar

from snode.core.blocks import Block, block_hash, header_state_root
from snode.core.encoding import decode
from snode.core.snapshot import CHUNK_FRAME, Manifest, check_chunk, check_manifest
from snode.net import protocol as P
from snode.params import REGTEST
from snode.store.snapshot import Snapshots
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    narrator,
    next_loopback_ip,
    snode_cli,
    sync_blocks,
    wait_until,
)
from tests.functional.hostile import ban_reasons
from tests.functional.p2p import FakePeer
from tests.functional.snapshot_nodes import V2_AT
from tests.functional.snapshot_nodes import header as _header
from tests.functional.snapshot_nodes import servers as _servers
from tests.functional.snapshot_nodes import trusted as _trusted
from tests.functional.snapshot_nodes import unmet as _unmet
from tests.functional.snapshot_nodes import written as _written

log = narrator(__name__)
T = TypeVar("T")


def _answer(peer: FakePeer, kind: type[T]) -> T:
    """The next message of `kind` the node sends `peer` (the others skipped)."""
    message = peer.receive_until(lambda m: isinstance(m, kind))
    assert isinstance(message, kind)
    return message


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
    log.info("A snapshot answer nobody asked for is misbehaviour: banned")
    other.send(P.SnapshotChunk(5, 0, b"unasked"))
    assert other.closed_by_node()
    assert_equal(ban_reasons(plain)[other.sock.getsockname()[0]], "sent a SnapshotChunk it was not asked for",
                 "the ban's reason")
    peer.close()
    other.close()


def test_a_new_node_given_a_trusted_point_starts_from_the_snapshot_and_syncs_on(nodes):
    log.info("Two nodes with snapshots at heights 5 and 10 (tip 12)")
    servers = [nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", "--snapshots"]) for _ in range(2)]
    connect_nodes(servers[1], servers[0])
    servers[0].generate_blocks(blocks=12)
    sync_blocks(servers)
    wait_until(lambda: all(_written(server.data_dir) == [5, 10] for server in servers), timeout=30)
    log.info("A new node with only the trusted point 10 fetches the snapshot from both and syncs on")
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(servers[0], 10), "--no-backfill", "--snapshots"])
    for server in servers:
        connect_nodes(fresh, server)
    servers[0].generate_blocks(blocks=2)
    sync_blocks([*servers, fresh])
    assert_equal(fresh.get_info()["state_root"], servers[0].get_info()["state_root"], "the root at the tip")
    assert "loaded the snapshot of height 10" in fresh.log_tail(200)
    log.info("It serves the snapshot it started from, its download kept, never written again from its state")
    wait_until(lambda: 10 in _written(fresh.data_dir), timeout=30, what="the download kept as a snapshot")
    assert "serving the snapshot of height 10 this node started from" in fresh.log_tail(200)
    assert "wrote the snapshot of height 10" not in fresh.log_tail(400)
    assert not (fresh.data_dir / "snapshots" / "download").exists()
    wait_until(lambda: "--no-backfill: this node's history starts at the snapshot of height 10" in fresh.log_tail(200))
    log.info("Blocks below the snapshot were never downloaded: RPCs say so in one line, never wrongly")
    assert_equal(fresh.get_info()["history_start"], 10, "where its history starts")
    assert_raises_rpc_error(None, "block 5 is not on this node: it started from the snapshot of height 10 and holds "
                            "no block between genesis and it (not downloaded)", fresh.get_block, height=5)
    assert_equal(fresh.get_block(height=10)["block_hex"], servers[0].get_block(height=10)["block_hex"], "block 10")
    status = snode_cli(fresh, "status").stdout
    assert "history: from height 10 (started from its snapshot" in status, status
    log.info("Restarted, it keeps its history's start and syncs on")
    fresh.stop()
    fresh.start()
    connect_nodes(fresh, servers[0])
    servers[0].generate_blocks(blocks=1)
    sync_blocks([servers[0], fresh])
    assert_equal(fresh.get_info()["history_start"], 10, "where its history starts, after a restart")
    assert "not serving snapshot" not in fresh.log_tail(200), "the kept download checks against its manifest"
    assert 10 in _written(fresh.data_dir)


# --- faults (issue #36 item 7) ---------------------------------------------------------------------

def _download(node) -> dict:
    return node.get_info()["snapshot_download"] or {}


def test_a_peer_serving_an_altered_chunk_is_banned_and_the_sync_finishes_from_the_others(nodes):
    log.info("Three servers; the first serves its chunks with a byte flipped (SNODE_TEST_MISBEHAVE)")
    liar, *honest = _servers(nodes, [{"SNODE_TEST_MISBEHAVE": "alter-snapshot-chunk"}, {}, {}])
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(honest[0], 10)])
    log.info("The new node meets the liar first: its manifest checks, the chunk it sends does not")
    fresh.add_peer(address=f"{liar.ip}:{liar.p2p_port}")
    wait_until(lambda: liar.ip in ban_reasons(fresh), timeout=30)
    assert "is not the one its manifest lists" in ban_reasons(fresh)[liar.ip]
    log.info("It fetches that chunk again from the honest servers (met through the liar, or dialled) and syncs on")
    for server in honest:
        connect_nodes(fresh, server)
    sync_blocks([*honest, fresh])
    assert_equal(fresh.get_info()["state_root"], honest[0].get_info()["state_root"], "the root at the tip")
    assert_equal(_download(fresh)["done"], True, "the download is done")


def test_kill_9_during_the_download_resumes_without_fetching_a_stored_chunk_again(nodes):
    (slow,) = _servers(nodes, [{"SNODE_TEST_MISBEHAVE": "slow-snapshot"}])
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(slow, 10)])
    fresh.add_peer(address=f"{slow.ip}:{slow.p2p_port}")
    log.info("The server answers each chunk 1 s late: the status line and snode-cli status show the download")
    wait_until(lambda: _download(fresh).get("chunks", 0) >= 1, timeout=30)
    info = fresh.get_info()
    assert "snapshot 10: " in info["status_line"] and " chunks, " in info["status_line"], info["status_line"]
    assert "snapshot 10: [" in snode_cli(fresh, "status").stdout
    assert any(u.startswith("downloading the snapshot 10: ") for u in _unmet(fresh)), "/readyz while downloading"
    log.info("The new node is killed after 3 chunks")
    wait_until(lambda: _download(fresh).get("chunks", 0) >= 3, timeout=30)
    fresh.kill()
    stored = len([p for p in (Snapshots(fresh.data_dir).root / "download").iterdir() if p.name.startswith("chunk-")])
    log.info("%d chunks were stored when it died; restarted, it fetches only the others", stored)
    fresh.start()
    fresh.add_peer(address=f"{slow.ip}:{slow.p2p_port}")
    sync_blocks([slow, fresh])
    download = _download(fresh)
    assert_equal(download["fetched_chunks"], download["total_chunks"] - stored, "chunks fetched after the restart")
    assert_equal(_unmet(fresh), [], "/readyz once at the tip")
    assert f"resuming the snapshot download of height 10: {stored} of {download['total_chunks']}" in fresh.log_tail(400)


def test_a_full_disk_stops_the_download_with_one_line_and_it_resumes_with_space(nodes):
    (server,) = _servers(nodes, [{}])
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", _trusted(server, 10)], start=False)
    fresh.start(env={"SNODE_SNAPSHOT_DOWNLOAD_BYTES": "400"})
    fresh.add_peer(address=f"{server.ip}:{server.p2p_port}")
    log.info("Room for 400 bytes of chunks: the download stops, in one WARNING line")
    stopped = "snapshot download stopped: cannot store chunk"
    wait_until(lambda: stopped in fresh.log_tail(400), timeout=30)
    assert "No space left" in fresh.log_tail(400)
    assert_equal(fresh.log_tail(400).count(stopped), 1, "WARNING lines for the full disk")
    assert_equal(fresh.get_info()["height"], 0, "nothing loaded")
    log.info("Restarted with space, it goes on from the chunks it stored")
    fresh.stop()
    fresh.start()
    fresh.add_peer(address=f"{server.ip}:{server.p2p_port}")
    sync_blocks([server, fresh])
    assert_equal(_download(fresh)["done"], True, "the download is done")


def test_a_snapshot_whose_block_is_not_the_trusted_hash_is_refused_whatever_its_signatures(nodes):
    """Refused, named in one WARNING line with both hashes and the flag, and never loaded; the
    sender is not banned (a mistyped flag must not make a node ban the network)."""
    (server,) = _servers(nodes, [{}])
    wrong = block_hash(_header(server, 9)).hex()
    log.info("A trusted point naming height 10 with block 9's hash: the server's block 10 is validly signed, "
             "but not that block")
    fresh = nodes.add(extra_args=[f"--test-fork=v2@{V2_AT}", f"--trusted-checkpoint=10:{wrong}"])
    fresh.add_peer(address=f"{server.ip}:{server.p2p_port}")
    wait_until(lambda: f"not the trusted point's {wrong}" in fresh.stderr_text(), timeout=30)
    assert "check --trusted-checkpoint" in fresh.stderr_text(), "the refusal names the flag to check"
    assert_equal(ban_reasons(fresh), {}, "not banned: the server may be honest and the flag wrong")
    assert_equal((fresh.get_info()["height"], _download(fresh)["chunks"]), (0, 0), "nothing fetched, nothing loaded")


def test_a_snapshot_directory_edited_outside_snoded_is_named_in_one_line_and_never_served(nodes):
    (server,) = _servers(nodes, [{}])
    server.stop()
    path = Snapshots(server.data_dir).paths()[-1]
    chunk = path / "chunk-0001"
    chunk.write_bytes(chunk.read_bytes()[:-1] + b"\x00")
    log.info("Chunk 1 of the snapshot of height 10 edited while the node was stopped")
    server.start()
    line = f"not serving snapshot {path.name}: {path}: chunk 1 is not the one its manifest lists (the directory"
    wait_until(lambda: line in server.log_tail(100), timeout=30)
    log.info("Named in one line; the node writes that snapshot again from its chain, and serves only that")
    wait_until(lambda: server.log_tail(400).count("wrote the snapshot of height 10") == 2, timeout=30)
    peer = FakePeer(server, source_ip=next_loopback_ip())
    peer.handshake()
    peer.send(P.GetSnapshot(10))
    offer = _answer(peer, P.Snapshot)
    manifest = decode(offer.manifest, Manifest)
    header = decode(offer.block, Block).header
    check_manifest(manifest, REGTEST.network_id, 10, block_hash(header), header_state_root(header))
    peer.send(P.GetChunk(10, 1))
    check_chunk(manifest, 1, _answer(peer, P.SnapshotChunk).data)
    peer.close()
