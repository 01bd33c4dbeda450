"""Mutated quorumnet messages from a valid CurveZMQ client (issue #15, item 3, quorumnet part): a
registered service-node key (which the ZAP handler admits) sends well-formed votes, templates,
validator signatures and checkpoint votes with one field replaced by a value of another type or
range, or bytes of the encoding flipped. The daemon must not crash, log a traceback or change its
chain. `SNODE_FUZZ_EXAMPLES` sets the count (300 by default in `make test`).
"""

from __future__ import annotations

import os
import time

import msgspec
import pytest
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
from tests.functional.framework import fuzz_settings, assert_equal, narrator, scaled, send_spend, wait_until
from tests.functional.sn_helpers import SOLO, fund_and_unlock

zmq = pytest.importorskip("zmq")
log = narrator(__name__)
EXAMPLES = int(os.environ.get("SNODE_FUZZ_EXAMPLES", "300"))
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.binary(max_size=80),
    st.text(max_size=40), st.lists(st.integers(0, 255), max_size=5), st.just(-1), st.just(2**63 - 1),
)


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    from tests.functional.framework import TestNode
    from zmq.utils import z85

    log.info("A service-node daemon, and a registered key for the client (the ZAP handler admits it)")
    node = TestNode(0, tmp_path_factory.mktemp("qnetfuzz"), extra_args=["--service-node"])
    node.start()
    client_key, operator = key_from_label("qnet fuzz client"), key_from_label("qnet fuzz op")
    fund_and_unlock(node, {operator.public: SOLO + COIN})
    reg = sign_registration(client_key, REGTEST, 0, (Reservation(operator.public, SOLO),),
                            int(time.time()) + REGTEST.registration_validity)
    send_spend(node, operator, [], reg)
    node.generate_blocks(blocks=2)
    server = bytes.fromhex(node.get_service_node_key()["service_node_pubkey"])
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.curve_secretkey = z85.encode(client_key.x25519_secret())
    sock.curve_publickey = z85.encode(x25519_public(client_key.public))
    sock.curve_serverkey = z85.encode(x25519_public(server))
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IMMEDIATE, 1)
    sock.connect(f"tcp://{node.ip}:{REGTEST.quorumnet_port}")
    assert sock.poll(int(scaled(10) * 1000), zmq.POLLOUT), "the CurveZMQ handshake completes"
    tip_before = node.get_height()
    block = bytes.fromhex(node.get_block(height=2)["block_hex"])
    samples = [
        P.QuorumVote(server, 2, 2, 2, client_key.public, bytes(64)),
        BlockTemplate(3, 0, block), ValidatorSignature(3, 0, bytes(32), client_key.public, bytes(64)),
        CheckpointVote(4, bytes(32), client_key.public, bytes(64)),
    ]
    log.info("Send it %d mutated quorumnet messages", EXAMPLES)
    yield node, sock, samples, tip_before
    sock.close(linger=0)
    ctx.term()
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
        node, sock, samples, _ = target
        frames = [data.draw(mutations(samples))]
        if data.draw(st.integers(0, 9)) == 0:
            frames = frames + [b"an extra frame"]  # a message of the wrong shape, now and then
        sock.send_multipart(frames)
    one()
    node, _, _, tip_before = target
    log.info("After the mutated messages: still serving, the same chain, no traceback in its log")
    wait_until(lambda: node.running and node.get_height() == tip_before, timeout=10,
               what="the daemon serving its unchanged chain")
    assert "Traceback" not in node.stderr_text()
    assert "quorumnet: ignored an undecodable message" in node.stderr_text(), "the mutations were read"
    undecodable = node.stderr_text().count("quorumnet: ignored an undecodable message")
    write_figures("quorumnet mutation fuzzing", {"messages": EXAMPLES, "undecodable": undecodable, "crashes": 0,
                                                 "tracebacks": 0, "chain_unchanged": True})
