"""sd_notify without a dependency: READY, STATUS (the status line) and STOPPING to systemd.

Does nothing unless systemd started the daemon with Type=notify (NOTIFY_SOCKET is set).
"""

from __future__ import annotations

import os
import socket


def notify(message: str) -> bool:
    """Send one sd_notify message; False when not under systemd or the socket is gone."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True
