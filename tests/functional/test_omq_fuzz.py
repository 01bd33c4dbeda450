"""Hostile input on the public OMQ port (issue #15, item 3): hypothesis builds requests from the
port's methods and the admin API's parameter names (docs/openrpc.json) with values of every JSON
type, garbage method frames, wrong frame counts and non-JSON bodies, and sends them over
CurveZMQ from many client addresses (so that the per-IP rate limit answers few of them with
429). No request may get status 500, the daemon must keep serving its unchanged chain, and its
log must hold no traceback. `SNODE_FUZZ_EXAMPLES` sets the count (300 in `make test`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import zmq
from hypothesis import given
from hypothesis import strategies as st

from snode.rpc.omq_public import PUBLIC_METHODS
from tests.functional.figures import write_figures
from tests.functional.framework import TestNode, assert_equal, fuzz_settings, narrator, next_loopback_ip, scaled

log = narrator(__name__)
EXAMPLES = int(os.environ.get("SNODE_FUZZ_EXAMPLES", "300"))
CLIENTS = 40
OPENRPC = Path(__file__).resolve().parents[2] / "docs" / "openrpc.json"
STATUSES: dict[str, int] = {}


def _param_names() -> list[str]:
    doc = json.loads(OPENRPC.read_text())
    return sorted({p["name"] for m in doc["methods"] for p in m.get("params", [])})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False) | st.text(max_size=80)
    | st.sampled_from(["00" * 32, "ff" * 32, "zz", "", "-1"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
methods = st.sampled_from(sorted(PUBLIC_METHODS) + ["stop_daemon", "generate_blocks", "get_peers"]).map(str.encode) \
    | st.binary(max_size=40)
bodies = (
    st.dictionaries(st.sampled_from(_param_names()), json_values, max_size=4).map(lambda d: json.dumps(d).encode())
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=200)
    | st.just(b"")
)
requests = st.one_of(
    st.tuples(methods, bodies).map(list),
    st.tuples(methods).map(list),
    st.lists(st.binary(max_size=30), min_size=3, max_size=5),
)


class Clients:
    """CurveZMQ DEALERs with fresh keys, each from its own loopback source address."""

    def __init__(self, node: TestNode, server_key: bytes) -> None:
        from zmq.utils import z85

        self.ctx = zmq.Context()
        self.endpoint = f"{node.ip}:38093"
        self.server_key = z85.encode(server_key)
        self.socks = [self._connect() for _ in range(CLIENTS)]
        self.turn = 0

    def _connect(self) -> Any:
        sock = self.ctx.socket(zmq.DEALER)
        sock.curve_publickey, sock.curve_secretkey = zmq.curve_keypair()
        sock.curve_serverkey = self.server_key
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(f"tcp://{next_loopback_ip()}:0;{self.endpoint}")
        return sock

    def ask(self, frames: list[bytes]) -> str | None:
        """Send on the next client; the reply's status, or None (no reply: that client is
        replaced, so that a late reply is never read as the next one's)."""
        self.turn = (self.turn + 1) % CLIENTS
        sock = self.socks[self.turn]
        sock.send_multipart(frames)
        if not sock.poll(int(scaled(5) * 1000)):
            sock.close(linger=0)
            self.socks[self.turn] = self._connect()
            return None
        reply = sock.recv_multipart()
        return reply[0].decode()

    def close(self) -> None:
        for sock in self.socks:
            sock.close(linger=0)
        self.ctx.term()


@pytest.fixture(scope="module")
def omq_target(tmp_path_factory):
    log.info("Start one service node with a public OMQ port for the whole module")
    node = TestNode(0, tmp_path_factory.mktemp("omqfuzz"), extra_args=["--service-node"])
    node.extra_args.append(f"--omq-public={node.ip}:38093")
    node.start()
    node.generate_blocks(blocks=2)
    tip = node.get_height()
    server_key = bytes.fromhex(node.get_service_node_key()["service_node_x25519_pubkey"])
    clients = Clients(node, server_key)
    log.info("Send it %d generated requests from %d client addresses", EXAMPLES, CLIENTS)
    try:
        yield node, clients, tip
    finally:
        clients.close()
        try:
            assert_equal(node.stop(), 0)
        finally:
            node.kill()


def test_no_request_gets_status_500_and_the_chain_is_unchanged(omq_target):
    """One test, so that the checks after the fuzzing run on the daemon that was fuzzed
    (pytest-xdist may hand two tests of a module to two workers, each with its own daemon)."""
    @fuzz_settings(EXAMPLES)
    @given(frames=requests)
    def one(frames):
        node, clients, _ = omq_target
        status = clients.ask(frames)
        STATUSES[str(status)] = STATUSES.get(str(status), 0) + 1
        assert status != "500", frames
        assert status in (None, "200", "400", "404", "413", "429"), (status, frames)
    one()
    node, clients, tip = omq_target
    log.info("After the fuzzing: the same chain, a fresh client is answered, no traceback: %s", STATUSES)
    assert_equal(node.get_height(), tip)
    assert clients.ask([b"get_height", b""]) in ("200", "429")
    assert "Traceback" not in node.stderr_text()
    assert STATUSES.get("400", 0) + STATUSES.get("404", 0) > 0, "the requests reached the method table"
    write_figures("public OMQ port fuzzing", {"requests": sum(STATUSES.values()), "statuses": STATUSES,
                                              "status_500": 0, "tracebacks": 0, "chain_unchanged": True})
