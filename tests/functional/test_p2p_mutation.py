"""Mutated valid P2P messages against a real daemon (issue #15, item 3, P2P part): hypothesis
takes a well-formed message of every kind the protocol has, replaces one field with a value of
another type or out of its range (or flips bytes of its encoding), and sends it after a real
handshake. The daemon may ban the sender; it must never crash, log a traceback, or change its
chain. Each example speaks from a fresh loopback address, so bans do not mask later examples.
`SNODE_FUZZ_EXAMPLES` sets the count (300 by default in `make test`).
"""

from __future__ import annotations

import os
import socket
import typing

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.core.blocks import Block
from snode.core.encoding import decode, encode
from snode.core.proofs import ProofRefusal
from snode.net import protocol as P
from tests.functional.figures import write_figures
from tests.functional.framework import TestNode, assert_equal, fuzz_settings, narrator, next_loopback_ip
from tests.functional.p2p import FakePeer

log = narrator(__name__)
EXAMPLES = int(os.environ.get("SNODE_FUZZ_EXAMPLES", "300"))

ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.binary(max_size=80),
    st.text(max_size=80), st.lists(st.integers(), max_size=5), st.lists(st.binary(max_size=40), max_size=5),
    st.just(b"\x00" * 32), st.just(2**63 - 1), st.just(-1),
)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    log.info("Start one daemon with a short chain for the whole module")
    node = TestNode(0, tmp_path_factory.mktemp("p2pfuzz"))
    try:
        node.start()
        node.generate_blocks(blocks=5)
        samples = _samples(node)
        tip_before = node.get_height()
        log.info("Send it %d mutated messages of %d kinds", EXAMPLES, len(samples))
        yield node, samples, tip_before
        assert_equal(node.stop(), 0)
    finally:
        node.kill()  # also when the set-up failed: the daemon is stopped by its pid


def _samples(node: TestNode) -> list[P.Message]:
    """One well-formed message of every kind, with this chain's real values."""
    info = node.get_info()
    genesis, top = bytes.fromhex(info["genesis_hash"]), bytes.fromhex(info["top_block_hash"])
    block = bytes.fromhex(node.get_block(height=2)["block_hex"])
    tx = bytes.fromhex(node.get_transaction(txid=node.get_block(height=2)["tx_ids"][0])["tx_hex"])
    peer = FakePeer(node, source_ip=next_loopback_ip())
    hello = peer.hello()
    peer.sock.close()
    samples: list[P.Message] = [
        hello, P.Ping(7), P.Pong(7), P.Tip(5, top), P.GetBlocks([genesis], 10), P.Blocks([block], 5),
        P.NewBlock(block), P.NewTransaction(tx), P.GetPeers(), P.Peers(["127.0.0.1:38090"]),
        P.ProofRejected(bytes(32), 5, ProofRefusal.CLOCK), P.ProofAck(bytes(32), 5), P.NewCheckpoint(b"\x90"),
        P.ProofInv([(bytes(32), 5)]), P.GetProofs([(bytes(32), 5)]), P.Proofs([]),
        P.tip_header(decode(block, Block)), P.ForkStatus(bytes(4), 0),
        P.GetSnapshot(0), P.Snapshot(block, b"\x90"), P.GetChunk(5, 0), P.SnapshotChunk(5, 0, b"\x90"),
        P.GetHeaders([genesis], 10), P.Headers([P.signed_header(decode(block, Block))], 5),
    ]
    kinds = {type(m) for m in samples} | {P.Proof}  # a Proof needs a key: mutated from fields below
    assert kinds >= set(typing.get_args(P.Message)) - {P.Proof}, "a sample of every message kind"
    return samples


@st.composite
def mutations(draw, samples: list[P.Message]) -> bytes:
    message = draw(st.sampled_from(samples))
    fields = message.__struct_fields__
    if fields and draw(st.booleans()):
        name = draw(st.sampled_from(fields))
        try:
            payload = encode(msgspec.structs.replace(message, **{name: draw(ODD_VALUES)}))
        except (TypeError, OverflowError, msgspec.EncodeError):
            payload = encode(message)
    else:
        flipped = bytearray(encode(message))
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(flipped) - 1))
            flipped[at] = draw(st.integers(0, 255))
        payload = bytes(flipped[:draw(st.integers(1, len(flipped)))])
    return len(payload).to_bytes(P.HEADER_BYTES, "big") + payload


def test_mutated_messages_never_crash_the_daemon_or_change_its_chain(target):
    """One test, so that the checks after the fuzzing run on the daemon that was fuzzed
    (pytest-xdist may hand two tests of a module to two workers, each with its own daemon)."""
    @fuzz_settings(EXAMPLES)
    @given(data=st.data())
    def one(data):
        node, samples, _ = target
        frame = data.draw(mutations(samples))
        peer = FakePeer(node, source_ip=next_loopback_ip())
        try:
            peer.handshake()
            peer.send_raw(frame)
            peer.closed_by_node(timeout=0.05)
        except (ConnectionError, socket.timeout, OSError, AssertionError):
            pass  # the daemon may hang up on a hostile peer at any point
        finally:
            peer.sock.close()
        assert node.running, "the daemon died"
    one()
    node, _, tip_before = target
    log.info("After the mutated messages: still serving, the same chain, no traceback in its log")
    assert_equal(node.get_height(), tip_before)
    assert "Traceback" not in node.stderr_text()
    bans = node.get_peers()["bans"]
    log.info("%d senders banned, e.g. %s", len(bans), sorted({b["reason"][:60] for b in bans})[:5])
    assert len(bans) >= EXAMPLES // 10, "the mutations reached the message handlers (some were banned)"
    write_figures("P2P mutation fuzzing", {"messages": EXAMPLES, "crashes": 0, "tracebacks": 0,
                                           "chain_unchanged": True, "senders_banned": len(bans)})
