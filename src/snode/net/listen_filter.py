"""A fault test's closed listener (devnet and regtest only, `app.partition`): a listening TCP socket
of this process that takes no new connection while the connections it accepted before live on,
as behind a firewall that drops new SYNs but passes established traffic (issue #37, item 1).

Linux only: a classic BPF filter that drops every packet (`ret #0`) attached to the listening
socket (SO_ATTACH_FILTER) drops the SYNs addressed to it, so a client's connect times out; the
sockets of connections accepted before have no filter (a socket copies its listener's filter
when it is made) and are untouched. SO_DETACH_FILTER opens the listener again. The socket is
ZeroMQ's: it is found by its port among this process's descriptors and reached through a
duplicate, so ZeroMQ's own descriptor and its poller are left as they are.
"""

from __future__ import annotations

import ctypes
import os
import socket
import stat
import struct
from typing import Final

SO_ATTACH_FILTER: Final = 26
SO_DETACH_FILTER: Final = 27
_DROP_ALL: Final = struct.pack("=HBBI", 0x06, 0, 0, 0)
"""One BPF instruction, BPF_RET | BPF_K with k = 0: keep no byte of any packet."""


def _listening(port: int) -> socket.socket | None:
    """A duplicate of this process's listening TCP socket on `port`, if it has one."""
    for name in os.listdir("/proc/self/fd"):
        try:
            if not stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                continue
            sock = socket.socket(fileno=os.dup(int(name)))
        except (OSError, ValueError):
            continue
        try:
            if (sock.type == socket.SOCK_STREAM and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                    and sock.getsockname()[1] == port):
                return sock
        except OSError:
            pass
        sock.close()
    return None


def set_closed(port: int, closed: bool) -> bool:
    """Drop (`closed`) or take again the new connections to this process's listener on `port`;
    False when it has none there."""
    sock = _listening(port)
    if sock is None:
        return False
    with sock:
        if closed:
            program = (ctypes.c_ubyte * len(_DROP_ALL)).from_buffer_copy(_DROP_ALL)
            fprog = struct.pack("HxxxxxxP", 1, ctypes.addressof(program))  # struct sock_fprog
            sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
        else:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
            except OSError:
                pass  # no filter attached: open already
    return True
