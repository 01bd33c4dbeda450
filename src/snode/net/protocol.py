"""The peer protocol without I/O: message shapes and length-prefixed framing.

A frame is a 4-byte big-endian length followed by the canonical msgpack of one `Message`. The
decoder refuses a frame longer than MAX_FRAME before reading it, or longer than its message may
be (`frame_limit`, read from the message's tag in the frame's first bytes), and any bytes that
are not a known message in canonical form; all are grounds to drop and ban the peer.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from typing import Annotated, Any, Final, TypeAlias, Union, get_args

import msgspec

from snode.common import decode_reasons
from snode.core.blocks import Block, Header
from snode.core.chain import MAX_LOCATOR
from snode.core.encoding import decode, encode
from snode.core.equivocation import EquivocationEvidence
from snode.core.errors import DecodeError
from snode.core.finality import CheckpointVote
from snode.core.proofs import ProofRefusal, UptimeProof
from snode.core.round_messages import BlockTemplate, ValidatorSignature
from snode.core.snapshot import CHUNK_FRAME, MANIFEST_BYTES
from snode.core.types import Hash32, Height, Signature, Timestamp
from snode.net.limits import MAX_CONTROL_FRAME
from snode.params import MAX_BLOCK_BYTES, MAX_TX_BYTES

PROTOCOL_VERSION: Final = 5
"""5: a syncing node far behind first downloads the header chain (`GetHeaders`, answered by one
`Headers`; `HEADERS_VERSION`), and snapshots (issue #36: GetSnapshot, Snapshot, GetChunk and
SnapshotChunk; `SNAPSHOT_VERSION`), each sent only to peers of version 5 or later (an older
peer would ban their sender); an older peer is synced from by blocks alone, as before.
4: right after the handshake each side sends a peer of
version 4 or later its fork identity (`ForkStatus`, EIP-2124: `net.fork_id`), and a node
announces its tip to version-4 peers as a `TipHeader` (the tip's header and signatures, so that
the receiver can check the height it claims), right after the handshake and whenever a batch
moves it; older peers still get `Tip`. 3: a relayed uptime proof is announced by its id
(`ProofInv`) and sent only to a peer that asks for it (`GetProofs`, answered by one `Proofs`); a
node sends these three only to peers of version 3 or later, and still pushes relayed proofs
(`Proof`) to version-2 peers. 2: a proof verdict names the proof it answers (its timestamp) and
carries a `ProofRefusal` code, not text; the version-1 ProofRejected (tag 12, free text) is gone
from the wire."""
MIN_PROTOCOL_VERSION: Final = 2
"""Peers announcing an older version are dropped at the handshake: their verdicts would not decode."""
FORK_ID_VERSION: Final = 4
"""The first version that takes ForkStatus (an older peer would ban its sender: the fork id is
not in Hello, whose canonical decoding refuses fields an older node does not know)."""
PROOF_INV_VERSION: Final = 3
"""The first version that takes ProofInv, GetProofs and Proofs (an older peer bans their sender)."""
TIP_HEADER_VERSION: Final = 4
"""The first version that takes TipHeader (an older peer bans its sender)."""
HEADERS_VERSION: Final = 5
"""The first version that takes GetHeaders and Headers (an older peer bans their sender)."""
MAX_HEADERS: Final = 2_000
"""Headers in one Headers answer (a GetHeaders asks for at most this many)."""
MAX_HEADERS_BYTES: Final = 1024 * 1024
"""Bytes of headers one Headers answer carries at most (the sender stops before it: a header
that carries a checkpoint is larger); its frame limit is this and some room."""
SNAPSHOT_VERSION: Final = 5
"""The first version that takes the snapshot messages (an older peer bans their sender)."""
MAX_PROOF_IDS: Final = 128
"""Proof ids in one ProofInv or GetProofs, and proofs in one Proofs: 128 of the largest uptime
proof (about 430 bytes, its text fields all 4-byte characters) fit MAX_CONTROL_FRAME."""
MAX_FRAME: Final = 8 * 1024 * 1024
"""Bytes in one frame: room for a batch of blocks, far below what could exhaust memory."""
MAX_BLOCKS_PER_BATCH: Final = 500
MAX_BATCH_BYTES: Final = 6 * 1024 * 1024
MAX_PEER_ADDRESSES: Final = 100
MAX_CHECKPOINT: Final = 64 * 1024
HEADER_BYTES: Final = 4
_LENGTH: Final = Struct(">I")
"""A frame's header: its payload's length."""
BLOCK_OVERHEAD: Final = 7
"""Bytes of a NewBlock's payload around the block (the array, the tag, a bin32 header); the same
for a NewTransaction and a NewCheckpoint around theirs."""

Bytes = Annotated[bytes, msgspec.Meta(max_length=MAX_FRAME)]


class Hello(msgspec.Struct, frozen=True, array_like=True, tag=1):
    """First message both ways: who I am, which chain, how far I am."""

    network_id: int
    genesis_hash: Hash32
    version: int
    agent: Annotated[str, msgspec.Meta(max_length=64)]
    height: Height
    top_hash: Hash32
    listen_port: Annotated[int, msgspec.Meta(ge=0, le=65_535)]
    """The port this node accepts peers on (0: none)."""
    nonce: int
    """Random per process: a node that meets its own nonce has dialled itself."""


class Ping(msgspec.Struct, frozen=True, array_like=True, tag=2):
    nonce: int


class Pong(msgspec.Struct, frozen=True, array_like=True, tag=3):
    nonce: int


class Tip(msgspec.Struct, frozen=True, array_like=True, tag=4):
    """The sender's best chain moved."""

    height: Height
    top_hash: Hash32


class TipHeader(msgspec.Struct, frozen=True, array_like=True, tag=19):
    """The sender's best chain moved (version 4): its tip's header and the signatures that
    authorise it, a block without its transactions. The height it claims counts once the
    receiver has checked them (`services.sync_peers.check_tip`); a `Tip` or a `Hello` only
    hints at one."""

    header: Header
    producer_signature: Signature
    validator_bitset: int = 0
    validator_signatures: Annotated[tuple[Signature, ...], msgspec.Meta(max_length=64)] = ()


def tip_header(block: Block) -> TipHeader:
    """A block's TipHeader."""
    return TipHeader(block.header, block.producer_signature, block.validator_bitset, block.validator_signatures)


class GetBlocks(msgspec.Struct, frozen=True, array_like=True, tag=5):
    """Blocks after the first locator hash that is on the receiver's main chain."""

    locator: Annotated[list[Hash32], msgspec.Meta(max_length=MAX_LOCATOR)]
    max_count: Annotated[int, msgspec.Meta(ge=1, le=MAX_BLOCKS_PER_BATCH)]


class Blocks(msgspec.Struct, frozen=True, array_like=True, tag=6):
    """Canonical encodings of consecutive main-chain blocks (may be empty)."""

    blocks: Annotated[list[Bytes], msgspec.Meta(max_length=MAX_BLOCKS_PER_BATCH)]
    height: Height
    """The sender's height when it answered."""


class NewBlock(msgspec.Struct, frozen=True, array_like=True, tag=7):
    block: Bytes


class NewTransaction(msgspec.Struct, frozen=True, array_like=True, tag=8):
    tx: Bytes


class GetPeers(msgspec.Struct, frozen=True, array_like=True, tag=9):
    pass


class Peers(msgspec.Struct, frozen=True, array_like=True, tag=10):
    addresses: Annotated[list[Annotated[str, msgspec.Meta(max_length=64)]], msgspec.Meta(max_length=MAX_PEER_ADDRESSES)]


class Proof(msgspec.Struct, frozen=True, array_like=True, tag=11):
    """An uptime proof, relayed once by each node that accepts it."""

    proof: UptimeProof
    relayed: bool
    """False when the proof comes straight from the node that signed it."""


class ProofRejected(msgspec.Struct, frozen=True, array_like=True, tag=15):
    """Sent back to a proof's own sender, which sent it to us: the receiver refused the proof
    stamped `timestamp`, for `reason` (a code from a closed set: an unknown one does not decode;
    the sender words it itself). Tag 12, protocol version 1's free-text form, is not reused."""

    pubkey: Hash32
    timestamp: int
    reason: ProofRefusal
    seen_ip: Annotated[bytes, msgspec.Meta(max_length=16)] = b""
    """For IP_NOT_THE_CONNECTION: the address the receiver sees the sender connect from, packed
    (4 or 16 bytes; an address, never text), so that the operator learns what to declare."""


class ProofAck(msgspec.Struct, frozen=True, array_like=True, tag=14):
    """Sent back to a proof's own sender, which sent it to us: the receiver accepted the proof
    stamped `timestamp` (so the sender's status shows what the network accepted, not what it
    sent). A verdict on a proof the sender did not send to this peer is misbehaviour."""

    pubkey: Hash32
    timestamp: int


class NewCheckpoint(msgspec.Struct, frozen=True, array_like=True, tag=13):
    """A checkpoint a checkpoint quorum completed, for the leaders of the coming rounds to
    carry (relayed once by every node that finds it valid for its chain)."""

    checkpoint: Annotated[bytes, msgspec.Meta(max_length=MAX_CHECKPOINT)]
    """The canonical encoding of a `blocks.Checkpoint`."""


class SignedHeader(msgspec.Struct, frozen=True, array_like=True):
    """A block's header and its producer's signature: what a header chain is downloaded as."""

    header: Header
    producer_signature: Signature


class GetHeaders(msgspec.Struct, frozen=True, array_like=True, tag=26):
    """Headers of main-chain blocks after the first locator hash on the receiver's main chain
    (version 5): answered by exactly one Headers."""

    locator: Annotated[list[Hash32], msgspec.Meta(max_length=MAX_LOCATOR)]
    max_count: Annotated[int, msgspec.Meta(ge=1, le=MAX_HEADERS)]


class Headers(msgspec.Struct, frozen=True, array_like=True, tag=27):
    """The answer to one GetHeaders: consecutive main-chain headers (possibly none, at most
    MAX_HEADERS and MAX_HEADERS_BYTES of them), and the sender's height when it answered."""

    headers: Annotated[list[SignedHeader], msgspec.Meta(max_length=MAX_HEADERS)]
    height: Height


def signed_header(block: Block) -> SignedHeader:
    return SignedHeader(block.header, block.producer_signature)


ProofId: TypeAlias = tuple[Hash32, Timestamp]
"""An uptime proof as announced: its signer's key and its timestamp (a node accepts one proof per
key and timestamp, so this names it)."""
ProofIds = Annotated[list[ProofId], msgspec.Meta(min_length=1, max_length=MAX_PROOF_IDS)]


class ProofInv(msgspec.Struct, frozen=True, array_like=True, tag=16):
    """Uptime proofs the sender accepted since its last ProofInv to us and does not know us to
    have (version 3): the receiver asks for those it lacks."""

    ids: ProofIds


class GetProofs(msgspec.Struct, frozen=True, array_like=True, tag=17):
    """Send me these announced proofs (version 3): answered by exactly one Proofs, in order."""

    ids: ProofIds


class Proofs(msgspec.Struct, frozen=True, array_like=True, tag=18):
    """The answer to one GetProofs: those of the asked proofs the sender announced to us and still
    has (possibly none); a proof not asked for, or a Proofs with no GetProofs open, is misbehaviour."""

    proofs: Annotated[list[UptimeProof], msgspec.Meta(max_length=MAX_PROOF_IDS)]


class ForkStatus(msgspec.Struct, frozen=True, array_like=True, tag=20):
    """The sender's fork identity (`net.fork_id.ForkId`), sent once right after the handshake
    to a peer of FORK_ID_VERSION or later: a peer on another branch is then dropped, not banned."""

    fork_hash: Annotated[bytes, msgspec.Meta(min_length=4, max_length=4)]
    """The hash of the sender's genesis and the heights of the forks it has passed."""
    next_fork: Height
    """The height of the sender's next scheduled fork; 0: none."""


class GetSnapshot(msgspec.Struct, frozen=True, array_like=True, tag=23):
    """Send me your snapshot of `height` (0: your newest): answered by exactly one Snapshot
    (version 5). One snapshot request at a time per peer, of either kind."""

    height: Height


class Snapshot(msgspec.Struct, frozen=True, array_like=True, tag=24):
    """The answer to one GetSnapshot: the block the snapshot is the state after (whose hash the
    asker checks against its trusted point, and whose header carries the root) and the encoded
    `core.snapshot.Manifest`; both empty when the sender has no such snapshot ("none")."""

    block: Annotated[bytes, msgspec.Meta(max_length=MAX_BLOCK_BYTES)]
    manifest: Annotated[bytes, msgspec.Meta(max_length=MANIFEST_BYTES)]


class GetChunk(msgspec.Struct, frozen=True, array_like=True, tag=25):
    """Send me chunk `number` of your snapshot of `height`: answered by exactly one SnapshotChunk."""

    height: Annotated[int, msgspec.Meta(ge=1)]
    number: Annotated[int, msgspec.Meta(ge=0, lt=1024)]


class SnapshotChunk(msgspec.Struct, frozen=True, array_like=True, tag=28):
    """The answer to one GetChunk: the chunk's bytes, checked by the asker against the manifest
    it holds (`core.snapshot.check_chunk`); empty when the sender has no such chunk ("none")."""

    height: Height
    number: int
    data: Annotated[bytes, msgspec.Meta(max_length=CHUNK_FRAME)]


Message: TypeAlias = Union[
    Hello, Ping, Pong, Tip, GetBlocks, Blocks, NewBlock, NewTransaction, GetPeers, Peers, Proof,
    ProofRejected, NewCheckpoint, ProofAck, ProofInv, GetProofs, Proofs, TipHeader, ForkStatus,
    GetHeaders, Headers,
    GetSnapshot, Snapshot, GetChunk, SnapshotChunk,
]


class QuorumVote(msgspec.Struct, frozen=True, array_like=True, tag=1):
    """Quorumnet: one obligations-quorum member's signed vote for a state change."""

    sn_pubkey: Hash32
    kind: Annotated[int, msgspec.Meta(ge=0, le=255)]
    reason: Annotated[int, msgspec.Meta(ge=0, le=255)]
    quorum_height: Height
    voter: Hash32
    signature: Annotated[bytes, msgspec.Meta(min_length=64, max_length=64)]


QuorumMessage: TypeAlias = Union[QuorumVote, BlockTemplate, ValidatorSignature, CheckpointVote, EquivocationEvidence]
"""What service nodes send each other over quorumnet: obligations votes; a round's template and
its validators' signatures (`core.round_messages`); checkpoint votes (`core.finality`); proofs
of equivocation (`core.equivocation`, tag 5, sent once fork v2 is active)."""


def _tag(kind: type[msgspec.Struct]) -> int:
    tag = kind.__struct_config__.tag
    assert isinstance(tag, int)
    return tag


_NAMES: Final = {_tag(kind): kind.__name__ for kind in get_args(Message)}
_FRAME_LIMITS: Final = {
    _tag(NewBlock): MAX_BLOCK_BYTES + BLOCK_OVERHEAD, _tag(Blocks): MAX_FRAME,
    _tag(NewTransaction): MAX_TX_BYTES + BLOCK_OVERHEAD, _tag(NewCheckpoint): MAX_CHECKPOINT + BLOCK_OVERHEAD,
    _tag(Headers): MAX_HEADERS_BYTES + MAX_CONTROL_FRAME,
    _tag(Snapshot): MAX_BLOCK_BYTES + MANIFEST_BYTES + 2 * BLOCK_OVERHEAD,
    _tag(SnapshotChunk): CHUNK_FRAME + 32,
}
assert max(_FRAME_LIMITS.values()) <= MAX_FRAME
assert min(_FRAME_LIMITS.values()) >= MAX_CONTROL_FRAME  # so FrameDecoder reads a tag only above it


def frame_limit(head: bytes) -> tuple[int, str]:
    """The most bytes a frame whose payload starts with `head` (its first two bytes) may have,
    and the message's name. A canonical message starts with a fixarray and its tag (no message
    has more than 15 fields); a block, a batch of blocks, a transaction and a checkpoint may be
    large, every other message (and bytes that are no message) fits MAX_CONTROL_FRAME."""
    if len(head) == 2 and head[0] & 0xF0 == 0x90 and head[1] in _NAMES:
        return _FRAME_LIMITS.get(head[1], MAX_CONTROL_FRAME), _NAMES[head[1]]
    return MAX_CONTROL_FRAME, "unknown message"


class ProtocolViolation(Exception):
    """The peer broke the protocol; the reason goes into the ban log."""


class HttpRequest(ProtocolViolation):
    """The first bytes of a connection are an HTTP request's: a client (snode-cli, curl, a
    browser) pointed at the P2P port instead of the admin RPC, not a peer; answered in HTTP and
    closed, never scored (a ban of 127.0.0.1 bans every local peer)."""


HTTP_METHODS: Final = frozenset({b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC"})
"""An HTTP request's first four bytes, which this port reads as a frame's length (b"POST" is
1,347,375,956 bytes: over any limit)."""
HTTP_ANSWER: Final = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                      b"this is snoded's P2P port, not its admin RPC: ask the address its --rpc-admin "
                      b"names (snode-cli --rpc HOST:PORT)\n")


def frame(message: Message) -> bytes:
    """One message as a frame."""
    payload = encode(message)
    return len(payload).to_bytes(HEADER_BYTES, "big") + payload


def strict_decoder(kind: Any) -> Callable[[bytes], Any]:
    """`core.encoding.decode` for one Union of messages, with its decoder made once: a Union's
    hash, by which `decode` finds its decoder, is computed anew at each call (about a tenth of
    the reading of a small message). Whatever the fast path refuses goes through `decode`, for
    the same DecodeError with the same reason."""
    fast = msgspec.msgpack.Decoder(kind)

    def strict(data: bytes) -> Any:
        try:
            value = fast.decode(data)
            if encode(value) == data:
                return value
        except decode_reasons.DECODE_FAILURES:
            pass
        return decode(data, kind)

    return strict


_parse_message: Final = strict_decoder(Message)


def parse(payload: bytes) -> Message:
    """One frame's payload as a message; ProtocolViolation if it is not a canonical message."""
    try:
        message: Message = _parse_message(payload)
    except DecodeError as err:
        raise ProtocolViolation(f"undecodable message: {err.reason}") from None
    return message


class FrameDecoder:
    """Feed bytes, take complete payloads. Sans-IO: the caller owns the socket.

    Each payload is copied once, out of the bytes fed (a frame that arrives whole in one read,
    the common case, is sliced out of it; one spread over reads is gathered in a buffer first)."""

    def __init__(self, max_frame: int = MAX_FRAME, *, one_frame: bool = False) -> None:
        self.max_frame = max_frame
        self.one_frame = one_frame
        """Take one frame (a handshake's Hello): the bytes after it, in the same read or later
        ones, stay unread, under no limit yet, until `open_up` sets the limit they are to be
        judged by. A peer sends its first messages as soon as it has our Hello, so they may come
        in one read with its own."""
        self.holding = False
        """The one frame of `one_frame` was taken: what follows waits for `open_up`."""
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """Complete payloads in the bytes so far; ProtocolViolation for an oversized frame."""
        out: list[bytes] = []
        if self.holding or (self._buffer and data):
            self._buffer += data
            if self.holding:
                return out
        if self._buffer:
            with memoryview(self._buffer) as view:
                taken = self._frames(view, out)
            del self._buffer[:taken]
        else:
            taken = self._frames(data, out)
            if taken < len(data):
                self._buffer += memoryview(data)[taken:]
        return out

    def _frames(self, buffer: bytes | memoryview, out: list[bytes]) -> int:
        """Append the complete payloads at the start of `buffer` to `out`, each copied once (a
        slice of bytes is a copy, and `bytes` of it the same object); how many bytes they took."""
        start, end, max_frame = 0, len(buffer), self.max_frame
        while end - start >= HEADER_BYTES:
            size: int = _LENGTH.unpack_from(buffer, start)[0]
            if size > max_frame:
                if self.one_frame and bytes(buffer[start:start + HEADER_BYTES]) in HTTP_METHODS:
                    raise HttpRequest("an HTTP request on the P2P port")
                raise ProtocolViolation(f"frame of {size} bytes exceeds the {max_frame}-byte limit")
            body = start + HEADER_BYTES
            if size > MAX_CONTROL_FRAME:  # no message's limit is lower: the tag decides only above
                if end < body + 2:
                    break  # the message's tag is not here yet
                limit, name = frame_limit(bytes(buffer[body:body + 2]))
                if size > limit:
                    raise _oversize(name, size, limit)
            if end < body + size:
                break
            start = body + size
            out.append(bytes(buffer[body:start]))
            if self.one_frame:
                self.holding = True
                break
        return start

    def open_up(self, max_frame: int) -> list[bytes]:
        """Frames of up to `max_frame` from now on, many a feed; the complete ones held back."""
        self.max_frame, self.one_frame, self.holding = max_frame, False, False
        return self.feed(b"")


def _oversize(name: str, size: int, limit: int) -> ProtocolViolation:
    if name == "NewBlock":
        return ProtocolViolation(f"sent a block of {size - BLOCK_OVERHEAD} bytes; the limit is {MAX_BLOCK_BYTES}")
    return ProtocolViolation(f"sent a {name} frame of {size} bytes; the limit for it is {limit}")
