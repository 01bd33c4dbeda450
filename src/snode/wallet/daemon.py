"""A small synchronous client for the daemon's admin JSON-RPC.

Synchronous on purpose: the wallet does one thing at a time, and the wallet RPC server runs its
calls in a worker thread. Every failure becomes a DaemonError with one readable line.
"""

from __future__ import annotations

import http.client
import itertools
import json
import socket
import urllib.error
import urllib.request
from typing import Any, Final

from snode.wallet.errors import DaemonError

TIMEOUT: Final = 30.0
TX_REJECTED: Final = -10
NO_SUCH_BLOCK: Final = -5


def daemon_url(address: str) -> str:
    """`HOST:PORT` or a URL, as the base URL of the daemon (no trailing slash)."""
    address = address.strip()
    if "://" not in address:
        address = "http://" + address
    return address.rstrip("/")


class DaemonClient:
    """Calls `POST <url>/json_rpc`; `call(method, **params)` returns the result object."""

    def __init__(self, url: str, timeout: float = TIMEOUT) -> None:
        self.url = daemon_url(url)
        self.timeout = timeout
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> Any:
        """The `result` of one call; DaemonError for a connection failure or an error object."""
        body = json.dumps(
            {"jsonrpc": "2.0", "id": str(next(self._ids)), "method": method, "params": params}
        ).encode()
        request = urllib.request.Request(
            self.url + "/json_rpc", data=body, method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as err:
            raise DaemonError(f"daemon at {self.url} answered HTTP {err.code} to {method}") from None
        except (urllib.error.URLError, ConnectionError, socket.timeout, http.client.HTTPException,
                OSError):
            raise DaemonError(f"Unable to connect to {self.url}: is snoded running?") from None
        try:
            reply = json.loads(raw)
        except ValueError:
            raise DaemonError(f"daemon at {self.url} sent a reply that is not JSON") from None
        if not isinstance(reply, dict):
            raise DaemonError(f"daemon at {self.url} sent a malformed reply to {method}")
        error = reply.get("error")
        if error:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise DaemonError(str(message), code if isinstance(code, int) else None)
        if "result" not in reply:
            raise DaemonError(f"daemon at {self.url} sent a reply without a result to {method}")
        return reply["result"]
