"""The public OMQ port on a real daemon (issue #14, item 11): CurveZMQ with the node's X25519 key,
any client key; the read-only methods answer as the admin RPC does (get_info without the
operator's fields); garbage, admin methods and oversized messages get an error or are dropped,
never a crash; a flood is rate-limited and the daemon keeps serving; snode-cli --omq uses it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from snode.core.encoding import encode
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_spend, sign_spend
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from snode.rpc.omq_public import (
    ANSWER_BYTES_PER_TOKEN,
    BURST,
    PUBLIC_INFO_FIELDS,
    RATE,
    STALLED_CLIENT_MS,
    transaction_cost,
)
from tests.functional.framework import (
    assert_equal,
    faucet_key,
    narrator,
    run_snoded,
    scaled,
    send_spend,
    spendable_outputs,
    wait_until,
)

log = narrator(__name__)


class Client:
    """A CurveZMQ DEALER with a fresh key, as any internet client would be."""

    def __init__(self, node: Any, server_key: bytes, *, reads: bool = True) -> None:
        from zmq.utils import z85

        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        if not reads:  # its ZeroMQ stops reading the connection at once, and never reconnects
            self.sock.setsockopt(zmq.RCVHWM, 1)
            self.sock.setsockopt(zmq.RCVBUF, 4096)
            self.sock.setsockopt(zmq.RECONNECT_IVL, -1)
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


def test_transactions_whose_signatures_fail_cost_a_client_by_their_size(public_sn):
    """A transaction's signatures are checked before it can be refused: one of 900 inputs with
    its last signature bad made the daemon check 900 signatures for each copy a client sent, at
    the 20 requests a second every client has (80 sent at once held the event loop 29 s). A
    transaction now costs its client a request for each KiB of it (TX_BYTES_PER_TOKEN)."""
    node, server_key = public_sn
    spender = key_from_label("public omq spender")
    copies = 2 * int(BURST)
    inputs = 900
    log.info("Give one key %d outputs, mined and unlocked", inputs)
    send_spend(node, faucet_key(), [TxOut(spender.public, COIN)] * inputs, Transfer())
    node.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    coins = spendable_outputs(node, spender)
    assert_equal(len(coins), inputs)
    signed = sign_spend(spender, coins, [TxOut(spender.public, inputs * COIN - COIN)], Transfer(), REGTEST)
    forged = msgspec.structs.replace(signed, signatures=signed.signatures[:-1] + (bytes(64),))
    raw = encode(forged)
    request = [b"send_raw_transaction", b'{"tx_hex": "' + raw.hex().encode() + b'"}']
    cost = transaction_cost(*request)
    log.info("A %d-byte transaction whose last signature is bad, %d copies sent at once (cost %d each)",
             len(raw), copies, cost)
    client = Client(node, server_key)
    try:
        started = time.monotonic()
        for _ in range(copies):
            client.sock.send_multipart(request)
        asked = time.monotonic()
        node.get_info()
        stalled = time.monotonic() - asked
        statuses = []
        for _ in range(copies):
            assert client.sock.poll(int(scaled(60) * 1000)), "every request is answered"
            status, body = client.sock.recv_multipart()
            assert status == b"429" or b"bad signature" in body, body
            statuses.append(status.decode())
        elapsed = time.monotonic() - started
    finally:
        client.close()
    checked = statuses.count("400")
    log.info("%d checked (%d signatures each), %d refused unread as rate-limited; the admin RPC's get_info "
             "meanwhile took %.2f s", checked, inputs, statuses.count("429"), stalled)
    assert 1 <= checked <= (BURST + RATE * elapsed) / cost + 1, (checked, elapsed)
    log.info("The honest transaction goes through the same port once the bucket refills; it is pooled")
    honest = Client(node, server_key)
    try:
        good = b'{"tx_hex": "' + encode(signed).hex().encode() + b'"}'
        wait_until(lambda: honest.ask(b"send_raw_transaction", good)[0] == "200", timeout=10,
                   what="the valid transaction taken")
    finally:
        honest.close()
    assert_equal(node.get_info()["mempool_size"], 1)


def _big_block_request(node: Any) -> list[bytes]:
    """A get_block request for a block of about 1.8 MB (its answer is 4.7 MB of JSON)."""
    owner = key_from_label("public omq big block")
    log.info("A block of about 1.8 MB: 20 transactions of 2,300 outputs each")
    send_spend(node, faucet_key(), [TxOut(owner.public, 10_000 * COIN)] * 20, Transfer())
    node.generate_blocks(blocks=1 + REGTEST.unlock_confirmations)
    for coin in spendable_outputs(node, owner):
        tx = build_spend([coin], owner, [TxOut(owner.public, COIN)] * 2_300, Transfer(), REGTEST)
        node.send_raw_transaction(tx_hex=encode(tx).hex())
    block = node.get_block(hash=node.generate_blocks(blocks=1)["blocks"][0])
    assert len(block["block_hex"]) > 3_000_000, len(block["block_hex"])
    return [b"get_block", b'{"height": %d}' % block["height"]]


def _served_connections(ip: str, port: int = 38093) -> int:
    """The daemon's established TCP connections on its public port (Linux's /proc/net/tcp: the
    local address is little-endian hex, state 01 is ESTABLISHED)."""
    local = f"{int.from_bytes(bytes(map(int, ip.split('.'))), 'little'):08X}:{port:04X}"
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(1 for line in lines if line.split()[1] == local and line.split()[3] == "01")


def test_a_client_that_never_reads_is_cut_and_its_queued_answers_freed(public_sn):
    """ZeroMQ queues up to ANSWERS_QUEUED answers a connection for a client that does not read
    them: gigabytes of big answers over an hour. The kernel now closes a connection whose window
    stayed shut for STALLED_CLIENT_MS (ZMQ_TCP_MAXRT), which frees them."""
    node, server_key = public_sn
    request = _big_block_request(node)
    stalled = Client(node, server_key, reads=False)
    try:
        stalled.ask(b"get_height")  # connected: the daemon holds its end
        assert_equal(_served_connections(node.ip), 1, "the daemon's end of the connection")
        log.info("A client that reads nothing asks for the big block, again and again, every 0.2 s")
        started = time.monotonic()

        def asked_again_and_cut() -> bool:
            stalled.sock.send_multipart(request, flags=zmq.NOBLOCK)
            return _served_connections(node.ip) == 0

        wait_until(asked_again_and_cut, timeout=60, interval=0.2, what="the daemon cutting a client that reads nothing")
        cut = time.monotonic() - started
        log.info("Cut after %.1f s (its window shut some seconds before; the bound is %d ms of it)", cut,
                 STALLED_CLIENT_MS)
        assert cut >= STALLED_CLIENT_MS / 1000
    finally:
        stalled.close()
    log.info("The port serves a reading client as before")
    fresh = Client(node, server_key)
    try:
        wait_until(lambda: fresh.ask(b"get_height")[0] == "200", timeout=20, what="get_height served again")
    finally:
        fresh.close()


def test_big_answers_cost_a_client_by_their_size(public_sn):
    """`get_block` of a full block is megabytes of JSON, made on the event loop: at one request
    each, one client had 20 of them a second. An answer now costs its client a request for each
    64 KiB of it (ANSWER_BYTES_PER_TOKEN), charged once made."""
    node, server_key = public_sn
    request = _big_block_request(node)
    copies = int(BURST)
    client = Client(node, server_key)
    try:
        started = time.monotonic()
        for _ in range(copies):
            client.sock.send_multipart(request)
        statuses, size = [], 0
        for _ in range(copies):
            assert client.sock.poll(int(scaled(60) * 1000)), "every request is answered"
            status, body = client.sock.recv_multipart()
            statuses.append(status.decode())
            size = max(size, len(body))
        elapsed = time.monotonic() - started
    finally:
        client.close()
    served = statuses.count("200")
    log.info("%d copies of a %d-byte answer asked at once: %d served, %d refused as rate-limited", copies, size,
             served, statuses.count("429"))
    assert_equal(served + statuses.count("429"), copies)
    assert 1 <= served <= (BURST + RATE * elapsed) / (size / ANSWER_BYTES_PER_TOKEN) + 1, (served, elapsed)
    log.info("Small answers come again once the debt is paid")
    fresh = Client(node, server_key)
    try:
        wait_until(lambda: fresh.ask(b"get_height")[0] == "200", timeout=20, what="get_height served again")
    finally:
        fresh.close()
