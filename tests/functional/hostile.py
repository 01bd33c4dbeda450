"""What the hostile-peer tests share: a victim's memory and responsiveness, its bans, and the
attackers' material (blocks of any size, signed by any key; junk uptime proofs).

Every attacker is a `FakePeer` (p2p.py) on its own loopback address, so a ban is seen on exactly
that address; every bound asserted is the one named in `snode.net.limits`.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from snode.common.procs import memory_mib
from snode.core.blocks import Block, make_block
from snode.core.crypto import SigningKey
from snode.core.proofs import UptimeProof
from snode.core.transactions import TX_VERSION, Transaction, Transfer, TxOut
from snode.net import protocol as P
from snode.params import REGTEST
from tests.functional.framework import scaled

MARK = "hostile-mark"
"""Text every attacker puts where it can (its agent string): never to be seen in get_info."""
OUTPUTS_PER_TX = 2_000
TXOUT_BYTES = 44
"""About what one output takes in a block's encoding (a 32-byte key and an amount)."""


def rss_mib(node: Any) -> float:
    """The daemon's resident memory now (VmRSS of /proc/<pid>/status), its workers apart."""
    assert node.process is not None
    rss = memory_mib(node.process.pid)
    if rss is None:
        raise AssertionError("no VmRSS line")
    return rss


def assert_serving(node: Any) -> None:
    """The daemon answers RPC within a second (scaled), and nothing an attacker wrote shows in
    get_info (its status line included)."""
    started = time.monotonic()
    info = node.get_info()
    took = time.monotonic() - started
    assert took < scaled(1.0), f"get_info took {took:.2f} s under attack"
    assert MARK not in json.dumps(info), info


def ban_reasons(node: Any) -> dict[str, str]:
    return {b["ip"]: b["reason"] for b in node.get_peers()["bans"]}


def handshake(peer: Any) -> None:
    """Hello with the attacker's mark in the agent string; the node's Hello back."""
    peer.send(peer.hello(agent=f"{MARK}\x1b]52;c;aGk=\x07"))
    message = peer.receive()
    assert isinstance(message, P.Hello), message


def send_until_cut(peer: Any, messages: Any) -> None:
    """Send each message until the node cuts the connection (what a test of a ban wants)."""
    try:
        for message in messages:
            peer.send(message)
    except (BrokenPipeError, ConnectionResetError):
        pass


def fat_transactions(size: int) -> tuple[Transaction, ...]:
    """Transactions of about `size` encoded bytes together (a block needs no valid ones to be
    kept as an orphan: only its transaction root and producer signature are checked then)."""
    count = max(1, size // (OUTPUTS_PER_TX * TXOUT_BYTES))
    outputs = tuple(TxOut(os.urandom(32), j + 1) for j in range(OUTPUTS_PER_TX))
    return tuple(Transaction(TX_VERSION, (), outputs[i:] + outputs[:i], Transfer(), ()) for i in range(count))


def orphan(key: SigningKey, height: int, transactions: tuple[Transaction, ...]) -> Block:
    """A block at `height` on a parent nobody has, signed by `key`."""
    return make_block(version=1, height=height, prev_hash=os.urandom(32), timestamp=int(time.time()) - 60,
                      transactions=transactions, producer_key=key, network_id=REGTEST.network_id)


def junk_proofs(count: int, source_ip: str) -> list[P.Proof]:
    """Uptime proofs of keys that are not registered (their signatures are never looked at:
    the registration rule refuses them first), passed off as coming straight from their signers
    at `source_ip` (a relayed one is not scored: an honest relayer may know a registration we
    do not know yet)."""
    now = int(time.time())
    keys = [os.urandom(32) for _ in range(-(-count // 200))]
    return [P.Proof(UptimeProof(keys[i // 200], now - 100 + i % 200, source_ip, 1, 1, "0.1.0", bytes(64)),
                    relayed=False) for i in range(count)]


def pong(peer: Any, nonce: int, timeout: float = 30) -> None:
    """Ping the node and read until its Pong: everything sent before the Ping has been handled."""
    peer.send(P.Ping(nonce))
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        message = peer.receive(timeout=max(deadline - time.monotonic(), 0.1))
        if isinstance(message, P.Pong) and message.nonce == nonce:
            return
    raise AssertionError("no Pong")
