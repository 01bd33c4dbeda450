"""Outbound dialling against a real regtest daemon (issue #33 item 3): a node whose address book
holds eight "tried" addresses that went dead, as the issue reproduced it, dials them with backoff
(the old dialler took the first eight entries in a fixed order: 21 dials each in 40 s) and
reaches an honest node it hears of meanwhile (the old one never dialled it). And the book is
saved and read back as before (the store's peers table), a bad row named in one line.

The eight answer as peers once, from their own loopback addresses, so that the daemon moves them
to "tried"; then they stop listening. Dials are counted in the daemon's debug log.
(tests/unit/test_addrman.py tests the book and the dialer's choices one by one.)
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import threading
import time
from typing import Any

import msgspec

from snode.net import limits as L
from snode.net import protocol as P
from snode.params import NETWORKS
from snode.store import DATABASE_FILE
from tests.functional.framework import assert_equal, narrator, next_loopback_ip, scaled, wait_until
from tests.functional.hostile import handshake, pong
from tests.functional.p2p import FakePeer

log = narrator(__name__)

DEAD = 8
WINDOW_S = 30.0
"""Seconds the dead addresses are watched for: the backoff (2 s, doubling) allows at most 5 dials
each in them (`allowed_dials`); the old dialler made about 16."""


class OneShotPeer:
    """A listener on its own loopback address that shakes hands with the node's first dial, holds
    the connection, and then goes: nothing listens there any more."""

    def __init__(self, hello: P.Hello) -> None:
        self.ip = next_loopback_ip()
        self.port = 38090
        self.listener = socket.create_server((self.ip, self.port))
        self.listener.settimeout(scaled(20))
        self.hello = msgspec.structs.replace(hello, listen_port=self.port,
                                             nonce=int.from_bytes(os.urandom(7), "big"))
        self.conn: socket.socket | None = None
        self.thread = threading.Thread(target=self._answer, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    def _answer(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return  # closed before the node dialled
        conn.settimeout(scaled(10))
        self.conn = conn
        decoder = P.FrameDecoder()
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                if any(isinstance(P.parse(f), P.Hello) for f in decoder.feed(data)):
                    conn.sendall(P.frame(self.hello))
                    return
        except OSError:
            return  # the test gave up on it (its assertion says why)

    def close(self) -> None:
        self.listener.close()
        self.thread.join(scaled(5))
        if self.conn is not None:
            self.conn.close()


def dials(node: Any, address: str) -> int:
    """The node's failed dials of `address` so far, from its debug log."""
    return int(node.stderr_text().count(f"cannot connect to {address}:"))


def outbound(node: Any) -> set[str]:
    return {p["address"] for p in node.get_peers()["peers"] if p["direction"] == "outbound"}


def allowed_dials(window: float) -> int:
    """Dials of one dead address the backoff allows in `window` seconds after its first failure:
    one at each DIAL_BACKOFF_BASE_S * (2**k - 1) that falls inside (the first included)."""
    return sum(1 for k in range(32) if L.DIAL_BACKOFF_BASE_S * (2 ** k - 1) <= window)


def connect_all(node: Any, gossip: FakePeer, template: P.Hello, dead: list[OneShotPeer]) -> None:
    """Tell the node of `dead` until it holds an outbound connection to each. A learned address
    whose slot in the book's "new" table holds another of them is not taken (Bitcoin Core's rule:
    eight loopback addresses from one source meet one in about 3 runs of 100, from the book's
    random key): the node never dials it, and a fresh address takes its place in `dead`."""
    for _ in range(4):
        gossip.send(P.Peers(addresses=[d.address for d in dead]))
        wait_until(lambda: any(d.address in outbound(node) for d in dead), timeout=30,
                   what="the node's first outbound connection to one of the eight")
        try:
            wait_until(lambda: {d.address for d in dead} <= outbound(node), timeout=5,
                       what="the node's outbound connections to the eight")
            return
        except AssertionError:
            log_text = node.stderr_text()
            missed = [d for d in dead if f"dialling {d.address}" not in log_text]
            if not missed:
                raise  # each was dialled and one did not connect: no slot explains that
        log.info("%d of them shared a slot of the book with another: fresh addresses instead", len(missed))
        for d in missed:
            d.close()
            dead[dead.index(d)] = OneShotPeer(template)
    raise AssertionError(f"the node dialled not all of {[d.address for d in dead]} in four tellings")


def test_dead_tried_addresses_back_off_and_an_honest_node_is_reached(nodes):
    node = nodes.add(extra_args=["--log-level=3"])
    honest = nodes.add()
    gossip = FakePeer(node, source_ip=next_loopback_ip())
    dead: list[OneShotPeer] = []
    try:
        handshake(gossip)
        template = gossip.hello()
        assert template.network_id == NETWORKS[node.network].network_id
        dead = [OneShotPeer(template) for _ in range(DEAD)]
        log.info("A peer tells of %d addresses; each answers the node's dial once", DEAD)
        connect_all(node, gossip, template, dead)
        log.info("All eight are tried peers now; they stop listening and drop the node")
        died = time.monotonic()  # before any failed dial of them
        for d in dead:
            d.close()
        wait_until(lambda: not outbound(node) & {d.address for d in dead}, what="the eight gone")
        wait_until(lambda: all(dials(node, d.address) >= 1 for d in dead), timeout=15,
                   what="a first failed dial of each dead address")

        log.info("Meanwhile the peer tells of an honest node: it is reached within a few ticks")
        learned = time.monotonic()
        gossip.send(P.Peers(addresses=[f"{honest.ip}:{honest.p2p_port}"]))
        pong(gossip, 3)
        wait_until(lambda: f"{honest.ip}:{honest.p2p_port}" in outbound(node), timeout=20,
                   what="the node's outbound connection to the honest node")
        log.info("Reached %.1f s after it was learned", time.monotonic() - learned)

        wait_until(lambda: time.monotonic() - died >= scaled(WINDOW_S), timeout=scaled(WINDOW_S) + 10,
                   what="the watch window")
        counts = [dials(node, d.address) for d in dead]
        log.info("Failed dials of the dead addresses in %.0f s: %s (the old dialler: about 16 each)",
                 time.monotonic() - died, counts)
        assert max(counts) <= allowed_dials(time.monotonic() - died), counts
        assert min(counts) >= 2, f"a dead tried address should be retried, with backoff: {counts}"
        assert_equal(len(outbound(node) & {d.address for d in dead}), 0)
    finally:
        gossip.close()
        for d in dead:
            d.close()
    assert_equal(node.stop(), 0)


def test_saved_addresses_are_read_back_and_a_bad_one_gets_one_line(nodes):
    node = nodes.add()
    assert_equal(node.stop(), 0)
    kept, bad = f"{next_loopback_ip()}:38090", "not-an-address\x1b[2J"
    with contextlib.closing(sqlite3.connect(node.data_dir / DATABASE_FILE)) as db, db:
        db.executemany("INSERT INTO peers (address) VALUES (?)", [(kept,), (bad,), ("10.0.0.1",)])
    log.info("A data dir whose saved peers hold one address and two rows that are none: one line")
    node.start()
    wait_until(lambda: "saved peer addresses" in node.stderr_text(), what="the line about the bad rows")
    lines = [line for line in node.stderr_text().splitlines() if "saved peer addresses" in line]
    assert_equal(len(lines), 1)
    assert "dropped 2 saved peer addresses that this network does not dial" in lines[0], lines[0]
    assert "\x1b" not in lines[0], "a saved row reached the log unescaped"
    assert_equal(node.stop(), 0)
    with contextlib.closing(sqlite3.connect(node.data_dir / DATABASE_FILE)) as db:
        assert_equal([a for (a,) in db.execute("SELECT address FROM peers ORDER BY position")], [kept])
