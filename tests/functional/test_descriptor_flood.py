"""Idle connections against every ZeroMQ port of a real service node under a soft descriptor
limit of 1,024 (issue #33, item 1): no ZMTP greeting, no key, so ZeroMQ never asks ZAP.

The node holds at most 8 of one address's connections still in their handshake, 128 of all
addresses' on quorumnet (`quorumnet.LISTENER_CAPS`) and 8 an address, 256 in all, on the public
OMQ port (`omq_public.LISTENER_CAPS`); it closes each within ZMQ_HANDSHAKE_IVL (5 s,
`zmq_guard.HANDSHAKE_S`). Under a limit small enough for the caps together to reach the reserve,
it writes one ERROR line, `/readyz` names the shortage, and the ZeroMQ ports refuse first, so the
admin RPC and P2P still answer. Counts and seconds are bounded: a few thousand sockets, a few
seconds each.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time
import urllib.error
import urllib.request

import pytest

from snode.api.client import RpcUnavailable
from snode.common.descriptors import reserve_for
from snode.common.procs import open_descriptors
from snode.net.limits import MAX_PENDING_PER_IP
from snode.net.zmq_guard import HANDSHAKE_S
from snode.params import REGTEST
from tests.functional.framework import narrator, next_loopback_ip, scaled, wait_until
from tests.functional.p2p import FakePeer

log = narrator(__name__)

OMQ_PORT = 38093
LOW_ERROR = "file descriptors: "
SHORT = "fewer than"


def _open_fds(pid: int) -> int:
    count = open_descriptors(pid)
    assert count is not None, f"process {pid} is gone"
    return count


def _flood(ip: str, port: int, sources: list[str], each: int) -> list[socket.socket]:
    """`each` idle TCP connections from every source address (non-blocking: a full accept queue
    only delays them)."""
    socks = []
    for source in sources:
        for _ in range(each):
            sock = socket.socket()
            sock.setblocking(False)
            sock.bind((source, 0))
            code = sock.connect_ex((ip, port))
            assert code in (0, errno.EINPROGRESS), os.strerror(code)
            socks.append(sock)
    return socks


def _close(socks: list[socket.socket]) -> None:
    for sock in socks:
        sock.close()
    socks.clear()


def _readyz(node) -> dict:
    """/readyz's body; an empty one when a burst's last descriptors made the connection fail."""
    try:
        with urllib.request.urlopen(f"http://{node.ip}:{node.rpc_port}/readyz", timeout=scaled(5)) as answer:
            return json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return json.loads(err.read())
    except OSError:
        return {"unmet": []}


def _answers(node) -> bool:
    try:
        node.get_info()
        return True
    except (RpcUnavailable, OSError):
        return False


def _serves(node) -> None:
    """get_info within a second and a P2P handshake: what must keep working under a flood. A
    burst faster than the guard's cuts can take the last descriptors for a moment (ZeroMQ
    accepts in its own thread before the guard hears of it), so the first call may wait for
    that moment to pass; once it has, an answer takes under a second."""
    wait_until(lambda: _answers(node), timeout=scaled(5), what="get_info answering")
    asked = time.monotonic()
    node.get_info()
    assert time.monotonic() - asked < scaled(1), "get_info took over a second"
    peer = FakePeer(node, source_ip=next_loopback_ip())
    try:
        peer.handshake()
    finally:
        peer.close()


def _service_node(nodes, nofile: tuple[int, int]):
    node = nodes.add(extra_args=["--service-node", "--skip-doppelganger-check",
                                 f"--omq-public={next_loopback_ip()}:{OMQ_PORT}"], start=False)
    node.omq_ip = node.extra_args[-1].split("=")[1].rsplit(":", 1)[0]
    node.nofile = nofile
    node.start()
    return node


@pytest.mark.slow
def test_thousands_of_idle_connections_hold_a_few_descriptors_each_address(nodes):
    node = _service_node(nodes, (1024, 1024))
    pid = node.process.pid
    assert "file descriptors: soft limit 1024 (hard 1024), 102 kept in reserve" in node.stderr_text()
    base = _open_fds(pid)
    log.info("The node has %d descriptors open; 3,000 idle connections from one address", base)
    socks: list[socket.socket] = []
    try:
        started = time.monotonic()
        socks += _flood(node.ip, REGTEST.quorumnet_port, [next_loopback_ip()], 3000)
        _serves(node)
        log.info("%d opened in %.1f s", len(socks), time.monotonic() - started)
        wait_until(lambda: _open_fds(pid) <= base + 8 + 2, timeout=scaled(10),
                   what="the node holding 8 connections of that address")
        wait_until(lambda: _open_fds(pid) <= base + 2, timeout=scaled(HANDSHAKE_S + 5),
                   what="the handshake deadline closing the last 8")
        _close(socks)

        log.info("1,000 idle connections from one address to P2P: 2 may wait for their Hello")
        socks += _flood(node.ip, node.p2p_port, [next_loopback_ip()], 1000)
        _serves(node)
        wait_until(lambda: _open_fds(pid) <= base + MAX_PENDING_PER_IP + 2, timeout=scaled(10),
                   what="the node holding 2 silent P2P connections of that address")
        _close(socks)

        log.info("From 40 addresses, 60 each, to quorumnet and to the public OMQ port")
        sources = [next_loopback_ip() for _ in range(40)]
        socks += _flood(node.ip, REGTEST.quorumnet_port, sources, 60)
        socks += _flood(node.omq_ip, OMQ_PORT, sources, 60)
        _serves(node)
        # 128 on quorumnet (the oldest cut for a newcomer), 8 an address on OMQ (40 x 8 = 320,
        # of which 256 stay).
        wait_until(lambda: _open_fds(pid) <= base + 128 + 256 + 4, timeout=scaled(10),
                   what="the caps of both ports holding")
        log.info("The node holds %d descriptors more than before", _open_fds(pid) - base)
        assert _open_fds(pid) < 1024 - reserve_for(1024), _open_fds(pid)
        _serves(node)
        wait_until(lambda: _open_fds(pid) <= base + 2, timeout=scaled(HANDSHAKE_S + 5),
                   what="the handshake deadline closing them all")
        assert node.running
    finally:
        _close(socks)


@pytest.mark.slow
def test_short_of_descriptors_the_zeromq_ports_refuse_first_and_say_so_once(nodes):
    limit = 320  # the two ports' caps together (384) pass its reserve (64 free)
    node = _service_node(nodes, (limit, limit))
    pid = node.process.pid
    socks: list[socket.socket] = []
    try:
        for round_ in range(3):
            log.info("Round %d: 1,600 idle connections from 40 addresses to both ports", round_ + 1)
            sources = [next_loopback_ip() for _ in range(40)]
            socks += _flood(node.ip, REGTEST.quorumnet_port, sources, 20)
            socks += _flood(node.omq_ip, OMQ_PORT, sources, 20)
            wait_until(lambda: SHORT in " ".join(_readyz(node)["unmet"]), timeout=scaled(10),
                       what="/readyz naming the shortage")
            assert _open_fds(pid) <= limit, _open_fds(pid)
            _serves(node)
            _close(socks)
        errors = [line for line in node.stderr_text().splitlines() if "ERROR" in line and LOW_ERROR in line]
        log.info("%d ERROR line(s): %s", len(errors), errors[:1])
        assert len(errors) == 1, errors
        log.info("Once the connections are gone, /readyz no longer names it")
        wait_until(lambda: not any(SHORT in u for u in _readyz(node)["unmet"]),
                   timeout=scaled(HANDSHAKE_S + 10), what="the shortage over")
    finally:
        _close(socks)
