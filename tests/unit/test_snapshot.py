"""Snapshots (issue #36 item 2): a manifest and chunks of the state at a v2 height, every check
a new node makes before it loads one.

A regtest chain with fork v2 and some outputs and service nodes: its snapshot's parts sum to the
root its tip's header carries, its chunks load back into the very state (with its checksum), and
each altered piece (a manifest part, a chunk's byte, keys out of order or out of range, another
own entry) is refused with its reason before anything is loaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from snode.core import snapshot as S
from snode.core.blocks import block_hash, header_state_root
from snode.core.crypto import hash32
from snode.core.encoding import decode, encode
from snode.core.state import MAP_NAMES
from snode.core.state_root import Checksum, current_checksum, state_checksum, with_entries
from snode.net import protocol as PR
from snode.node.writer import NotOnTip
from snode.params import V2, Fork
from snode.services import snapshot_sync, snapshots
from snode.services.snapshot_sync import SnapshotFetch
from snode.store.snapshot import Download
from tests.unit import chain_ops as P


def v2_chain(fresh_chain, blocks: int = 6):
    """chain_ops' chain (outputs, a pool node, an active node) with fork v2 from its next block."""
    chain = fresh_chain()
    params = chain.params.with_test_forks((Fork(V2, chain.state.height + 1),))
    chain.params, chain.consensus = params, dataclasses.replace(chain.consensus, params=params)
    run = P.Run(chain)
    operations: list[tuple] = [("transfer", 0, 1, 3 * P.COIN), ("register", 2, 2, P.REQUIREMENT, 0, []),
                               ("transfer", 1, 2, P.COIN)]
    for op in operations:
        run.apply(op)
        run.mine(1)
    chain.mine(blocks)
    return chain


def trusted(chain):
    header = chain.blocks[-1].header
    return header.height, block_hash(header), header_state_root(header)


@pytest.fixture
def snap(fresh_chain):
    chain = v2_chain(fresh_chain)
    height, hash_, root = trusted(chain)
    manifest, chunks = S.build(chain.state, chain.params.network_id, root, chunk_bytes=2_000)
    return chain, manifest, chunks


def test_the_parts_sum_to_the_headers_root_and_the_chunks_load_back_into_the_state(snap):
    chain, manifest, chunks = snap
    assert len(chunks) > 3, "small chunks, so that ranges and order are exercised"
    S.check_manifest(manifest, chain.params.network_id, *trusted(chain))
    entries = [entry for number, data in enumerate(chunks) for entry in S.check_chunk(manifest, number, data)]
    state = S.load(manifest, entries)
    assert state == chain.state
    assert current_checksum(state) == state_checksum(chain.state)
    assert [name for name, _, _ in S._own_entries(manifest)] == ["quorums"]


def test_chunks_grow_past_the_asked_size_where_it_would_need_more_than_a_manifest_lists(snap):
    chain, manifest, _ = snap
    root = trusted(chain)[2]
    small, small_chunks = S.build(chain.state, chain.params.network_id, root, chunk_bytes=200)
    grown, grown_chunks = S.build(chain.state, chain.params.network_id, root, chunk_bytes=200, max_chunks=3)
    assert len(small_chunks) > 3
    assert 1 < len(grown_chunks) <= 3
    S.check_manifest(grown, chain.params.network_id, *trusted(chain))
    entries = [entry for number, data in enumerate(grown_chunks) for entry in S.check_chunk(grown, number, data)]
    assert S.load(grown, entries) == chain.state
    assert S.chunk_size(chain.state, 200, max_chunks=100 * len(small_chunks)) == 200, "as asked where it fits"
    assert S.chunk_size(chain.state, S.CHUNK_BYTES + 1) == S.CHUNK_BYTES


def test_a_manifest_whose_parts_do_not_sum_to_the_root_is_refused_before_any_chunk(snap):
    chain, manifest, _ = snap
    part = bytearray(manifest.chunks[1].part)
    part[0] ^= 1
    chunks = list(manifest.chunks)
    chunks[1] = msgspec.structs.replace(chunks[1], part=bytes(part))
    with pytest.raises(S.SnapshotError, match="its chunks' parts sum to state root .*, not the trusted block's"):
        S.check_manifest(msgspec.structs.replace(manifest, chunks=chunks), chain.params.network_id, *trusted(chain))


def test_a_manifest_of_another_block_format_or_root_is_refused_by_name(snap):
    chain, manifest, _ = snap
    height, hash_, root = trusted(chain)
    net = chain.params.network_id
    with pytest.raises(S.SnapshotError, match="not the trusted block"):
        S.check_manifest(manifest, net, height, bytes(32), root)
    with pytest.raises(S.SnapshotError, match="this snoded reads snapshot format 1"):
        S.check_manifest(msgspec.structs.replace(manifest, format=2), net, height, hash_, root)
    with pytest.raises(S.SnapshotError, match="its state root is not the one"):
        S.check_manifest(manifest, net, height, hash_, bytes(32))
    swapped = list(manifest.chunks)
    swapped[0], swapped[1] = swapped[1], swapped[0]
    with pytest.raises(S.SnapshotError, match="the range of its chunk 1 is out of order"):
        S.check_manifest(msgspec.structs.replace(manifest, chunks=swapped), net, height, hash_, root)
    with pytest.raises(S.SnapshotError, match="its state root is not"):
        S.check_manifest(msgspec.structs.replace(manifest, issued=manifest.issued + 1), net, height, hash_, bytes(32))
    with pytest.raises(S.SnapshotError, match="parts sum to state root"):
        S.check_manifest(msgspec.structs.replace(manifest, issued=manifest.issued + 1), net, height, hash_, root)


def _relisted(manifest, number: int, data: bytes):
    """`manifest` listing `data` as chunk `number` (size and hash), as a liar that made both would."""
    chunks = list(manifest.chunks)
    chunks[number] = msgspec.structs.replace(chunks[number], size=len(data), hash=hash32(data))
    return msgspec.structs.replace(manifest, chunks=chunks)


def test_an_altered_chunk_is_refused_on_arrival_with_its_reason(snap):
    _, manifest, chunks = snap
    altered = bytearray(chunks[2])
    altered[-1] ^= 1
    with pytest.raises(S.SnapshotError, match="chunk 2 is not the one its manifest lists"):
        S.check_chunk(manifest, 2, bytes(altered))
    rows = S.decode(chunks[2], S.Chunk).rows
    reordered = encode(S.Chunk([rows[0], rows[2], rows[1], *rows[3:]]))
    with pytest.raises(S.SnapshotError, match="keys out of order"):
        S.check_chunk(_relisted(manifest, 2, reordered), 2, reordered)
    shorter = encode(S.Chunk(rows[:-1]))
    with pytest.raises(S.SnapshotError, match="does not span the range"):
        S.check_chunk(_relisted(manifest, 2, shorter), 2, shorter)
    table, key, value = rows[1]
    changed = encode(S.Chunk([rows[0], (table, key, value[:-1] + bytes([value[-1] ^ 1])), *rows[2:]]))
    with pytest.raises(S.SnapshotError, match="chunk 2"):
        S.check_chunk(_relisted(manifest, 2, changed), 2, changed)


def test_a_chunk_whose_entries_are_not_its_part_is_refused(snap):
    chain, manifest, chunks = snap
    last = len(chunks) - 1
    rows = S.decode(chunks[last], S.Chunk).rows
    own = manifest.own[0]
    index = next(i for i, row in enumerate(rows) if row[:2] == own[:2])
    other = next(v for k, v in chain.state.quorums.items() if k != chain.state.height)
    forged = encode(S.Chunk([*rows[:index], (own[0], own[1], encode(other)), *rows[index + 1:]]))
    with pytest.raises(S.SnapshotError, match="holds another quorums entry of block"):
        S.check_chunk(_relisted(manifest, last, forged), last, forged)
    first_utxo = S.decode(chunks[0], S.Chunk).rows
    dropped = encode(S.Chunk([first_utxo[0], *first_utxo[2:]]))
    with pytest.raises(S.SnapshotError, match="do not sum to its part"):
        S.check_chunk(_relisted(manifest, 0, dropped), 0, dropped)


# --- on disk ---------------------------------------------------------------------------------------

def test_snapshots_are_written_whole_the_newest_two_kept_and_an_edited_one_named(snap, tmp_path):
    from snode.store.snapshot import Snapshots, read_chunk

    _, manifest, chunks = snap
    snapshots = Snapshots(tmp_path)
    (snapshots.root / ".0000000001-00.tmp").mkdir(parents=True)  # what a crash mid-write leaves
    snapshots.clear_unfinished()
    assert list(snapshots.root.iterdir()) == []
    for height in (manifest.height - 2, manifest.height - 1, manifest.height):
        path = snapshots.write(msgspec.structs.replace(manifest, height=height), chunks)
    assert [p.name[:10] for p in snapshots.paths()] == [f"{h:010d}" for h in (manifest.height - 1, manifest.height)]
    assert snapshots.verified(path).height == manifest.height
    assert read_chunk(path, 1) == chunks[1]
    (path / "chunk-0001").write_bytes(chunks[1][:-1] + b"\x00")
    with pytest.raises(S.SnapshotError, match="chunk 1 is not the one its manifest lists"):
        snapshots.verified(path)


def test_a_snapshot_built_into_its_directory_is_the_built_one_and_a_stopped_build_leaves_nothing(snap, tmp_path):
    """`write_built` writes each chunk as `build_into` makes it (a daemon holds one chunk, not
    the state's); a build stopped (the daemon stopping) ends within STOP_EVERY entries and
    leaves no directory behind, served or hidden."""
    from snode.store.snapshot import Snapshots, read_chunk

    chain, manifest, chunks = snap
    root = trusted(chain)[2]
    snapshots = Snapshots(tmp_path)
    held: list[int] = []

    def build(put):
        def put_checked(data: bytes) -> None:
            building = [p for p in snapshots.root.iterdir() if p.name.startswith(".")]
            held.append(len(list(building[0].iterdir())))  # the chunks before this one are on disk already
            put(data)
        return S.build_into(chain.state, chain.params.network_id, root, put_checked, chunk_bytes=2_000)

    written, path = snapshots.write_built(build)
    assert held == list(range(len(chunks))), "each chunk is written as it comes, none held back"
    assert written == manifest and snapshots.verified(path) == manifest
    assert [read_chunk(path, n) for n in range(len(chunks))] == chunks
    looks: list[int] = []

    def stopped() -> bool:
        looks.append(len(looks))
        return len(looks) == 3

    made = S._rows(chain.state, stopped, every=2)
    assert len([next(made) for _ in range(5)]) == 5, "two looks, at entries 2 and 4, say go on"
    with pytest.raises(S.BuildStopped):
        next(made)
    assert len(looks) == 3, "the third look, at entry 6, stops it"
    before = sorted(p.name for p in snapshots.root.iterdir())

    def stopping_build(put):
        put(chunks[0])
        raise S.BuildStopped("the snapshot's build was stopped")

    with pytest.raises(S.BuildStopped):
        snapshots.write_built(stopping_build)
    assert sorted(p.name for p in snapshots.root.iterdir()) == before, "nothing of the stopped build is left"


def test_a_download_keeps_each_stored_chunk_and_drops_one_that_does_not_match(snap, tmp_path):
    from snode.store.snapshot import Download

    _, manifest, chunks = snap
    download = Download(tmp_path)
    assert download.manifest() is None
    download.start(manifest, b"block")
    download.put(0, chunks[0])
    download.put(2, chunks[2])
    (download.path / "chunk-0003").write_bytes(b"half")  # edited, or what an older crash left
    (download.path / "chunk-0001").mkdir()  # never ours: it raised out of every start
    (download.path / "chunk-0001" / "x").write_bytes(b"x")
    again = Download(tmp_path)
    assert again.manifest() == manifest and again.block() == b"block"
    assert again.stored(manifest) == {0, 2}
    assert not (download.path / "chunk-0003").exists() and not (download.path / "chunk-0001").exists()


def test_a_finished_download_becomes_a_served_snapshot_in_one_rename(snap, tmp_path):
    from snode.store.snapshot import Download, Snapshots

    _, manifest, chunks = snap
    download = Download(tmp_path)
    download.start(manifest, b"block")
    for number, data in enumerate(chunks):
        download.put(number, data)
    snapshots = Snapshots(tmp_path)
    path = snapshots.adopt(download, manifest)
    assert snapshots.paths() == [path] and path.name.startswith(f"{manifest.height:010d}-")
    assert snapshots.verified(path) == manifest, "its chunks check against its manifest, as a written one's"
    assert not download.path.exists() and not (path / "block").exists()


# --- the state at a snapshot height, and loading it into a store --------------------------------------

def test_the_state_at_a_height_below_the_tip_is_made_from_undo_records_with_its_root(fresh_chain):
    """What a node writes at a final height: the tip's state with the blocks above taken back,
    its checksum kept, its root the one that block's header carries; a wrong root is refused."""
    from snode.services.snapshots import checked_root, state_at

    chain = v2_chain(fresh_chain, blocks=4)
    undos = {block_hash(b.header): u for b, u in zip(chain.blocks[1:], chain.undos)}

    class Undos:
        """The one store read `state_at` makes: a block's undo record by its hash."""

        def undo_of(self, hash_):
            return undos[hash_]

    store = Undos()
    target = chain.blocks[-3].header
    state = state_at(store, chain.state, target.height)
    assert (state.height, state.tip_hash) == (target.height, block_hash(target))
    root = checked_root(state, chain.params.network_id, header_state_root(target))
    manifest, chunks = S.build(state, chain.params.network_id, root, 2_000)
    S.check_manifest(manifest, chain.params.network_id, target.height, block_hash(target), header_state_root(target))
    with pytest.raises(S.SnapshotError, match=f"the state at height {target.height} has root .*, not its header's"):
        checked_root(state, chain.params.network_id, bytes(32))


def test_a_snapshot_loads_into_a_store_holding_genesis_only(snap, tmp_path):
    from snode.core.state import undo_block
    from snode.store.chain_store import ChainStore

    def genesis_of(chain):
        state = chain.state
        for undo in reversed(chain.undos):
            state = undo_block(state, undo)
        return state

    chain, manifest, chunks = snap
    state = S.load(manifest, [e for n, data in enumerate(chunks) for e in S.check_chunk(manifest, n, data)])
    path = tmp_path / "chain.sqlite3"
    with ChainStore.open(path, genesis_block=chain.blocks[0], genesis_state=genesis_of(chain)) as store:
        assert store.history_start() == 1
        store.adopt_snapshot(chain.blocks[-1], state)
        with pytest.raises(ValueError, match="genesis only"):
            store.adopt_snapshot(chain.blocks[-1], state)
    with ChainStore.open(path, genesis_block=chain.blocks[0], genesis_state=genesis_of(chain)) as store:
        assert store.tip() == (state.height, state.tip_hash)
        assert store.history_start() == state.height
        assert store.load_state() == chain.state
        assert current_checksum(store.load_state()) == state_checksum(chain.state)


def test_a_snapshot_stored_from_its_chunks_rows_is_the_state_its_stored_entries_load(snap, tmp_path):
    """What a new node does with a million outputs: the state loaded from the stored chunks one
    after the other (never a list of every entry), and the store written from their rows as the
    chunks hold them; both the very state of the chain, its checksum included."""
    from snode.core.state import undo_block
    from snode.store.chain_store import ChainStore

    chain, manifest, chunks = snap
    state = S.load(manifest, (e for n, data in enumerate(chunks) for e in S.stored_entries(manifest, n, data)))
    assert state == chain.state and current_checksum(state) == state_checksum(chain.state)
    genesis = chain.state
    for undo in reversed(chain.undos):
        genesis = undo_block(genesis, undo)
    path = tmp_path / "chain.sqlite3"
    with ChainStore.open(path, genesis_block=chain.blocks[0], genesis_state=genesis) as store:
        store.adopt_snapshot(chain.blocks[-1], state,
                             lambda: (row for n, data in enumerate(chunks) for row in S.stored_rows(manifest, n, data)))
    with ChainStore.open(path, genesis_block=chain.blocks[0], genesis_state=genesis) as store:
        assert store.tip() == (state.height, state.tip_hash)
        assert store.load_state() == chain.state
        assert current_checksum(store.load_state()) == state_checksum(chain.state)
    altered = bytearray(chunks[1])
    altered[-1] ^= 1
    with pytest.raises(S.SnapshotError, match="stored chunk 1 is not the one its manifest lists"):
        list(S.stored_rows(manifest, 1, bytes(altered)))
    with pytest.raises(S.SnapshotError, match="its utxos entries are not in one run"):
        S.load(manifest, [*S.check_chunk(manifest, 0, chunks[0]), ("service_nodes", b"x", None),
                          *S.check_chunk(manifest, 0, chunks[0])])


def test_own_entries_the_blocks_hash_did_not_draw_are_refused_after_the_chunks_load(snap):
    """The review's forgery: the root leaves the block's own quorum out, so a manifest of a state
    with another quorum of height h passes every root and chunk check; the quorum its hash draws
    from the loaded registry does not match, and it is refused before anything is stored."""
    chain, manifest, chunks = snap
    S.check_own(manifest, S.load(manifest, [e for n, d in enumerate(chunks) for e in S.check_chunk(manifest, n, d)]),
                chain.consensus)
    height = chain.state.height
    honest = chain.state.quorums[height]
    forged_quorum = msgspec.structs.replace(honest, members=[bytes(32)] + list(honest.members)[1:])
    forged = dataclasses.replace(chain.state, quorums=chain.state.quorums.set(height, forged_quorum), index=None)
    _, _, root = trusted(chain)
    bad, bad_chunks = S.build(forged, chain.params.network_id, root, chunk_bytes=2_000)
    S.check_manifest(bad, chain.params.network_id, *trusted(chain))  # the root cannot tell
    state = S.load(bad, [e for n, d in enumerate(bad_chunks) for e in S.check_chunk(bad, n, d)])
    with pytest.raises(S.SnapshotError, match=f"its quorum or checkpoint slot of height {height} is not the one"):
        S.check_own(bad, state, chain.consensus)


# --- the download (services.snapshot_sync) against fake peers ---------------------------------

class _Peer:
    """A peer that answers each request with `serve(message)` (None: never answers)."""

    def __init__(self, name: str, serve) -> None:
        self.name, self.serve = name, serve
        self.hello = SimpleNamespace(version=PR.SNAPSHOT_VERSION)
        self.sent: list = []
        self.closed = False
        self.fetch: Any = None

    def send(self, message) -> None:
        self.sent.append(message)
        answer = self.serve(message)
        if answer is not None:
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.fetch.on_answer(self, answer)))

    def close(self) -> None:
        self.closed = True


class _Peers:
    def __init__(self, peers) -> None:
        self.peers = list(peers)
        self.scored: dict[str, str] = {}

    def misbehaving(self, peer, points, reason) -> None:
        self.scored[peer.name] = reason
        self.peers.remove(peer)  # banned: disconnected


class _Writer:
    def __init__(self, node) -> None:
        self.node, self.adopted = node, None

    async def adopt_snapshot(self, block, state, rows=None) -> None:
        if self.node.height != 0:
            raise NotOnTip(f"this node's chain is at block {self.node.height}, not at genesis")
        self.adopted, self.block = state, block
        self.rows = list(rows()) if rows is not None else None


def _server(chain, manifest, chunks):
    """What a peer with this manifest and these chunks answers."""
    block = encode(chain.blocks[-1])

    def serve(message):
        if isinstance(message, PR.GetSnapshot):
            return PR.Snapshot(block, encode(manifest))
        return PR.SnapshotChunk(message.height, message.number, chunks[message.number])
    return serve


def _fetch(chain, tmp_path, peers, *, height: int = 0, **timing: float):
    node = SimpleNamespace(params=chain.params, consensus=chain.consensus, height=height)
    writer = _Writer(node)
    manager = _Peers(peers)
    fetch = SnapshotFetch(node, writer, manager, tmp_path, trusted(chain)[:2], **timing)  # type: ignore[arg-type]
    for peer in peers:
        peer.fetch = fetch
    return fetch, writer, manager


def _chunk_asks(peer) -> int:
    return sum(isinstance(m, PR.GetChunk) for m in peer.sent)


def test_a_forged_own_quorum_is_refused_its_sender_banned_and_the_honest_snapshot_loaded(snap, tmp_path):
    chain, manifest, chunks = snap
    height = chain.state.height
    honest = chain.state.quorums[height]
    forged = dataclasses.replace(chain.state, index=None, quorums=chain.state.quorums.set(
        height, msgspec.structs.replace(honest, members=[bytes(32)] + list(honest.members)[1:])))
    bad, bad_chunks = S.build(forged, chain.params.network_id, trusted(chain)[2], chunk_bytes=2_000)
    liar, good = _Peer("liar", _server(chain, bad, bad_chunks)), _Peer("good", _server(chain, manifest, chunks))
    fetch, writer, peers = _fetch(chain, tmp_path, [liar, good])
    asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert "its quorum or checkpoint slot of height" in peers.scored.pop("liar")
    assert peers.scored == {}, "the honest peer, which offered another manifest, is never scored"
    assert writer.adopted == chain.state
    entries = sum(len(getattr(chain.state, name)) for name in ("utxos", "service_nodes", "quorums", "checkpoints"))
    assert writer.rows is not None and len(writer.rows) == entries, "the store is written from the chunks' rows"


def test_chunks_are_asked_only_of_peers_that_offered_the_same_manifest(snap, tmp_path):
    """Another valid manifest of the same block (other chunk sizes) is not this one's: a peer
    offering it is left alone, never asked for this one's chunks (it would fail them) or scored."""
    chain, manifest, chunks = snap
    other, other_chunks = S.build(chain.state, chain.params.network_id, trusted(chain)[2], chunk_bytes=3_000)
    first, same, different = (_Peer("first", _server(chain, manifest, chunks)),
                              _Peer("same", _server(chain, manifest, chunks)),
                              _Peer("different", _server(chain, other, other_chunks)))
    fetch, writer, peers = _fetch(chain, tmp_path, [first, different, same])
    asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert peers.scored == {}
    assert _chunk_asks(different) == 0 and _chunk_asks(first) + _chunk_asks(same) == len(chunks)
    assert _chunk_asks(same) > 0, "a peer with the same manifest shares the chunks"
    assert writer.adopted == chain.state


def test_a_peer_that_times_out_is_closed_so_its_late_answer_cannot_ban_it(snap, tmp_path):
    chain, manifest, chunks = snap
    slow, good = _Peer("slow", lambda message: None), _Peer("good", _server(chain, manifest, chunks))
    fetch, writer, peers = _fetch(chain, tmp_path, [slow, good], request_timeout=0.2)
    asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert slow.closed and peers.scored == {}
    assert writer.adopted == chain.state


def test_a_chain_past_genesis_stops_the_download_in_one_line(snap, tmp_path):
    chain, manifest, chunks = snap
    fetch, writer, _ = _fetch(chain, tmp_path, [_Peer("good", _server(chain, manifest, chunks))], height=1)
    with pytest.raises(S.SnapshotError, match="this node's chain is at block 1, not at genesis, so no snapshot"):
        asyncio.run(fetch.run())
    writer.node.height = 0

    async def relayed_block_meanwhile():
        original = fetch._fetched

        async def fetched(m):
            state = await original(m)
            writer.node.height = 1  # a relayed block 1 was adopted during the download
            return state
        fetch._fetched = fetched
        await fetch.run()
    with pytest.raises(S.SnapshotError, match="at block 1, not at genesis, so it is not loaded"):
        asyncio.run(relayed_block_meanwhile())
    assert writer.adopted is None


def test_an_offered_block_of_another_hash_is_refused_on_its_header_before_the_rest_is_decoded(snap, tmp_path, caplog):
    chain, manifest, chunks = snap
    other = chain.blocks[-2]
    undecodable = msgspec.msgpack.encode([msgspec.Raw(encode(other.header)), 5, other.producer_signature])
    liar = _Peer("liar", lambda m: PR.Snapshot(undecodable, encode(manifest)) if isinstance(m, PR.GetSnapshot)
                 else None)
    good = _Peer("good", _server(chain, manifest, chunks))
    fetch, writer, peers = _fetch(chain, tmp_path, [liar, good])
    with caplog.at_level(logging.WARNING, logger=snapshot_sync.__name__):
        asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert "liar" not in peers.scored, "another chain's block is refused, not scored: the flag may be wrong"
    assert "not the trusted point's" in caplog.text and "check --trusted-checkpoint" in caplog.text
    assert writer.adopted == chain.state


def test_no_snapshot_falls_due_below_the_height_a_node_started_from_a_snapshot_at(fresh_chain):
    """A node started from the snapshot of height 50 holds no undo records below it: the first
    snapshot it writes is of 50 or above, never of 40 (its WARNING "no undo record" every block)."""
    chain = fresh_chain()
    params = dataclasses.replace(chain.params.with_test_forks((Fork(V2, 1),)), snapshot_interval=10,
                                 snapshot_depth=5)

    def node(height: int, history_start: int) -> Any:  # the fields due_height reads
        return SimpleNamespace(params=params, immutable_height=0, height=height, history_start=history_start)

    assert snapshots.due_height(node(47, 1), 0) == 40
    assert snapshots.due_height(node(47, 50), 0) is None
    assert snapshots.due_height(node(57, 50), 0) == 50
    assert snapshots.due_height(node(57, 50), 50) is None
    assert snapshots.due_height(node(67, 50), 50) == 60


def test_a_snapshot_write_cancelled_by_a_stopping_daemon_stops_its_build_thread(fresh_chain, tmp_path):
    """The daemon stopping cancels `SnapshotMaker.write`; its build thread, which asyncio cannot
    cancel and the loop's shutdown waits for, is told to stop (a build of a million outputs takes
    some 40 s: a SIGTERM was not obeyed in 20 s)."""

    from snode.common.events import EventHub

    chain = fresh_chain()
    seen = threading.Event()
    told: list[bool] = []

    class Maker(snapshots.SnapshotMaker):
        def _build_and_write(self, state, network_id, carried, stop):
            seen.set()
            told.append(stop.wait(10))  # a build looking at its flag
            raise S.BuildStopped("the snapshot's build was stopped")

    class Writer:
        async def call(self, function, *args):
            return chain.state if function is snapshots.state_at else chain.blocks[-1]

    node = SimpleNamespace(params=chain.params, hub=EventHub(), state=chain.state, block_by_hash=None)

    async def main() -> None:
        maker = Maker(node, Writer(), tmp_path)  # type: ignore[arg-type]
        task = asyncio.ensure_future(maker.write(chain.state.height))
        await asyncio.to_thread(seen.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    started = asyncio.get_event_loop_policy().new_event_loop()
    try:
        started.run_until_complete(main())
        started.run_until_complete(started.shutdown_default_executor())  # what asyncio.run's end waits for
    finally:
        started.close()
    assert told == [True], "the build thread was told to stop, so the loop's shutdown did not wait for it"


def test_the_makers_build_looks_at_its_stop_flag_and_leaves_nothing(snap, tmp_path):
    """The real `SnapshotMaker._build_and_write`, its flag set: BuildStopped within its
    `stop_every` entries, and no snapshot directory, served or hidden."""
    from snode.common.events import EventHub

    chain, _, _ = snap
    maker = snapshots.SnapshotMaker(SimpleNamespace(params=chain.params, hub=EventHub()), None, tmp_path)  # type: ignore[arg-type]
    maker.stop_every = 2
    stop = threading.Event()
    stop.set()
    with pytest.raises(S.BuildStopped):
        maker._build_and_write(chain.state, chain.params.network_id, trusted(chain)[2], stop)
    assert list(maker.snapshots.root.iterdir()) == []
    stop.clear()
    manifest, path = maker._build_and_write(chain.state, chain.params.network_id, trusted(chain)[2], stop)
    assert maker.snapshots.paths() == [path] and maker.snapshots.verified(path) == manifest


# --- hostile offers (a fresh-eyes review of the download, 2026-12-03) --------------------------

FAST_RETRY_S, FAST_STALE_S = 0.05, 0.3
"""The download's waits, small: a test's fetch is done within seconds."""


def _entries(data: bytes) -> list[tuple[str, Any, Any]]:
    rows = decode(data, S.Chunk).rows
    return [(MAP_NAMES[t], S._native_key(MAP_NAMES[t], k), S._decoded(MAP_NAMES[t], v)) for t, k, v in rows]


def _poisoned(manifest, chunks):
    """The honest manifest with chunk 0's first output made richer (its hash and part made
    anew) and the last part moved by the difference, so that the parts still sum to the trusted
    root: `check_manifest` passes it, and only the last chunk's check finds it out."""
    (table, key, raw), *rest = decode(chunks[0], S.Chunk).rows
    assert MAP_NAMES[table] == "utxos", "the first entry of a state is an output"
    output: Any = decode(raw, S.TABLE_TYPES["utxos"])
    richer = encode(msgspec.structs.replace(output, amount=output.amount + 10**15))
    forged0 = encode(S.Chunk([(table, key, richer), *rest]))
    part0 = with_entries(Checksum(), _entries(forged0)).to_bytes()
    last = with_entries(Checksum.from_bytes(manifest.chunks[-1].part), _entries(chunks[0]), _entries(forged0))
    infos = list(manifest.chunks)
    infos[0] = msgspec.structs.replace(infos[0], size=len(forged0), hash=hash32(forged0), part=part0)
    infos[-1] = msgspec.structs.replace(infos[-1], part=last.to_bytes())
    return msgspec.structs.replace(manifest, chunks=infos), [forged0, *chunks[1:]]


def test_a_forged_manifest_whose_parts_sum_to_the_root_is_dropped_and_the_honest_one_loaded(snap, tmp_path):
    chain, manifest, chunks = snap
    bad, bad_chunks = _poisoned(manifest, chunks)
    S.check_manifest(bad, chain.params.network_id, *trusted(chain))  # the parts sum to the root
    liar = _Peer("liar", _server(chain, bad, bad_chunks))
    good = [_Peer(f"good{i}", _server(chain, manifest, chunks)) for i in (1, 2)]
    fetch, writer, peers = _fetch(chain, tmp_path, [liar, *good], retry_s=FAST_RETRY_S, stale_s=FAST_STALE_S)
    asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert "do not sum to its part" in peers.scored.pop("liar"), "the chunk that finds the forgery bans its sender"
    assert peers.scored == {}
    assert writer.adopted == chain.state, "the manifest no peer offers any more was dropped for the honest one"


def test_a_restart_that_resumes_a_manifest_no_peer_offers_drops_it_and_fetches_the_offered_one(snap, tmp_path):
    chain, manifest, chunks = snap
    bad, bad_chunks = _poisoned(manifest, chunks)
    stored = Download(tmp_path)
    stored.start(bad, encode(chain.blocks[-1]))
    stored.put(0, bad_chunks[0])  # what a run killed after the liar's first chunk left
    good = _Peer("good", _server(chain, manifest, chunks))
    fetch, writer, peers = _fetch(chain, tmp_path, [good], retry_s=FAST_RETRY_S, stale_s=FAST_STALE_S)
    asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert peers.scored == {} and writer.adopted == chain.state


def test_an_offered_block_whose_body_is_not_its_headers_bans_its_sender(snap, tmp_path):
    """The block's hash covers its header: the trusted header with another body (no producer
    signature, no transactions) is the trusted hash, and must still be refused."""
    chain, manifest, chunks = snap
    block = chain.blocks[-1]
    for forged, reason in ((msgspec.structs.replace(block, producer_signature=bytes(64)), "bad producer signature"),
                           (msgspec.structs.replace(block, transactions=()), "transaction root does not match")):
        liar = _Peer("liar", lambda m, forged=forged: PR.Snapshot(encode(forged), encode(manifest))
                     if isinstance(m, PR.GetSnapshot) else None)
        fetch, writer, peers = _fetch(chain, tmp_path / reason, [liar, _Peer("good", _server(chain, manifest, chunks))])
        asyncio.run(asyncio.wait_for(fetch.run(), 30))
        assert reason in peers.scored.pop("liar") and peers.scored == {}
        assert encode(writer.block) == encode(block), "the tip stored is the trusted block as it is"


def test_a_manifest_of_another_format_is_left_not_scored(snap, tmp_path, caplog):
    chain, manifest, chunks = snap
    newer = encode(msgspec.structs.replace(manifest, format=S.SNAPSHOT_FORMAT + 1))
    upgraded = _Peer("upgraded", lambda m: PR.Snapshot(encode(chain.blocks[-1]), newer)
                     if isinstance(m, PR.GetSnapshot) else None)
    fetch, writer, peers = _fetch(chain, tmp_path, [upgraded, _Peer("good", _server(chain, manifest, chunks))])
    with caplog.at_level(logging.WARNING, logger=snapshot_sync.__name__):
        asyncio.run(asyncio.wait_for(fetch.run(), 30))
    assert peers.scored == {}, "a newer release's snapshot is not misbehaviour"
    assert f"its format is {S.SNAPSHOT_FORMAT + 1}; this snoded reads snapshot format" in caplog.text
    assert writer.adopted == chain.state


def test_a_stored_download_whose_block_is_damaged_or_another_is_discarded_and_fetched_again(snap, tmp_path, caplog):
    chain, manifest, chunks = snap
    for name, data in (("garbage", b"\x93garbage"), ("another", encode(chain.blocks[-2]))):
        stored = Download(tmp_path / name)
        stored.start(manifest, encode(chain.blocks[-1]))
        (stored.path / "block").write_bytes(data)
        fetch, writer, peers = _fetch(chain, tmp_path / name, [_Peer("good", _server(chain, manifest, chunks))])
        with caplog.at_level(logging.WARNING, logger=snapshot_sync.__name__):
            asyncio.run(asyncio.wait_for(fetch.run(), 30))
        assert "the stored snapshot download's block" in caplog.text and str(stored.path / "block") in caplog.text
        assert encode(writer.block) == encode(chain.blocks[-1]) and writer.adopted == chain.state
        caplog.clear()


def test_what_is_kept_of_peers_offering_another_chain_goes_with_them(snap, tmp_path):
    chain, manifest, chunks = snap
    other = chain.blocks[-2]
    strangers = [_Peer(f"stranger{i}", lambda m: PR.Snapshot(encode(other), encode(manifest))) for i in range(50)]
    fetch, writer, peers = _fetch(chain, tmp_path, strangers, retry_s=FAST_RETRY_S, stale_s=FAST_STALE_S)

    async def scenario() -> None:
        task = asyncio.create_task(fetch.run())
        while len(fetch._elsewhere) < len(strangers):
            await asyncio.sleep(0.01)
        peers.peers.clear()  # they go (and would come back as new connections)
        while fetch._elsewhere or fetch._offers:  # the fetch's next look (retry_s) forgets them
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    asyncio.run(asyncio.wait_for(scenario(), 30))
    assert (fetch._offers, fetch._elsewhere, fetch._trusted_offers, fetch._left) == ({}, {}, {}, set())
    assert peers.scored == {}


def test_a_network_group_pulls_a_few_whole_snapshots_a_day_then_hears_none(snap, tmp_path):
    """One stranger re-asking the same snapshot must not keep our disk and the whole snapshot
    upload budget busy: its network group gets SNAPSHOT_PULLS_PER_DAY whole snapshots a window,
    then "none" (it fetches elsewhere); another group, or the next window, is served."""
    from snode.net.limits import SNAPSHOT_PULLS_PER_DAY, SNAPSHOT_QUOTA_WINDOW_S
    from snode.net.peer import TokenBucket

    chain, manifest, chunks = snap
    now = [1_000.0]

    async def chunk(height, number):
        return chunks[number]

    async def drained():
        return None

    maker = SimpleNamespace(offer=lambda height: (manifest, tmp_path), chunk=chunk)
    server = snapshots.SnapshotServer(SimpleNamespace(on=lambda kind, handler: None), None, maker,  # type: ignore[arg-type]
                                      clock=lambda: now[0])

    def peer(ip):
        sent: list = []
        return SimpleNamespace(ip=ip, name=ip, sent=sent, send=sent.append, clock=lambda: now[0],
                               limits=SimpleNamespace(upload_drain_timeout=1.0), writer=SimpleNamespace(drain=drained),
                               upload=TokenBucket(1e12, 1e12, 1e12, now[0]))

    def pull_all(p) -> list[bytes]:
        async def ask():
            for number in range(len(chunks)):
                await server._on_get_chunk(p, PR.GetChunk(manifest.height, number))
        p.sent.clear()
        asyncio.run(ask())
        return [m.data for m in p.sent]

    stranger, neighbour, elsewhere = peer("8.8.4.4"), peer("8.8.8.8"), peer("9.9.9.9")  # global: a /16 each
    for _ in range(SNAPSHOT_PULLS_PER_DAY):
        assert pull_all(stranger) == chunks
    assert pull_all(stranger) == [b""] * len(chunks), "past its quota: none"
    assert pull_all(neighbour) == [b""] * len(chunks), "the quota is its /16's, not one address's"
    assert pull_all(elsewhere) == chunks, "another group is served"
    now[0] += SNAPSHOT_QUOTA_WINDOW_S
    assert pull_all(stranger) == chunks, "the next window"
