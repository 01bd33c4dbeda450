"""Connection caps for a ZeroMQ listener (quorumnet's ROUTER, the public OMQ port): issue #33.

ZeroMQ accepts every TCP connection by itself, in its I/O thread, and tells its owner nothing:
about 1,100 idle connections (no ZMTP greeting, so no ZAP question either) took every descriptor
of a daemon. Two things bound them here:

- ZMQ_HANDSHAKE_IVL (`HANDSHAKE_S`): ZeroMQ closes a connection whose ZMTP and CURVE handshake
  has not completed within it (libzmq's default is 30 s).
- A socket monitor reports each accepted connection with its descriptor (EVENT_ACCEPTED) and
  each closed one (EVENT_DISCONNECTED, same descriptor). `ListenerGuard` reads the peer's
  address with getpeername on a dup of the descriptor and counts per address; a connection over
  a cap, or one that arrives while descriptors are short (`DescriptorWatch.short_of`), is cut with
  shutdown(SHUT_RDWR) on the dup. shutdown acts on the socket, not on the descriptor, so
  ZeroMQ's own descriptor reads end-of-file, its engine fails, it reports EVENT_DISCONNECTED and
  closes its descriptor itself: nothing is closed under ZeroMQ's feet.

Why the descriptor is the connection's when we touch it. A descriptor number is reused once
closed, so the monitor's number may name another socket by the time we read the event. libzmq
emits EVENT_DISCONNECTED from the engine's error path before it closes the descriptor
(`stream_engine_base_t::error`, then `unplug` and the destructor's close), and a socket's
monitor events arrive in the order they were emitted (one inproc pipe; the context has one I/O
thread, so the listener's accept and the engines' errors are emitted by the same thread in
order). So: events are read in order; an EVENT_ACCEPTED followed by an EVENT_DISCONNECTED of the
same number, already queued, is a connection already gone and is skipped; otherwise the
descriptor is dup'ed, the monitor is read again, and only if still no EVENT_DISCONNECTED of that
number came is the dup the accepted connection (had ZeroMQ closed it before our dup, its event
would have been queued before the close). The monitor's pipe has no high-water mark (RCVHWM 0
on our end), so no event is dropped under a flood.

What is counted: a connection still in its handshake is one accepted less than HANDSHAKE_S
(+1 s) ago, not yet closed, and not yet admitted (`admitted`: quorumnet's ZAP handler tells, per
address, since a socket monitor's v1 events name no peer of a handshake); any older one that is
still open has completed its handshake, since ZeroMQ would have closed it otherwise.
Checked against libzmq's source (github.com/zeromq/libzmq at 6b708e4a, src/stream_engine_base.cpp
and src/session_base.cpp): `stream_engine_base_t::error` calls `_socket->event_disconnected(..,
_s)` and only then `unplug()` and `delete this`, whose destructor is the one `close(_s)`: every
close an engine error causes (end-of-file after our shutdown, a reset, the handshake timer, a
ZMTP or CURVE protocol error) is announced first, as relied on above. Two other paths close an
engine's descriptor through `stream_engine_base_t::terminate` (unplug, delete) with no event: a
session's destructor (the socket closed or unbound: our own stop, after which the guard reads no
more events) and `session_base_t::pipe_terminated` for raw sockets only (ZMQ_STREAM, not used
here). A ROUTER pipe terminated by the socket goes the first way. So a number can be reused
without an event only when the socket itself is going away; and even then the guard reads the
peer with getpeername on its own dup and acts only on what it reads, and an entry it keeps for
a vanished connection ages out with the handshake window (HANDSHAKE_S + 1 s).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Final

import zmq

from snode.common.descriptors import DescriptorWatch
from snode.common.logs import LIMITED
from snode.net.bans import address_key

log = logging.getLogger(__name__)

HANDSHAKE_S: Final = 5.0
"""ZMQ_HANDSHAKE_IVL: a connection that has not finished its ZMTP and CURVE handshake by then is
closed by ZeroMQ (an honest one takes milliseconds; a ZAP answer is one turn of our loop)."""

_ACCEPTED: Final = int(zmq.EVENT_ACCEPTED)
_DISCONNECTED: Final = int(zmq.EVENT_DISCONNECTED)
_EVENT: Final = struct.Struct("=HI")


@dataclass(frozen=True)
class Caps:
    """What one address and all addresses may hold on one listener."""

    pending_per_ip: int
    """Connections of one address still in their handshake: over it the newcomer is cut."""
    pending: int | None
    """Connections still in their handshake, all addresses: over it the oldest is cut (an honest
    handshake takes milliseconds, so a flood cannot push one out before it is done). None: no
    such cap (`total` then bounds them)."""
    per_ip: int | None = None
    """Connections of one address, handshake done or not (None: no cap; quorumnet's completed
    connections are registered service nodes')."""
    total: int | None = None
    """Connections in all: over it the newcomer is cut."""


class ListenerGuard:
    """Counts and caps the connections a ZeroMQ listening socket accepts (see the module)."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], sock: zmq.Socket[bytes], *, name: str,
                 caps: Caps, descriptors: DescriptorWatch | None) -> None:
        self.name, self.caps, self.descriptors = name, caps, descriptors
        sock.setsockopt(zmq.HANDSHAKE_IVL, int(HANDSHAKE_S * 1000))
        address = f"inproc://snode.guard.{name}.{id(self):x}"
        sock.monitor(address, zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        monitor = ctx.socket(zmq.PAIR)
        monitor.setsockopt(zmq.RCVHWM, 0)
        monitor.setsockopt(zmq.LINGER, 0)
        monitor.connect(address)
        self._sock, self._monitor = sock, monitor
        self._events: deque[tuple[int, int]] = deque()
        self._closing: Counter[int] = Counter()
        """Descriptors with an EVENT_DISCONNECTED read but not yet applied."""
        self._open: dict[int, str] = {}
        """The address of each counted connection, by descriptor."""
        self._per_ip: Counter[str] = Counter()
        self._pending: dict[int, tuple[str, float]] = {}
        """Connections still in their handshake: address and time accepted, oldest first."""
        self._pending_per_ip: Counter[str] = Counter()
        self.refused = 0
        """Connections this guard cut (a figure for tests and logs)."""
        self._spare = os.open(os.devnull, os.O_RDONLY)
        """A descriptor number of our own that `_claim` duplicates a connection onto (dup2): a
        claim needs no free descriptor, so it works when a flood has taken them all."""
        self._blank = os.open(os.devnull, os.O_RDONLY)
        """What the spare number holds between claims."""
        self._fd = int(monitor.getsockopt(zmq.FD))
        asyncio.get_running_loop().add_reader(self._fd, self._on_signal)
        # Read once now: ZeroMQ signals the FD only after a read has found the pipe empty.
        self._on_signal()

    def close(self) -> None:
        """Stop watching (before the listening socket closes)."""
        asyncio.get_running_loop().remove_reader(self._fd)
        try:
            self._sock.disable_monitor()
        except zmq.ZMQError:
            pass
        self._monitor.close(linger=0)
        os.close(self._spare)
        os.close(self._blank)

    def holding(self, ip: str | None = None) -> int:
        """Open connections (of `ip`, or all) as the guard counts them."""
        return len(self._open) if ip is None else self._per_ip[ip]

    def admitted(self, ip: str) -> None:
        """A handshake from `ip` was admitted: its oldest connection still counted as in its
        handshake is not any more (which one of the address's it was does not matter to a cap
        per address)."""
        oldest = next((fd for fd, (address, _) in self._pending.items() if address == ip), None)
        if oldest is not None:
            self._unpend(oldest)

    # --- events -------------------------------------------------------------------------------

    def _on_signal(self) -> None:
        self._pull()
        while self._events:
            event, fd = self._events.popleft()
            if event == _DISCONNECTED:
                self._closing[fd] -= 1
                if not self._closing[fd]:
                    del self._closing[fd]
                self._forget(fd)
            elif event == _ACCEPTED:
                self._accepted(fd)

    def _pull(self) -> None:
        """Read every event the monitor has (reading EVENTS also takes the FD's signal)."""
        monitor = self._monitor
        while int(monitor.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
            frames = monitor.recv_multipart(zmq.NOBLOCK)
            if len(frames) != 2 or len(frames[0]) != _EVENT.size:
                continue
            event, fd = _EVENT.unpack(frames[0])
            if event == _DISCONNECTED:
                self._closing[fd] += 1
            self._events.append((event, fd))

    def _accepted(self, fd: int) -> None:
        ip = self._claim(fd)
        if ip is None:
            return  # already closed by ZeroMQ
        refusal, evict = self._refusal(fd, ip)
        if refusal is not None:
            self.refused += 1
            log.info("%s: cut a connection from %s: %s", self.name, ip, refusal, extra=LIMITED)
            _cut(self._spare)
        os.dup2(self._blank, self._spare)
        if refusal is not None:
            return
        if evict is not None:
            self._cut_open(evict)
        self._open[fd] = ip
        self._per_ip[ip] += 1
        self._pending[fd] = (ip, time.monotonic())
        self._pending_per_ip[ip] += 1

    def _forget(self, fd: int) -> None:
        ip = self._open.pop(fd, None)
        if ip is None:
            return
        self._per_ip[ip] -= 1
        if not self._per_ip[ip]:
            del self._per_ip[ip]
        self._unpend(fd)

    def _unpend(self, fd: int) -> None:
        pending = self._pending.pop(fd, None)
        if pending is not None:
            self._pending_per_ip[pending[0]] -= 1
            if not self._pending_per_ip[pending[0]]:
                del self._pending_per_ip[pending[0]]

    def _expire(self, now: float) -> None:
        """Connections accepted over HANDSHAKE_S (+1 s) ago that are still open have completed
        their handshake (ZeroMQ closes the others): no longer pending."""
        while self._pending:
            fd, (_, since) = next(iter(self._pending.items()))
            if now - since < HANDSHAKE_S + 1:
                return
            self._unpend(fd)

    def _claim(self, fd: int) -> str | None:
        """Put a duplicate of descriptor `fd` on the spare number and return its peer's IP, if
        `fd` is still the connection its latest event names (see the module); None when that
        connection is already gone. The caller puts the blank back (dup2) when done."""
        if self._closing[fd]:
            return None
        try:
            os.dup2(fd, self._spare)
        except OSError:
            return None
        self._pull()
        if self._closing[fd]:
            return None
        try:
            return address_key(str(_peer(self._spare)[0]))  # an IPv6 /64 counts as one address
        except (OSError, IndexError):
            return None

    def _refusal(self, fd: int, ip: str) -> tuple[str | None, int | None]:
        """Why a new connection from `ip` on descriptor `fd` is cut (None: it may stay), and the
        descriptor of the oldest connection still in its handshake to cut to make room for it."""
        caps = self.caps
        if self.descriptors is not None and self.descriptors.short_of(fd):
            return "file descriptors are short", None
        self._expire(time.monotonic())
        if self._pending_per_ip[ip] >= caps.pending_per_ip:
            return f"{caps.pending_per_ip} connections from that address still in their handshake", None
        if caps.per_ip is not None and self._per_ip[ip] >= caps.per_ip:
            return f"{caps.per_ip} connections from that address already", None
        if caps.total is not None and len(self._open) >= caps.total:
            return f"{caps.total} connections already", None
        if caps.pending is not None and len(self._pending) >= caps.pending:
            return None, next(iter(self._pending))
        return None, None

    def _cut_open(self, fd: int) -> None:
        """Cut the counted connection on `fd` (the oldest still in its handshake)."""
        ip = self._open[fd]
        self._forget(fd)
        if self._claim(fd) is not None:
            self.refused += 1
            log.info("%s: cut a connection from %s, still in its handshake, to make room",
                     self.name, ip, extra=LIMITED)
            _cut(self._spare)
        os.dup2(self._blank, self._spare)


def _peer(fd: int) -> tuple[str, int]:
    """getpeername of a socket descriptor, which stays open."""
    sock = socket.socket(fileno=fd)
    try:
        return sock.getpeername()
    finally:
        sock.detach()


def _cut(fd: int) -> None:
    """End the connection under a duplicated descriptor: ZeroMQ's own descriptor then reads EOF
    and ZeroMQ closes it (closing only our duplicate would leave the connection open)."""
    sock = socket.socket(fileno=fd)
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the peer is gone already
    finally:
        sock.detach()
