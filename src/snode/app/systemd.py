"""sd_notify without a dependency: READY, STATUS (the status line) and STOPPING to systemd.

Does nothing unless systemd started the daemon with Type=notify (NOTIFY_SOCKET is set). A
message is newline-separated `KEY=value` fields, so a value with a newline in it would add
fields (`STOPPING=1` stops the unit): `status_message` escapes the status text first.
"""

from __future__ import annotations

import os
import socket

from snode.common.text import STATUS_LINE_LIMIT, printable


def status_message(status: str, *, ready: bool = False) -> str:
    """The sd_notify message that sets STATUS (and READY=1 first when `ready`): one field, whatever
    `status` holds."""
    field = f"STATUS={printable(status, STATUS_LINE_LIMIT)}"
    return f"READY=1\n{field}" if ready else field


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
