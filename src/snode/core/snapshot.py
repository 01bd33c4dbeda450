"""A snapshot of the chain state at one height: a manifest and the chunks it lists, without I/O.

A new node loads one instead of replaying every block from genesis (issue #36, DESIGN.md
section 13), and trusts nothing in it that it cannot check against a header it already trusts:

- the manifest names the block (height, hash, timestamp), the coins issued, the header's state
  root, and each chunk's key range, byte size, BLAKE2b-256 and its part of the state's LtHash
  checksum (`core.state_root`). LtHash is additive: the parts sum to the checksum of the whole
  state, and that checksum, without the block's own entries, hashed with the scalars, must be
  the root the trusted header carries (`check_manifest`), before any chunk is fetched;
- a chunk is the entries of consecutive keys, (table, key) in order; on arrival its size and
  hash must be the manifest's, its keys strictly increasing from the range's first to its last,
  each value a canonical record of its table, and its lanes its part (`check_chunk`);
- the block's own entries (its height's obligations quorum and checkpoint slot: drawn from the
  block's hash, so its header cannot commit to them, docs/STATE_ROOT.md) travel in the manifest
  too: the root check takes them out of the sum, the chunk holding them must hold the very same,
  and once the chunks are loaded they must be the ones the block's hash draws from the loaded
  registry (`check_own`), before anything is stored; the next block's root covers them too.

Chunks are ordered by table (`MAP_NAMES`) and then by key bytes (heights as 8 bytes big-endian,
so in height order), so that the ranges of a manifest never overlap and a chunk's place in the
state is its range.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from operator import itemgetter
from typing import Annotated, Any, Final

import immutables
import msgspec

from snode.core.crypto import hash32
from snode.core.encoding import decode, decode_trusted, decoding_trusted, encode
from snode.core.errors import DecodeError, SnodeError
from snode.core.genesis import Consensus
from snode.core.state import MAP_NAMES, ChainState, CheckpointSlot, Quorum, ServiceNode, UtxoEntry, registry_index
from snode.core.state_root import (
    CHECKSUM_BYTES,
    EMPTY,
    Checksum,
    own_entries,
    state_root,
    with_checksum,
    with_entries,
)
from snode.core.transition import height_quorums
from snode.core.types import Amount, Hash32, Height, Timestamp
from snode.core.utxo_set import UtxoSet

SNAPSHOT_FORMAT: Final = 1
"""The layout of manifests and chunks this snoded writes and reads; another is refused by name."""
CHUNK_BYTES: Final = 1024 * 1024
"""Bytes of entries a chunk holds at most (one entry more than fills it is in the next): an
eighth of the peer frame limit, so a chunk's answer is one bounded frame."""
MAX_CHUNKS: Final = 1024
"""Chunks in one manifest: a state of up to 1 GiB of entries (about 10 million outputs)."""
MAX_KEY_BYTES: Final = 64
MAX_VALUE_BYTES: Final = 16 * 1024
"""The largest key and record a chunk may hold (an output key is 36 bytes, a service node with
every contributor under 1 KB): bounds what one row can make the loader keep."""
MAX_ROWS: Final = CHUNK_BYTES // 16
"""Rows in one chunk at most (an output's row is about 90 bytes)."""
CHUNK_FRAME: Final = CHUNK_BYTES + MAX_KEY_BYTES + MAX_VALUE_BYTES + 64
"""Bytes of one encoded chunk at most: CHUNK_BYTES and one last row past it."""
MANIFEST_BYTES: Final = MAX_CHUNKS * (CHECKSUM_BYTES + 2 * MAX_KEY_BYTES + 64) + 2 * MAX_VALUE_BYTES + 1024
"""Bytes of one encoded manifest at most (about 2.3 MiB)."""

TABLE_TYPES: Final[dict[str, type]] = {
    "utxos": UtxoEntry, "service_nodes": ServiceNode, "quorums": Quorum, "checkpoints": CheckpointSlot,
}
_HEIGHT_KEYED: Final = frozenset({"quorums", "checkpoints"})

Key = Annotated[bytes, msgspec.Meta(max_length=MAX_KEY_BYTES)]
Table = Annotated[int, msgspec.Meta(ge=0, lt=len(MAP_NAMES))]
Row = tuple[Table, Key, Annotated[bytes, msgspec.Meta(max_length=MAX_VALUE_BYTES)]]
"""One entry as a chunk holds it: its table (the index of its name in MAP_NAMES), its key's
bytes, and its record's canonical encoding."""


class SnapshotError(SnodeError):
    """A manifest or chunk that fails a check; the reason says which (a peer that sent it is banned)."""


class ChunkInfo(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One chunk as its manifest lists it."""

    first: tuple[Table, Key]
    """(table, key bytes) of its first entry..."""
    last: tuple[Table, Key]
    """...and of its last."""
    size: Annotated[int, msgspec.Meta(ge=1, le=CHUNK_FRAME)]
    """Bytes of its encoding."""
    hash: Hash32
    """BLAKE2b-256 of its encoding."""
    part: Annotated[bytes, msgspec.Meta(min_length=CHECKSUM_BYTES, max_length=CHECKSUM_BYTES)]
    """The LtHash checksum of its entries (`core.state_root.Checksum.to_bytes`)."""


class Manifest(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What a snapshot is: the block it is the state after, and its chunks."""

    format: int
    network_id: int
    height: Height
    block_hash: Hash32
    timestamp: Timestamp
    issued: Amount
    state_root: Hash32
    """The root the block's header carries."""
    own: Annotated[list[Row], msgspec.Meta(max_length=2)]
    """The block's own entries (`state_root.own_entries`), which its root leaves out."""
    chunks: Annotated[list[ChunkInfo], msgspec.Meta(min_length=1, max_length=MAX_CHUNKS)]


class Chunk(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The entries of one chunk, in (table, key) order."""

    rows: Annotated[list[Row], msgspec.Meta(min_length=1, max_length=MAX_ROWS)]


def key_bytes(table: str, key: Any) -> bytes:
    """A key as a chunk holds it: outputs and nodes by their bytes, heights as 8 bytes big-endian."""
    return int(key).to_bytes(8, "big", signed=True) if table in _HEIGHT_KEYED else bytes(key)


def _native_key(table: str, raw: bytes) -> Any:
    if table in _HEIGHT_KEYED:
        if len(raw) != 8:
            raise SnapshotError(f"a {table} key is 8 bytes, not {len(raw)}")
        return int.from_bytes(raw, "big", signed=True)
    return raw


STOP_EVERY: Final = 4096
"""Entries between two looks at a build's stop flag (some 30-60 ms of CPU)."""


class BuildStopped(SnapshotError):
    """A snapshot's build was stopped (its daemon stopping) before it was done: nothing was
    written, and nobody is to blame."""


def _rows(state: ChainState, stopped: Callable[[], bool] | None = None,
          every: int = STOP_EVERY) -> Iterator[tuple[Row, tuple[str, Any, Any]]]:
    """Every entry of `state` in snapshot order, as a row and as (table, key, value);
    BuildStopped within `every` entries of `stopped()` turning true."""
    count = 0
    for index, name in enumerate(MAP_NAMES):
        table = getattr(state, name)
        for key, raw in sorted((key_bytes(name, key), key) for key in table.keys()):
            count += 1
            if stopped is not None and count % every == 0 and stopped():
                raise BuildStopped("the snapshot's build was stopped")
            value = table[raw]
            yield (index, key, encode(value)), (name, raw, value)


def chunk_size(state: ChainState, asked: int, max_chunks: int = MAX_CHUNKS,
               stopped: Callable[[], bool] | None = None, stop_every: int = STOP_EVERY) -> int:
    """The bytes of entries a chunk of `state`'s snapshot holds: `asked` (a network's
    `snapshot_chunk_bytes`), raised as far as CHUNK_BYTES where chunks of `asked` would be more
    than `max_chunks` (regtest asks for 200, so that its tests' few entries make many chunks, and
    a state of a million outputs would need half a million). A pass over the entries' encodings
    where `asked` is below CHUNK_BYTES (about 1 us an entry)."""
    if asked >= CHUNK_BYTES:
        return CHUNK_BYTES
    total = sum(len(row[1]) + len(row[2]) + 8 for row, _ in _rows(state, stopped, stop_every))
    # A chunk closes once it holds `size` bytes, so all but the last hold at least that many.
    return min(CHUNK_BYTES, max(asked, -(-total // max(max_chunks - 1, 1))))


def build(state: ChainState, network_id: int, root: Hash32,
          chunk_bytes: int = CHUNK_BYTES, max_chunks: int = MAX_CHUNKS) -> tuple[Manifest, list[bytes]]:
    """The manifest and the encoded chunks of `state` (`build_into`, the chunks in a list)."""
    chunks: list[bytes] = []
    manifest = build_into(state, network_id, root, chunks.append, chunk_bytes, max_chunks)
    return manifest, chunks


def build_into(state: ChainState, network_id: int, root: Hash32, put: Callable[[bytes], None],
               chunk_bytes: int = CHUNK_BYTES, max_chunks: int = MAX_CHUNKS,
               stopped: Callable[[], bool] | None = None, stop_every: int = STOP_EVERY) -> Manifest:
    """The manifest of `state`, whose tip's header carries `root`, each of its encoded chunks
    handed to `put` in order as it is made (so that a writer holds one chunk, not the whole
    state's), in chunks of `chunk_bytes` or, where more than `max_chunks` of those would be
    needed, of the size that fits them in `max_chunks` (`chunk_size`). O(entries): about 15 us
    an entry, for its lanes. BuildStopped within `stop_every` entries of `stopped()` turning true (after
    the sort of a table's keys, about a second at a million outputs)."""
    chunk_bytes = chunk_size(state, chunk_bytes, max_chunks, stopped, stop_every)
    infos: list[ChunkInfo] = []
    rows: list[Row] = []
    entries: list[tuple[str, Any, Any]] = []
    size = 0

    def close() -> None:
        if len(infos) >= max_chunks:
            raise SnapshotError(f"a state of over {max_chunks} chunks is more than a manifest may list")
        data = encode(Chunk(list(rows)))
        part = with_entries(EMPTY, entries).to_bytes()
        infos.append(ChunkInfo(rows[0][:2], rows[-1][:2], len(data), hash32(data), part))
        put(data)
        rows.clear()
        entries.clear()

    for row, entry in _rows(state, stopped, stop_every):
        rows.append(row)
        entries.append(entry)
        size += len(row[1]) + len(row[2]) + 8
        if size >= chunk_bytes:
            close()
            size = 0
    if rows:
        close()
    own = [(MAP_NAMES.index(name), key_bytes(name, key), encode(value)) for name, key, value in own_entries(state)]
    return Manifest(SNAPSHOT_FORMAT, network_id, state.height, state.tip_hash, state.timestamp, state.issued,
                    root, own, infos)


def _own_entries(manifest: Manifest) -> list[tuple[str, Any, Any]]:
    """The manifest's own entries, decoded; SnapshotError for any but the block's height's
    obligations quorum and checkpoint slot."""
    own = []
    for table, raw, value in manifest.own:
        name = MAP_NAMES[table]
        if name not in _HEIGHT_KEYED or _native_key(name, raw) != manifest.height:
            raise SnapshotError(f"its own entries name {name} key {raw.hex()}, not the {manifest.height} of its block")
        own.append((name, manifest.height, _decoded(name, value)))
    if len({name for name, _, _ in own}) != len(own):
        raise SnapshotError("its own entries name one table twice")
    return own


def _decoded(name: str, value: bytes) -> Any:
    try:
        return decode(value, TABLE_TYPES[name])
    except DecodeError as err:
        raise SnapshotError(f"a {name} entry is {err.reason}") from None


def total(manifest: Manifest) -> Checksum:
    """The sum of the manifest's parts: the checksum of the whole state it describes."""
    checksum = EMPTY
    for info in manifest.chunks:
        part = Checksum.from_bytes(info.part)
        checksum = Checksum(*_added(checksum, part))
    return checksum


_MASK: Final = Checksum.from_bytes(b"\xff" * CHECKSUM_BYTES)
"""Every lane's bits, even and odd: a sum of two checksums masked by it is their lane-wise sum."""


def _added(a: Checksum, b: Checksum) -> tuple[int, int]:
    return (a.even + b.even) & _MASK.even, (a.odd + b.odd) & _MASK.odd


def scalars(manifest: Manifest) -> ChainState:
    """A state with the manifest's scalars and no entries (what `state_root` hashes besides the checksum)."""
    return ChainState(height=manifest.height, tip_hash=manifest.block_hash, timestamp=manifest.timestamp,
                      issued=manifest.issued)


def check_manifest(manifest: Manifest, network_id: int, height: int, block_hash: bytes, root: bytes | None) -> None:
    """SnapshotError unless `manifest` is one of this format and network, of the trusted block
    (`height`, `block_hash`) whose header carries `root`, with ranges in order, and parts that
    sum to that root (the block's own entries taken out). Nothing is fetched before this holds."""
    if manifest.format != SNAPSHOT_FORMAT:
        raise SnapshotError(f"its format is {manifest.format}; this snoded reads snapshot format {SNAPSHOT_FORMAT}")
    if manifest.network_id != network_id:
        raise SnapshotError(f"it is of network {manifest.network_id:#x}, not {network_id:#x}")
    if (manifest.height, manifest.block_hash) != (height, block_hash):
        raise SnapshotError(f"it is the state after block {manifest.height} {manifest.block_hash.hex()}, not "
                            f"the trusted block {height} {block_hash.hex()}")
    if root is None or manifest.state_root != root:
        raise SnapshotError("its state root is not the one the trusted block's header carries")
    previous: tuple[int, bytes] | None = None
    for number, info in enumerate(manifest.chunks):
        if info.first > info.last or (previous is not None and info.first <= previous):
            raise SnapshotError(f"the range of its chunk {number} is out of order")
        previous = info.last
    rooted = with_entries(total(manifest), (), _own_entries(manifest))
    computed = state_root(network_id, scalars(manifest), rooted)
    if computed != root:
        raise SnapshotError(f"its chunks' parts sum to state root {computed.hex()}, not the trusted block's "
                            f"{root.hex()}")


def check_chunk(manifest: Manifest, number: int, data: bytes) -> list[tuple[str, Any, Any]]:
    """The entries of chunk `number` of `manifest` (already checked), as (table, key, value);
    SnapshotError unless `data` is that chunk: its size and hash, its keys in order and in its
    range, each value a canonical record, its lanes its part, its own entries the manifest's."""
    info = manifest.chunks[number]
    if len(data) != info.size or hash32(data) != info.hash:
        raise SnapshotError(f"chunk {number} is not the one its manifest lists (size or hash)")
    try:
        chunk = decode(data, Chunk)
    except DecodeError as err:
        raise SnapshotError(f"chunk {number} is {err.reason}") from None
    if tuple(chunk.rows[0][:2]) != tuple(info.first) or tuple(chunk.rows[-1][:2]) != tuple(info.last):
        raise SnapshotError(f"chunk {number} does not span the range its manifest lists")
    own = {(MAP_NAMES[t], k): v for t, k, v in manifest.own}
    entries: list[tuple[str, Any, Any]] = []
    previous: tuple[int, bytes] | None = None
    for table, raw, value in chunk.rows:
        if previous is not None and (table, raw) <= previous:
            raise SnapshotError(f"chunk {number} has its keys out of order")
        previous = (table, raw)
        name = MAP_NAMES[table]
        if own.get((name, raw), value) != value:
            raise SnapshotError(f"chunk {number} holds another {name} entry of block {manifest.height} than "
                                "its manifest")
        entries.append((name, _native_key(name, raw), _decoded(name, value)))
    if with_entries(EMPTY, entries).to_bytes() != info.part:
        raise SnapshotError(f"chunk {number}'s entries do not sum to its part of the state root")
    return entries


def load(manifest: Manifest, entries: Iterable[tuple[str, Any, Any]]) -> ChainState:
    """The state of a checked manifest from the entries of its checked chunks, in order,
    carrying the manifest's checksum (the parts' sum, which the chunks' checks made its own).
    The entries are consumed as they come: the outputs are packed into the state's `UtxoSet`
    one by one, so an iterator of them (`stored_entries` chunk after chunk) never has a list of a
    million decoded outputs alive at once. SnapshotError when a table's entries are not in one
    run (chunks in (table, key) order hold each table's together)."""
    tables: dict[str, list[tuple[Any, Any]]] = {name: [] for name in MAP_NAMES if name != "utxos"}
    utxos = UtxoSet()
    seen: set[str] = set()
    for name, group in itertools.groupby(entries, key=itemgetter(0)):
        if name in seen:
            raise SnapshotError(f"its {name} entries are not in one run")
        seen.add(name)
        if name == "utxos":
            utxos = UtxoSet((key, value) for _, key, value in group)
        else:
            tables[name].extend((key, value) for _, key, value in group)
    state = ChainState(
        height=manifest.height, tip_hash=manifest.block_hash, timestamp=manifest.timestamp, issued=manifest.issued,
        utxos=utxos, service_nodes=immutables.Map(tables["service_nodes"]),
        quorums=immutables.Map(tables["quorums"]), checkpoints=immutables.Map(tables["checkpoints"]),
    )
    return with_checksum(state, total(manifest))


def check_own(manifest: Manifest, state: ChainState, consensus: Consensus) -> None:
    """SnapshotError unless the manifest's own entries, which no root covers, are the quorum and
    checkpoint slot its block's hash draws from the loaded registry, as the block itself recorded
    them (`core.transition.height_quorums`): else a forged one would be loaded and the honest
    next block refused. `state` is `load`'s, of the checked chunks. O(active nodes)."""
    height = manifest.height
    quorum, slot = height_quorums(registry_index(state), manifest.block_hash, height, consensus)
    drawn: list[tuple[str, Any, Any]] = [("quorums", height, quorum)]
    if slot is not None:
        drawn.append(("checkpoints", height, slot))
    if _own_entries(manifest) != drawn or own_entries(state) != drawn:
        raise SnapshotError(f"its quorum or checkpoint slot of height {height} is not the one block "
                            f"{manifest.block_hash.hex()} draws from its registry")




def stored_entries(manifest: Manifest, number: int, data: bytes) -> list[tuple[str, Any, Any]]:
    """The entries of chunk `number`, stored after `check_chunk` passed on it: its hash must
    still be the manifest's (then its bytes are those checked: canonical, so decoded without
    encoding them again), and its lanes are not summed again. SnapshotError when the hash
    differs (the file changed since)."""
    info = manifest.chunks[number]
    if len(data) != info.size or hash32(data) != info.hash:
        raise SnapshotError(f"stored chunk {number} is not the one its manifest lists")
    chunk = decode_trusted(data, Chunk)
    entries: list[tuple[str, Any, Any]] = []
    for table, rows in itertools.groupby(chunk.rows, key=itemgetter(0)):
        name = MAP_NAMES[table]
        decoder: Callable[[bytes], Any]
        with decoding_trusted(TABLE_TYPES[name]) as decoder:
            entries.extend((name, _native_key(name, raw), decoder(value)) for _, raw, value in rows)
    return entries


def stored_rows(manifest: Manifest, number: int, data: bytes) -> Iterator[tuple[str, Any, bytes]]:
    """The rows of stored chunk `number` as the store writes them: (table, key, the record's
    encoding), that encoding the checked chunk's own (canonical: `check_chunk` decoded it
    strictly). SnapshotError when its hash is not the manifest's any more."""
    info = manifest.chunks[number]
    if len(data) != info.size or hash32(data) != info.hash:
        raise SnapshotError(f"stored chunk {number} is not the one its manifest lists")
    for table, raw, value in decode_trusted(data, Chunk).rows:
        name = MAP_NAMES[table]
        yield name, _native_key(name, raw), value
