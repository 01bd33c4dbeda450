"""The attackers of the hostile benchmark: each runs in a process of its own, at full speed, the
attacks of issue #22 items 2-4 in turn against one daemon, each from a fresh loopback address
(the last one is banned by then):

- a self-signed block of 7 MiB (over MAX_BLOCK_BYTES, under the frame limit);
- twelve 1.5 MB orphans signed by a key of its own, near the victim's tip;
- ten 1.5 MB orphans signed by the (published) regtest authority, just above the victim's tip
  (kept, within the pool's bounds), below the honest peer's height (so that the victim keeps
  syncing from the honest peer: a sync from a liar is another benchmark's matter);
- 20,000 uptime proofs of unregistered keys in one write;
- GetBlocks for the start of the chain, again and again, for LEECH_S seconds, reading every answer.

What it did is counted in a shared array (see `COUNTERS`).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from typing import Any, Final

from snode.core.blocks import Block, BlockHeader, encode_block_from_parts, producer_message, tx_root
from snode.core.crypto import SigningKey
from snode.core.encoding import encode, hash32
from snode.core.proofs import UptimeProof
from snode.core.transactions import TX_VERSION, Transaction, Transfer, TxOut
from snode.net import protocol as P
from snode.params import REGTEST, REGTEST_AUTHORITY_SEED

LEECH_S: Final = 3.0
COUNTERS: Final = ("connections", "bytes_sent", "bytes_pulled", "closed_by_victim")


class Connection:
    """One attacker connection: frames out, frames in, nothing more."""

    def __init__(self, ip: str, port: int, source_ip: str, genesis: bytes, *,
                 network_id: int = REGTEST.network_id) -> None:
        self.sock = socket.create_connection((ip, port), timeout=10, source_address=(source_ip, 0))
        self.decoder = P.FrameDecoder()
        self.inbox: list[bytes] = []
        self.sent = 0
        self.send(P.Hello(network_id=network_id, genesis_hash=genesis, version=P.PROTOCOL_VERSION,
                          agent="hostile/1", height=0, top_hash=genesis, listen_port=0,
                          nonce=int.from_bytes(os.urandom(7), "big")))
        hello = P.parse(self.next_frame())
        assert isinstance(hello, P.Hello)
        self.victim_height = hello.height

    def send(self, message: P.Message) -> None:
        self.send_raw(P.frame(message))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)
        self.sent += len(data)

    def next_frame(self, timeout: float = 10) -> bytes:
        self.sock.settimeout(timeout)
        while not self.inbox:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed by the victim")
            self.inbox.extend(self.decoder.feed(data))
        return self.inbox.pop(0)

    def drain_until_closed(self, timeout: float = 10) -> bool:
        """Read and drop until the victim closes the connection; whether it did in time."""
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.next_frame(max(deadline - time.monotonic(), 0.01))
        except (ConnectionError, OSError):
            return True
        return False

    def close(self) -> None:
        self.sock.close()


class Body:
    """Transactions of about `size` encoded bytes, encoded once: each block made of them costs
    the attacker a header and a signature, not an encoding of megabytes."""

    def __init__(self, size: int) -> None:
        outputs = tuple(TxOut(os.urandom(32), j + 1) for j in range(2_000))
        self.txs = tuple(Transaction(TX_VERSION, (), outputs[i:] + outputs[:i], Transfer(), ())
                         for i in range(max(1, size // 88_000)))
        self.encoded = [encode(tx) for tx in self.txs]
        self.root = tx_root([hash32(e) for e in self.encoded])

    def block(self, key: SigningKey, height: int) -> bytes:
        header = BlockHeader(height=max(height, 1), prev_hash=os.urandom(32),
                             timestamp=int(time.time()) - 3_600, tx_root=self.root, producer=key.public, round=0)
        encoded = encode(header)
        signature = key.sign(producer_message(REGTEST.network_id, hash32(encoded)))
        return encode_block_from_parts(Block(header, self.txs, signature), encoded, self.encoded)


class Attacker:
    """One hostile peer's attacks, in turn, each from the next of its addresses."""

    def __init__(self, ip: str, port: int, genesis: bytes, addresses: Sequence[str], counters: Any,
                 top: int) -> None:
        self.ip, self.port, self.genesis, self.top = ip, port, genesis, top
        self.addresses = list(addresses)
        self.turn = 0
        self.counters = counters
        self.own_key = SigningKey(os.urandom(32))
        self.authority = SigningKey(REGTEST_AUTHORITY_SEED)
        self.fat = Body(1_500_000)
        self.huge = Body(7 * 1024 * 1024).block(self.own_key, 1)

    def count(self, name: str, amount: int = 1) -> None:
        with self.counters.get_lock():
            self.counters[COUNTERS.index(name)] += amount

    def run_forever(self) -> None:
        attacks = (self.oversize, self.forged_orphans, self.authority_orphans, self.junk_proofs, self.leech)
        while True:
            attack = attacks[self.turn % len(attacks)]
            source = self.addresses[self.turn % len(self.addresses)]
            self.turn += 1
            try:
                conn = Connection(self.ip, self.port, source, self.genesis)
            except (OSError, AssertionError, ConnectionError):
                continue  # that address is still banned, or the victim is busy
            self.count("connections")
            try:
                if attack(conn):
                    self.count("closed_by_victim")
            except (OSError, ConnectionError):
                self.count("closed_by_victim")
            finally:
                self.count("bytes_sent", conn.sent)
                conn.close()

    def oversize(self, conn: Connection) -> bool:
        conn.send(P.NewBlock(self.huge))
        return conn.drain_until_closed()

    def forged_orphans(self, conn: Connection) -> bool:
        for i in range(12):
            conn.send(P.NewBlock(self.fat.block(self.own_key, conn.victim_height + 2 + i)))
        return conn.drain_until_closed()

    def authority_orphans(self, conn: Connection) -> bool:
        for i in range(10):
            conn.send(P.NewBlock(self.fat.block(self.authority, min(conn.victim_height + 2 + i, self.top))))
        conn.send(P.Ping(1))
        return conn.drain_until_closed(timeout=2)

    def junk_proofs(self, conn: Connection) -> bool:
        now = int(time.time())
        keys = [os.urandom(32) for _ in range(100)]
        conn.send_raw(b"".join(
            P.frame(P.Proof(UptimeProof(keys[i // 200], now - 100 + i % 200, "127.0.0.1", 1, 1, "0.1.0",
                                        bytes(64)), relayed=True))
            for i in range(20_000)))
        return conn.drain_until_closed()

    def leech(self, conn: Connection) -> bool:
        conn.send(P.GetBlocks([self.genesis], P.MAX_BLOCKS_PER_BATCH))
        started = time.monotonic()
        while time.monotonic() - started < LEECH_S:
            conn.send(P.GetBlocks([self.genesis], P.MAX_BLOCKS_PER_BATCH))
            while True:
                message = P.parse(conn.next_frame())
                if isinstance(message, P.Blocks):
                    self.count("bytes_pulled", sum(len(b) for b in message.blocks))
                    break
        return False


def attack(ip: str, port: int, genesis: bytes, addresses: Sequence[str], counters: Any, top: int) -> None:
    """A hostile peer's process: attack until terminated (its blocks no higher than `top`)."""
    Attacker(ip, port, genesis, addresses, counters, top).run_forever()
