"""The sans-IO parts of issue #22's defences, one bound at a time: the fair proof queue, the
orphan pool, the address book, the inbound eviction rule, the upload budget's bucket and the
refusal of a frame on its length and its message's tag.
(tests/functional/test_hostile_peers.py runs each attack against a real daemon.)"""

from __future__ import annotations

import os
from typing import get_args

import pytest

from snode.core.blocks import Block, BlockHeader, BlockHeaderV2, Checkpoint
from snode.core.encoding import encode
from snode.core.proofs import ProofRefusal, UptimeProof
from snode.core.snapshot import CHUNK_FRAME, MANIFEST_BYTES
from snode.net import limits as L
from snode.net import protocol as P
from snode.net.addrman import AddressBook, Candidate, choose_eviction, network_group
from snode.net.orphans import OrphanPool
from snode.net.peer import TokenBucket
from snode.params import MAX_BLOCK_BYTES, MAX_TX_BYTES
from snode.services.proof_intake import Arrival, FairQueue


def arrival(peer: object, n: int) -> Arrival:
    proof = UptimeProof(n.to_bytes(32, "big"), n, "127.0.0.1", 1, 1, "0.1.0", bytes(64))
    return Arrival(proof, peer, "peer", relayed=True)


def test_a_flooder_fills_only_its_own_line_and_an_honest_proof_goes_in_the_next_batch() -> None:
    queue, flooder, honest = FairQueue(), object(), object()
    dropped = [queue.add(arrival(flooder, n)) for n in range(L.MAX_QUEUED_PROOFS_PER_PEER + 50)]
    assert sum(d is not None for d in dropped) == 50  # its own excess, nobody else's
    assert queue.add(arrival(honest, 10**6)) is None
    batch = queue.take(8)
    assert any(a.peer is honest for a in batch), "the honest proof waits behind the flood"
    assert [a.seq for a in batch] == sorted(a.seq for a in batch)


def test_a_full_queue_takes_from_the_longest_line() -> None:
    queue = FairQueue()
    peers = [object() for _ in range(L.MAX_QUEUED_PROOFS // L.MAX_QUEUED_PROOFS_PER_PEER)]
    n = 0
    for peer in peers:  # full lines until the whole queue is full
        for _ in range(min(L.MAX_QUEUED_PROOFS_PER_PEER, L.MAX_QUEUED_PROOFS - n)):
            queue.add(arrival(peer, n))
            n += 1
    assert len(queue) == L.MAX_QUEUED_PROOFS
    newcomer = arrival(object(), n + 1)
    dropped = queue.add(newcomer)
    assert dropped is not None and dropped.peer is peers[0], "the newcomer should push out the longest line"
    assert len(queue) == L.MAX_QUEUED_PROOFS
    assert queue.add(arrival(peers[0], n + 2)) is not None, "the longest line grows no further when full"


def block(height: int, size_tag: int = 0) -> Block:
    header = BlockHeader(height=height, prev_hash=os.urandom(32), timestamp=size_tag,
                         tx_root=bytes(32), producer=bytes(32), round=0)
    return Block(header=header, transactions=(), producer_signature=bytes(64))


def test_the_orphan_pool_is_bounded_per_source_and_overall() -> None:
    pool = OrphanPool()
    mib = 1024 * 1024
    kept = [block(i) for i in range(10)]
    for b in kept:
        pool.add(b, mib, "10.0.0.1")
    assert pool.source_bytes("10.0.0.1") <= L.MAX_ORPHAN_BYTES_PER_PEER
    assert pool.pop(kept[-1].header.prev_hash) is kept[-1], "the newest is kept"
    assert pool.pop(kept[0].header.prev_hash) is None, "the oldest of the source made room"
    for source in range(40):
        for i in range(3):
            pool.add(block(i), mib, f"10.0.{source}.1")
    assert pool.bytes <= L.MAX_ORPHAN_BYTES and len(pool) <= L.MAX_ORPHANS


def test_one_source_group_reaches_a_few_buckets_only() -> None:
    book = AddressBook(global_only=True, key=b"k" * 16)
    for i in range(5_000):
        book.add(f"{1 + i % 200}.{i // 200}.3.4:9230", source_ip="8.8.8.8", now=0)
    assert len(book) <= L.NEW_BUCKETS_PER_SOURCE_GROUP * L.ADDRESS_BUCKET_SIZE
    assert not book.add("127.0.0.1:9230", source_ip="8.8.4.4", now=0)
    assert not book.add("10.0.0.1:9230", source_ip="8.8.4.4", now=0)
    assert book.add("9.9.9.9:9230", source_ip="1.1.1.1", now=0)
    book.good("9.9.9.9:9230", now=0)
    for i in range(5_000):
        book.add(f"{1 + i % 200}.{i // 200}.5.6:9230", source_ip="1.1.1.1", now=0)
    assert book.placement("9.9.9.9:9230") is not None, "gossip pushed out an address we shook hands with"
    assert network_group("8.8.8.8") == network_group("8.8.200.1") != network_group("8.9.0.1")


def test_eviction_protects_old_and_useful_peers_and_picks_the_crowd() -> None:
    honest = [Candidate(f"h{i}", f"{20 + i}.1.1.1", connected_at=i, last_block_at=0) for i in range(4)]
    relayer = Candidate("relayer", "30.1.1.1", connected_at=900, last_block_at=1000)
    crowd = [Candidate(f"c{i}", "40.1.1.1" if i % 2 else "50.1.1.1", connected_at=100 + i, last_block_at=0)
             for i in range(27)]
    chosen = choose_eviction(honest + [relayer] + crowd)
    assert chosen in {c.ident for c in crowd}
    assert chosen == max((c for c in crowd if c.ip == "40.1.1.1"), key=lambda c: c.connected_at).ident
    assert choose_eviction(honest) is None, "every peer protected: the newcomer is refused"


def test_an_address_budget_grants_one_answer_then_trickles() -> None:
    bucket = TokenBucket(L.ADDR_RATE, L.ADDR_BURST, 0.0, 0.0)
    assert bucket.take_up_to(0.0, 100) == 0, "nothing unasked"
    bucket.grant(P.MAX_PEER_ADDRESSES)
    assert bucket.take_up_to(0.0, 1_000) == P.MAX_PEER_ADDRESSES
    assert bucket.take_up_to(50.0, 100) == 5, "0.1 a second after that"


def test_the_upload_bucket_goes_into_debt_and_says_how_long_to_wait() -> None:
    bucket = TokenBucket(rate=100.0, burst=1_000.0, tokens=1_000.0, stamp=0.0)
    assert bucket.wait(0.0, 1) == 0.0
    bucket.charge(1_500)
    assert abs(bucket.wait(0.0, 1) - 5.01) < 1e-9
    assert bucket.wait(6.0, 1) == 0.0


def test_a_block_frame_over_the_block_limit_is_refused_before_it_is_read() -> None:
    frame = P.frame(P.NewBlock(b"x" * 3_000_000))
    decoder = P.FrameDecoder()
    with pytest.raises(P.ProtocolViolation, match="the limit is 2000000"):
        decoder.feed(frame[:16])  # its length and its first bytes: nothing more is read
    small = P.frame(P.NewBlock(b"x" * 1_000_000))
    assert len(P.FrameDecoder().feed(small)) == 1


def test_what_follows_a_hello_in_the_same_read_waits_for_the_handshake_s_limit() -> None:
    """A peer sends its first messages once it has our Hello, so they can reach us in one read
    with its own Hello: they are judged by the limit after the handshake, not the Hello's."""
    hello = P.frame(P.Ping(1))
    inv = P.frame(P.ProofInv([(os.urandom(32), 1)] * P.MAX_PROOF_IDS))
    assert len(inv) > 4_096
    decoder = P.FrameDecoder(max_frame=4_096, one_frame=True)
    assert decoder.feed(hello + inv + hello) == [hello[P.HEADER_BYTES:]]
    assert decoder.open_up(P.MAX_FRAME) == [inv[P.HEADER_BYTES:], hello[P.HEADER_BYTES:]]
    assert decoder.feed(hello + hello) == [hello[P.HEADER_BYTES:]] * 2, "many a feed from then on"
    early = P.FrameDecoder(max_frame=4_096, one_frame=True)
    with pytest.raises(P.ProtocolViolation, match="exceeds the 4096-byte limit"):
        early.feed(inv)  # the first frame is the Hello's: its limit holds


def test_a_small_message_is_refused_on_its_tag_before_its_body_is_read() -> None:
    big_ping = (100_000).to_bytes(P.HEADER_BYTES, "big") + b"\x91\x02"  # a Ping's head, 100 KB long
    with pytest.raises(P.ProtocolViolation, match="sent a Ping frame of 100000 bytes; the limit for it is 65536"):
        P.FrameDecoder().feed(big_ping)
    proof = P.frame(P.Proof(UptimeProof(bytes(32), 1, "x" * 45, 1, 1, "0.1.0", bytes(64)), relayed=False))
    oversize = (L.MAX_CONTROL_FRAME + 1).to_bytes(P.HEADER_BYTES, "big") + proof[P.HEADER_BYTES:]
    with pytest.raises(P.ProtocolViolation, match="sent a Proof frame"):
        P.FrameDecoder().feed(oversize[:P.HEADER_BYTES + 2])
    for junk in (b"\xdc\x00", b"\x92\x7f", b"\xff\xff"):  # no canonical message starts so
        with pytest.raises(P.ProtocolViolation, match="unknown message"):
            P.FrameDecoder().feed((L.MAX_CONTROL_FRAME + 1).to_bytes(P.HEADER_BYTES, "big") + junk)
    decoder = P.FrameDecoder()
    assert decoder.feed(big_ping[:P.HEADER_BYTES + 1]) == [], "decided before the tag arrived"


def _largest_tip_header(big: int) -> P.TipHeader:
    """A TipHeader of the largest header (version 2's, with its state root) carrying a checkpoint
    of 64 signers (a bitset's width; the largest checkpoint quorum is 20), and 64 validator
    signatures (its limit)."""
    checkpoint = Checkpoint(big, bytes(32), 2**64 - 1, (bytes(64),) * 64)
    header = BlockHeaderV2(big, bytes(32), big, bytes(32), bytes(32), big, checkpoint, bytes(32))
    return P.TipHeader(header, bytes(64), 2**64 - 1, (bytes(64),) * 64)


def _largest_headers(big: int) -> list[P.Headers]:
    """Headers as a sender makes them (`Node.headers_after`): MAX_HEADERS of a plain version-2
    header, and as many of the largest header as MAX_HEADERS_BYTES holds (the sender stops there,
    not at the count that would decode)."""
    plain = BlockHeaderV2(big, bytes(32), big, bytes(32), bytes(32), big, None, bytes(32))
    largest = _largest_tip_header(big).header
    fit = P.MAX_HEADERS_BYTES // (len(encode(largest)) + 66)
    return [P.Headers([P.SignedHeader(plain, bytes(64))] * P.MAX_HEADERS, big),
            P.Headers([P.SignedHeader(largest, bytes(64))] * fit, big)]


def test_every_message_at_its_largest_fits_its_frame_limit() -> None:
    wide, big = "\U0010ffff", 2**63 - 1  # 4 bytes in UTF-8; the widest integer
    hello = P.Hello(big, bytes(32), big, wide * 64, big, bytes(32), 65_535, big)
    proof = UptimeProof(bytes(32), big, wide * 45, 65_535, 65_535, wide * 32, bytes(64))
    messages: list[P.Message] = [
        hello, P.Ping(big), P.Pong(big), P.Tip(big, bytes(32)),
        P.GetBlocks([bytes(32)] * 64, P.MAX_BLOCKS_PER_BATCH), P.GetPeers(),
        P.Peers([wide * 64] * P.MAX_PEER_ADDRESSES), P.Proof(proof, relayed=True),
        P.ProofRejected(bytes(32), big, max(ProofRefusal), bytes(16)), P.ProofAck(bytes(32), big),
        P.NewBlock(bytes(MAX_BLOCK_BYTES)), P.NewTransaction(bytes(MAX_TX_BYTES)),
        P.NewCheckpoint(bytes(P.MAX_CHECKPOINT)),
        P.Blocks([bytes(P.MAX_BATCH_BYTES // P.MAX_BLOCKS_PER_BATCH)] * P.MAX_BLOCKS_PER_BATCH, big),
        P.ProofInv([(bytes(32), big)] * P.MAX_PROOF_IDS), P.GetProofs([(bytes(32), big)] * P.MAX_PROOF_IDS),
        P.Proofs([proof] * P.MAX_PROOF_IDS), _largest_tip_header(big), P.ForkStatus(bytes(4), big),
        P.GetHeaders([bytes(32)] * 64, P.MAX_HEADERS), *_largest_headers(big),
        P.GetSnapshot(big), P.Snapshot(bytes(MAX_BLOCK_BYTES), bytes(MANIFEST_BYTES)), P.GetChunk(big, 1023),
        P.SnapshotChunk(big, big, bytes(CHUNK_FRAME)),
    ]
    assert {type(m) for m in messages} == set(get_args(P.Message))
    for message in messages:
        frame = P.frame(message)
        assert len(P.FrameDecoder().feed(frame)) == 1, type(message).__name__
