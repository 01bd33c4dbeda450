"""A small synchronous JSON-RPC 2.0 client over one keep-alive HTTP connection.

Used by snode-cli, snode-devnet and the test framework. A daemon that is not there becomes
`RpcUnavailable("Unable to connect to <url>...")`, never a traceback.
"""

from __future__ import annotations

import http.client
import itertools
import json
from typing import Any
from urllib.parse import urlsplit


class RpcUnavailable(Exception):
    """The daemon could not be reached (not running, wrong address, connection closed)."""


class RpcFailure(Exception):
    """The daemon answered with a JSON-RPC error."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.code = error.get("code")
        self.message = str(error.get("message", ""))
        super().__init__(f"{self.message} (code {self.code})")


def parse_url(url: str) -> tuple[str, int]:
    """`http://127.0.0.1:9231`, `127.0.0.1:9231` -> (host, port); ValueError if unusable."""
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname or port is None:
        raise ValueError(f"'{url}' is not of the form http://<ip>:<port>")
    return parts.hostname, port


class RpcClient:
    """JSON-RPC calls to one daemon: `client.call("get_info")`."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        self.host, self.port = parse_url(url)
        self.url = f"http://{self.host}:{self.port}"
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._ids = itertools.count(1)

    def raw(self, body: bytes | str, *, method: str = "POST", path: str = "/json_rpc",
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One HTTP request: (status, lower-cased headers, body). Retries once on a stale
        keep-alive connection."""
        hdrs = {"Content-Type": "application/json"}
        hdrs.update(headers or {})
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=hdrs)
                resp = self._conn.getresponse()
                data = resp.read()
                if resp.getheader("Connection", "").lower() == "close":
                    self.close()
                return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
            except (OSError, http.client.HTTPException) as err:
                self.close()
                if attempt or isinstance(err, (ConnectionRefusedError, TimeoutError)):
                    raise RpcUnavailable(f"Unable to connect to {self.url}: {_why(err)}") from None
        raise AssertionError("unreachable")

    def call(self, method: str, params: Any = None) -> Any:
        """The result of one call; RpcFailure for a JSON-RPC error."""
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            request["params"] = params
        status, _, body = self.raw(json.dumps(request))
        if status != 200:
            text = body.decode(errors="replace").strip()
            raise RpcFailure({"code": -status, "message": f"HTTP {status}: {text}"})
        try:
            reply = json.loads(body)
        except ValueError:
            raise RpcUnavailable(f"Connection closed: {self.url} did not answer with JSON") from None
        if "error" in reply:
            raise RpcFailure(reply["error"])
        return reply["result"]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _why(err: BaseException) -> str:
    if isinstance(err, ConnectionRefusedError):
        return "connection refused (is snoded running, and is this its --rpc-admin address?)"
    if isinstance(err, TimeoutError):
        return "timed out"
    if isinstance(err, (ConnectionResetError, http.client.RemoteDisconnected)):
        return "Connection closed by the daemon"
    return str(err) or type(err).__name__
