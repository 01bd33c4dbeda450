"""The public OMQ port on a real daemon (issue #14, item 11): CurveZMQ with the node's X25519 key,
any client key; the read-only methods answer as the admin RPC does (get_info without the
operator's fields); garbage, admin methods and oversized messages get an error or are dropped,
never a crash; a flood is rate-limited and the daemon keeps serving; snode-cli --omq uses it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
import zmq

from snode.rpc.omq_public import PUBLIC_INFO_FIELDS
from tests.functional.framework import assert_equal, narrator, run_snoded, scaled, wait_until

log = narrator(__name__)


class Client:
    """A CurveZMQ DEALER with a fresh key, as any internet client would be."""

    def __init__(self, node: Any, server_key: bytes) -> None:
        from zmq.utils import z85

        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        public, secret = zmq.curve_keypair()
        self.sock.curve_publickey, self.sock.curve_secretkey = public, secret
        self.sock.curve_serverkey = z85.encode(server_key)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(f"tcp://{node.ip}:38093")

    def ask(self, *frames: bytes) -> tuple[str, Any]:
        """(status, body) of the answer, which must come."""
        answer = self.answer(*frames)
        assert answer is not None, f"no answer to {frames!r}"
        return answer

    def answer(self, *frames: bytes, timeout: float = 5) -> tuple[str, Any] | None:
        """(status, body) of the answer; None if none comes within `timeout` seconds."""
        self.sock.send_multipart(list(frames))
        if not self.sock.poll(int(scaled(timeout) * 1000)):
            return None
        status, body = self.sock.recv_multipart()
        return status.decode(), json.loads(body)

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


@pytest.fixture
def public_sn(nodes):
    node = nodes.add(extra_args=["--service-node"], start=False)
    node.extra_args.append(f"--omq-public={node.ip}:38093")
    node.start()
    node.generate_blocks(blocks=3)
    keys = node.get_service_node_key()
    return node, bytes.fromhex(keys["service_node_x25519_pubkey"])


def test_the_public_methods_answer_as_the_admin_rpc(public_sn):
    node, server_key = public_sn
    client = Client(node, server_key)
    try:
        log.info("get_height, get_block, get_service_nodes: the admin RPC's answers")
        assert_equal(client.ask(b"get_height", b""), ("200", node.get_height()))
        assert_equal(client.ask(b"get_block", b'{"height": 2}'), ("200", node.get_block(height=2)))
        assert_equal(client.ask(b"get_service_nodes", b"{}"), ("200", node.get_service_nodes()))
        log.info("get_info without the operator's fields (status line, peers, proof refusals)")
        status, info = client.ask(b"get_info")
        assert_equal((status, sorted(info)), ("200", sorted(PUBLIC_INFO_FIELDS)))
        assert_equal(info["height"], 3)
        log.info("Errors: bad params, a transaction that is not there, garbage")
        assert_equal(client.ask(b"get_block", b'{"height": -1}')[0], "400")
        status, body = client.ask(b"get_transaction", b'{"txid": "' + b"00" * 32 + b'"}')
        assert status == "400" and "neither in the chain nor in the mempool" in body["error"], body
        assert_equal(client.ask(b"send_raw_transaction", b'{"tx_hex": "zz"}')[0], "400")
        for frames, expected, text in (
            ((b"get_height", b"", b"extra"), "400", "got 3 frames"),
            ((b"\xff\xfe", b""), "400", "not UTF-8"),
            ((b"get_block", b"{nope"), "400", "not JSON"),
            ((b"get_block", b"[1]"), "400", "must be a JSON object"),
            ((b"no_such_method", b""), "404", "is not served on the public port"),
            ((b"stop_daemon", b""), "404", "is not served on the public port"),
            ((b"generate_blocks", b'{"blocks": 1}'), "404", "is not served on the public port"),
        ):
            status, body = client.ask(*frames)
            assert status == expected and text in body["error"], (frames, status, body)
        log.info("An oversized message is dropped with its connection; a new client is served")
        assert client.answer(b"get_height", b" " * (2 << 20), timeout=2) is None
    finally:
        client.close()
    fresh = Client(node, server_key)
    try:
        assert_equal(fresh.ask(b"get_height")[0], "200")
    finally:
        fresh.close()
    assert node.running and node.get_height()["height"] == 3


def test_a_flood_is_rate_limited_and_the_daemon_keeps_serving(public_sn):
    node, server_key = public_sn
    client = Client(node, server_key)
    try:
        log.info("500 requests as fast as one client can send them")
        for _ in range(500):
            client.sock.send_multipart([b"get_height", b""])
        statuses = []
        for _ in range(500):
            assert client.sock.poll(int(scaled(10) * 1000)), "every request is answered"
            statuses.append(client.sock.recv_multipart()[0].decode())
        log.info("answered: %d x 200, %d x 429", statuses.count("200"), statuses.count("429"))
        assert statuses.count("429") > 300 and statuses.count("200") >= 40, statuses[:50]
        log.info("The bucket refills: the same client is served again; the chain is unchanged")
        wait_until(lambda: client.ask(b"get_height")[0] == "200", timeout=10, what="the client served again")
    finally:
        client.close()
    assert_equal(node.get_height()["height"], 3)


def test_snode_cli_uses_the_public_port_and_bad_options_are_one_line(public_sn, tmp_path):
    node, server_key = public_sn
    base = [sys.executable, "-m", "snode.tools.cli", "--omq", f"tcp://{node.ip}:38093"]
    out = subprocess.run([*base, "--server-key", server_key.hex(), "call", "get_height"],
                         capture_output=True, text=True, timeout=scaled(30))
    assert_equal((out.returncode, json.loads(out.stdout)["height"]), (0, 3))
    out = subprocess.run([*base, "--server-key", "abc", "call", "get_height"], capture_output=True, text=True,
                         timeout=scaled(30))
    assert_equal((out.returncode, out.stderr.strip()), (1, "snode-cli: --server-key: 'abc' is not 64 hex characters"))
    out = subprocess.run([*base, "--server-key", server_key.hex(), "call", "stop_daemon"], capture_output=True,
                         text=True, timeout=scaled(30))
    assert out.returncode == 1 and "is not served on the public port" in out.stderr, out.stderr
    log.info("--omq-public needs --service-node: one line at start-up")
    done = run_snoded(["--regtest", f"--data-dir={tmp_path / 'd'}", "--omq-public=127.0.0.1:38093"])
    assert_equal((done.returncode, done.stderr.strip().splitlines()[-1]),
                 (1, "snoded: --omq-public: needs --service-node (the port's CurveZMQ server key is the "
                     "service node's key)"))
