"""Held quorumnet connections on real CurveZMQ sockets over loopback (issue #37, item 1): only a
connection a member opened itself, to the address the other's current proof declares, with its
handshake done, is held; ZeroMQ heartbeats end it when the other end freezes; a fault test's
closed listener takes no new handshake while the held connection goes on carrying messages."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from typing import Any

from snode.net import protocol as P
from snode.net.events import QuorumMessageReceived
from snode.net.quorum_links import heartbeat_ms
from snode.net.quorumnet import QuorumNet  # noqa: E402  (needs pyzmq)
from snode.node.node import Node
from tests.functional.framework import scaled
from tests.unit.conftest import free_port, wait_async
from tests.unit.quorumnet_pair import run


def _vote(sender: QuorumNet, height: int) -> P.QuorumVote:
    return P.QuorumVote(sender.key.public, 2, 2, height, sender.key.public, bytes(64))


def test_a_connection_is_held_by_the_member_that_opened_it_and_only_at_the_declared_address():
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (node_b, net_b) = pair
        a = net_a.key.public
        assert not net_b.held(a)  # nothing sent yet: no connection
        assert net_b.send(a, _vote(net_b, 1))
        await wait_async(lambda: net_b.held(a), what="b's connection to a, handshake done")
        assert not net_a.held(net_b.key.public)  # b's connection into a is not a's to hold
        assert net_a.handshakes_in >= 1 and net_b.handshakes_out >= 1
        declared = node_b.proofs.endpoint(a)
        assert declared is not None
        node_b.proofs.record(a, int(time.time()) + 1, (declared[0], declared[1] + 1))
        assert not net_b.held(a)  # a new declared port: the old connection says nothing of it
        node_b.proofs.record(a, int(time.time()) + 2, (declared[0], declared[1]))
        assert net_b.held(a)
        node_b.proofs.record(a, int(time.time()) + 3, (declared[0], declared[1] + 1))
        net_b.send(a, _vote(net_b, 2))  # a send to the new address replaces the connection
        assert not net_b.held(a)

    run(test)


def test_a_closed_listener_takes_no_new_handshake_while_the_held_connection_carries_on():
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (node_a, net_a), (_, net_b) = pair
        a = net_a.key.public
        received: list[Any] = []
        node_a.hub.subscribe(QuorumMessageReceived, lambda e: received.append(e.message))
        assert net_b.send(a, _vote(net_b, 1))
        await wait_async(lambda: net_b.held(a) and len(received) == 1, what="a held connection")
        assert net_a.close_listener(True)
        assert not net_a.close_listener(True)  # already closed: no change
        answered = net_a.handshakes_in
        assert await net_b.probe(a, 1.0) is False  # its SYN is dropped: no handshake at all
        assert net_a.handshakes_in == answered
        assert net_b.held(a)
        assert net_b.send(a, _vote(net_b, 2))
        await wait_async(lambda: len(received) == 2, what="a message on the held connection")
        assert net_a.close_listener(False)
        assert await net_b.probe(a, scaled(10)) is True
        assert net_b.probes == 2

    run(test)


FROZEN_SERVER = """
import sys, time, zmq
ctx = zmq.Context()
router = ctx.socket(zmq.ROUTER)
router.setsockopt(zmq.CURVE_SERVER, 1)
router.setsockopt(zmq.CURVE_SECRETKEY, bytes.fromhex(sys.argv[1]))
router.bind(sys.argv[2])
print("up", flush=True)
time.sleep(600)
"""


def test_heartbeats_end_a_held_connection_whose_other_end_froze():
    """A process that stops (SIGSTOP) keeps its TCP connections open (its kernel still ACKs):
    only the PINGs left unanswered tell; within two heartbeat spans the connection is not held."""
    async def test(pair: list[tuple[Node, QuorumNet]]) -> None:
        (_, net_a), (node_b, net_b) = pair
        node_b.params = replace(node_b.params, reachability_interval=2)  # heartbeats of 1 s
        a = net_a.key.public
        ip = net_a.bind_ip
        port = free_port(ip)
        server = subprocess.Popen([sys.executable, "-c", FROZEN_SERVER, net_a.key.x25519_secret().hex(),
                                   f"tcp://{ip}:{port}"], stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "up"
            node_b.proofs.record(a, int(time.time()) + 1, (ip, port))  # a's key, now at the other process
            assert net_b.send(a, _vote(net_b, 1))
            await wait_async(lambda: net_b.held(a), what="a connection held to the stand-in")
            os.kill(server.pid, signal.SIGSTOP)
            frozen = time.monotonic()
            await wait_async(lambda: not net_b.held(a), what="the heartbeats ending it", timeout=scaled(10))
            spent = time.monotonic() - frozen
            assert spent <= 2 * heartbeat_ms(node_b.params) / 1000 + scaled(2), spent
        finally:
            os.kill(server.pid, signal.SIGKILL)
            server.wait()
            if server.stdout is not None:
                server.stdout.close()

    run(test)
