"""Quorumnet's outgoing connections and what they say about reachability (issue #37, item 1).

A `Link` is one DEALER of ours to one member's declared address and port, expecting that
member's CurveZMQ server key, with a socket monitor that says whether its connection is up: a
handshake has completed on it (ZMTP's EVENT_HANDSHAKE_SUCCEEDED; on the client side it comes
only after the server proved it holds the member's key and its ZAP handler admitted ours) and
it has not ended since (EVENT_DISCONNECTED). Such a live connection, opened by us to the address
the member's current proof declares, is what a reachability test may count as passed
(`services.reachability`); one the member opened to us never is.

ZeroMQ heartbeats tell when a link's connection dies without a FIN (a frozen process, a host
gone, a cut cable): every HEARTBEAT_IVL the DEALER sends a PING, and closes the connection when
nothing comes back within HEARTBEAT_TIMEOUT; the PING's TTL makes the other end close it too
when our PINGs stop. `heartbeat_ms` sizes them per network: half a reachability interval each,
so a held connection to a node that stopped answering is dropped within one interval.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Final

import zmq

from snode.params import NetworkParams

_SUCCEEDED: Final = int(zmq.EVENT_HANDSHAKE_SUCCEEDED)
_FAILED: Final = int(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                     | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
_DISCONNECTED: Final = int(zmq.EVENT_DISCONNECTED)
_WATCHED: Final = _SUCCEEDED | _FAILED | _DISCONNECTED
_EVENT: Final = struct.Struct("=HI")
_POLLIN: Final = int(zmq.POLLIN)
_EVENTS: Final = int(zmq.EVENTS)


def heartbeat_ms(params: NetworkParams) -> int:
    """ZMQ_HEARTBEAT_IVL and ZMQ_HEARTBEAT_TIMEOUT of quorumnet's DEALERs: half a reachability
    interval each (devnet 5 s, mainnet 150 s), so that a held connection whose other end went
    silent ends within one interval (and the PINGs cost a connection one small message each way
    per half interval)."""
    return params.reachability_interval * 500


def set_heartbeats(sock: zmq.Socket[bytes], params: NetworkParams) -> None:
    """PING every half interval, give up after another half without traffic, and ask the other
    end (TTL) to close the connection after a whole interval without ours."""
    half = heartbeat_ms(params)
    sock.setsockopt(zmq.HEARTBEAT_IVL, half)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, half)
    sock.setsockopt(zmq.HEARTBEAT_TTL, min(2 * half, 6_553_500))  # ZMTP's TTL field: deciseconds, 16 bits


class Link:
    """A DEALER of ours to `address` and whether its connection is up (see the module). The
    monitor is attached before the connect, so the first handshake's event is seen."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], sock: zmq.Socket[bytes], address: str) -> None:
        self.sock, self.address = sock, address
        self.live = False
        """A handshake completed on the connection and it has not ended since."""
        self.handshakes = 0
        """CurveZMQ handshakes this link's connections made, completed or failed (a figure)."""
        endpoint = f"inproc://snode.link.{id(self):x}"
        sock.monitor(endpoint, _WATCHED)
        monitor = ctx.socket(zmq.PAIR)
        monitor.setsockopt(zmq.RCVHWM, 0)  # read at every signal: nothing is dropped
        monitor.setsockopt(zmq.LINGER, 0)
        monitor.connect(endpoint)
        self._monitor = monitor
        self._fd = int(monitor.getsockopt(zmq.FD))
        asyncio.get_running_loop().add_reader(self._fd, self._on_signal)
        self._on_signal()  # ZeroMQ signals the FD only after a read found the pipe empty

    def connect(self) -> None:
        self.sock.connect(self.address)

    def is_live(self) -> bool:
        """`live`, after reading the events the monitor has queued since the loop last did."""
        self._on_signal()
        return self.live

    def _on_signal(self) -> None:
        monitor = self._monitor
        while int(monitor.getsockopt(_EVENTS)) & _POLLIN:
            frames = monitor.recv_multipart(zmq.NOBLOCK)
            if len(frames) != 2 or len(frames[0]) != _EVENT.size:
                continue
            event = _EVENT.unpack(frames[0])[0]
            if event & (_SUCCEEDED | _FAILED):
                self.handshakes += 1
            if event & _WATCHED:
                self.live = event == _SUCCEEDED

    def close(self) -> None:
        """Stop watching, then close the monitor and the DEALER (queued messages are dropped)."""
        asyncio.get_running_loop().remove_reader(self._fd)
        try:
            self.sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self._monitor.close(linger=0)
        self.sock.close(linger=0)
        self.live = False
