"""Mutated quorumnet messages from a valid CurveZMQ client (issue #15, item 3, quorumnet part): a
registered service-node key (which the ZAP handler admits) sends well-formed votes, templates,
validator signatures and checkpoint votes with one field replaced by a value of another type or
range, or bytes of the encoding flipped. The daemon must not crash, log a traceback or change its
chain. `SNODE_FUZZ_EXAMPLES` sets the count (300 by default in `make test`).
"""

from __future__ import annotations

import os
import time
from typing import Any

import msgspec
import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st

from snode.core.crypto import x25519_public
from snode.core.encoding import encode
from snode.core.finality import CheckpointVote
from snode.core.registration import sign_registration
from snode.core.rounds import BlockTemplate, ValidatorSignature
from snode.core.transactions import Reservation
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.params import COIN, REGTEST
from tests.functional.figures import write_figures
from tests.functional.framework import assert_equal, fuzz_settings, narrator, scaled, send_spend, wait_until
from tests.functional.sn_helpers import SOLO, fund_and_unlock

log = narrator(__name__)
EXAMPLES = int(os.environ.get("SNODE_FUZZ_EXAMPLES", "300"))
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.binary(max_size=80),
    st.text(max_size=40), st.lists(st.integers(0, 255), max_size=5), st.just(-1), st.just(2**63 - 1),
)


KEYS = EXAMPLES // 5 + 2
"""Registered keys the client sends with: junk scores its member, and a member past the threshold
is cut off (`net.quorum_guard`: ten undecodable messages, or one in another key's name), so the
client moves to the next key whenever the daemon stops taking its messages."""


class Members:
    """The client's keys and, for the one in use, a CurveZMQ DEALER the ZAP handler admits."""

    def __init__(self, node, keys, server: bytes) -> None:
        self.node, self.keys, self.server = node, keys, server
        self.ctx = zmq.Context()
        self.index = -1
        self.sock: Any = None
        self.next()

    def next(self) -> None:
        """Move to the next key: a fresh connection, its handshake complete."""
        from zmq.utils import z85

        if self.sock is not None:
            self.sock.close(linger=0)
        self.index += 1
        assert self.index < len(self.keys), f"all {len(self.keys)} keys cut off"
        key = self.keys[self.index]
        sock = self.ctx.socket(zmq.DEALER)
        sock.curve_secretkey = z85.encode(key.x25519_secret())
        sock.curve_publickey = z85.encode(x25519_public(key.public))
        sock.curve_serverkey = z85.encode(x25519_public(self.server))
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.IMMEDIATE, 1)
        sock.connect(f"tcp://{self.node.ip}:{REGTEST.quorumnet_port}")
        assert sock.poll(int(scaled(10) * 1000), zmq.POLLOUT), "the CurveZMQ handshake completes"
        self.sock = sock

    @property
    def key(self):
        return self.keys[self.index]

    def send(self, frames: list[bytes]) -> None:
        """Send with the key in use; once its connection is cut (no pipe takes the message),
        with the next key."""
        try:
            self.sock.send_multipart(frames, zmq.NOBLOCK)
        except zmq.Again:
            self.next()
            self.sock.send_multipart(frames, zmq.NOBLOCK)

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


def samples(server: bytes, voter: bytes, block: bytes) -> list[msgspec.Struct]:
    """A message of each kind, signed (badly) in `voter`'s name."""
    return [
        P.QuorumVote(server, 2, 2, 2, voter, bytes(64)),
        BlockTemplate(3, 0, block), ValidatorSignature(3, 0, bytes(32), voter, bytes(64)),
        CheckpointVote(4, bytes(32), voter, bytes(64)),
    ]


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    from tests.functional.framework import TestNode

    log.info("A service-node daemon, and %d registered keys for the client (the ZAP handler admits them)", KEYS)
    node = TestNode(0, tmp_path_factory.mktemp("qnetfuzz"), extra_args=["--service-node"])
    node.start()
    keys = [key_from_label(f"qnet fuzz client {i}") for i in range(KEYS)]
    operators = [key_from_label(f"qnet fuzz op {i}") for i in range(KEYS)]
    fund_and_unlock(node, {op.public: SOLO + COIN for op in operators})
    expiry = int(time.time()) + REGTEST.registration_validity
    for key, operator in zip(keys, operators):
        send_spend(node, operator, [], sign_registration(key, REGTEST, 0, (Reservation(operator.public, SOLO),),
                                                         expiry))
    node.generate_blocks(blocks=2)
    server = bytes.fromhex(node.get_service_node_key()["service_node_pubkey"])
    members = Members(node, keys, server)
    tip_before = node.get_height()
    block = bytes.fromhex(node.get_block(height=2)["block_hex"])
    log.info("Send it %d mutated quorumnet messages", EXAMPLES)
    yield node, members, block, tip_before
    members.close()
    try:
        assert_equal(node.stop(), 0)
    finally:
        node.kill()


@st.composite
def mutations(draw, samples: list[msgspec.Struct]) -> bytes:
    message = draw(st.sampled_from(samples))
    if draw(st.booleans()):
        name = draw(st.sampled_from(message.__struct_fields__))
        try:
            return encode(msgspec.structs.replace(message, **{name: draw(ODD_VALUES)}))
        except (TypeError, OverflowError, msgspec.EncodeError):
            return encode(message)
    payload = bytearray(encode(message))
    for _ in range(draw(st.integers(1, 4))):
        payload[draw(st.integers(0, len(payload) - 1))] = draw(st.integers(0, 255))
    return bytes(payload[:draw(st.integers(1, len(payload)))])


def test_mutated_quorumnet_messages_never_crash_the_daemon_or_change_its_chain(target):
    """One test, so that the checks after the fuzzing run on the daemon that was fuzzed
    (pytest-xdist may hand two tests of a module to two workers, each with its own daemon)."""
    @fuzz_settings(EXAMPLES)
    @given(data=st.data())
    def one(data):
        node, members, block, _ = target
        frames = [data.draw(mutations(samples(members.server, members.key.public, block)))]
        if data.draw(st.integers(0, 9)) == 0:
            frames = frames + [b"an extra frame"]  # a message of the wrong shape, now and then
        members.send(frames)
    one()
    node, members, _, tip_before = target
    log.info("After the mutated messages: still serving, the same chain, no traceback in its log")
    wait_until(lambda: node.running and node.get_height() == tip_before, timeout=10,
               what="the daemon serving its unchanged chain")
    assert "Traceback" not in node.stderr_text()
    assert "quorumnet: ignored an undecodable message" in node.stderr_text(), "the mutations were read"
    undecodable = node.stderr_text().count("quorumnet: ignored an undecodable message")
    log.info("Members cut off for their junk: %d of the %d keys used", members.index, members.index + 1)
    assert members.index >= 1, "junk never cost a member its connection"
    assert "quorumnet: banned member" in node.stderr_text()
    write_figures("quorumnet mutation fuzzing", {"messages": EXAMPLES, "undecodable_lines": undecodable, "crashes": 0,
                                                 "tracebacks": 0, "chain_unchanged": True,
                                                 "members_cut_off": members.index})
