"""Two in-memory service nodes of one chain, each with its own QuorumNet on real CurveZMQ sockets
over loopback, and the daemon's event loop (uvloop) to run a test on them
(tests/unit/test_quorumnet.py, tests/unit/test_quorumnet_held.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import uvloop

from snode.core.service_nodes import StateChangeKind
from snode.devchain import key_from_label
from snode.net.quorumnet import QuorumNet  # noqa: E402  (needs pyzmq)
from snode.node.node import Identity, Node
from snode.node.verifier import InlineVerifier
from snode.store.memory import MemoryStore
from tests.functional.framework import next_loopback_ip, scaled
from tests.unit.conftest import free_port, new_chain

MEMBERS = ("quorumnet a", "quorumnet b")


def members() -> list[tuple[Node, QuorumNet]]:
    """Two registered, active service nodes of one chain, each a node with its QuorumNet (not
    started) on its own loopback address, each knowing the other's endpoint."""
    chain = new_chain()
    keys = [key_from_label(label) for label in MEMBERS]
    for operator, label in zip(("alice", "bob"), MEMBERS):
        pubkey = chain.new_node(operator=operator, sn_label=label)
        chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    out = []
    for key in keys:
        ip = next_loopback_ip()
        port = free_port(ip)
        node = Node(params=chain.params, consensus=chain.consensus,
                    store=MemoryStore(chain.blocks[0], chain.fork(at=0).state), state=chain.state,
                    identity=Identity(key, ip, port + 1, port), producer_key=None, verifier=InlineVerifier())
        out.append((node, QuorumNet(node, key, bind_ip=ip, port=port)))
    for node, _ in out:
        for _, net in out:
            node.proofs.record(net.key.public, int(time.time()), (net.bind_ip, net.port))
    return out


def run(test: Callable[[list[tuple[Node, QuorumNet]]], Awaitable[None]]) -> None:
    """Run `test` on the daemon's event loop with both members' quorumnets started, stopping
    them (every socket closed, the contexts ended) whatever it does."""
    async def main() -> None:
        pair = members()
        for _, net in pair:
            net.start()
        try:
            async with asyncio.timeout(scaled(60)):
                await test(pair)
        finally:
            for _, net in pair:
                await net.stop()
    uvloop.run(main())
