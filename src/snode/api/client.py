"""The one JSON-RPC 2.0 client: synchronous, over one keep-alive HTTP connection.

Used by the wallet, snode-cli, snode-devnet, the test framework and the benchmarks. A daemon that
is not there becomes `RpcUnavailable("Unable to connect to <url>: ...")`, never a traceback; an
error answer becomes `RpcFailure` with its code and message. `call_typed` decodes the result into
one of the records of `snode.api.types`, so a result of the wrong shape is an RpcFailure naming
the field instead of a KeyError somewhere later.
"""

from __future__ import annotations

import http.client
import itertools
from typing import Any, TypeVar

import msgspec

from snode.api import errors as E
from snode.api.credentials import Login
from snode.common import decode_reasons
from snode.common.endpoints import http_endpoint
from snode.common.text import printable

T = TypeVar("T")

MAX_ANSWER_BYTES = 64 << 20
"""The largest answer read from a daemon (the largest real one, get_service_nodes of 10,000
nodes, is a few MB): past it the call fails, so that a daemon that lies, or anything in its
place on a non-loopback bind, cannot make a client take all its memory."""


class RpcUnavailable(Exception):
    """The daemon could not be reached (not running, wrong address, connection closed)."""


class RpcFailure(Exception):
    """The daemon answered with a JSON-RPC error (or with a result this client cannot read)."""

    def __init__(self, error: dict[str, Any]) -> None:
        self.error = error
        self.code = error.get("code")
        self.message = str(error.get("message", ""))
        super().__init__(f"{self.message} (code {self.code})")


class RpcClient:
    """JSON-RPC calls to one daemon: `client.call("get_info")`,
    `client.call_typed("get_info", None, InfoResult)`.

    `url` is `http://<host>:<port>` or `<host>:<port>`; a ConfigError says what is wrong with it
    (commands parse their option with `parse_http_url` first, so the error names the option).
    `login`: sent as HTTP Basic auth with every request (snode.api.credentials).
    """

    def __init__(self, url: str, timeout: float = 30, login: Login | None = None) -> None:
        endpoint = http_endpoint("RPC address", url)
        self.host, self.port = endpoint.host, endpoint.port
        self.url = f"http://{endpoint}"
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json"}
        """What every request sends (the login's Authorization among them)."""
        if login is not None:
            self.headers["Authorization"] = login.header()
        self._conn: http.client.HTTPConnection | None = None
        self._ids = itertools.count(1)

    def raw(self, body: bytes | str, *, method: str = "POST", path: str = "/json_rpc",
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        """One HTTP request: (status, lower-cased headers, body). Retries once on a stale
        keep-alive connection."""
        hdrs = {**self.headers, **(headers or {})}
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self._conn.request(method, path, body=body, headers=hdrs)
                resp = self._conn.getresponse()
                data = resp.read(MAX_ANSWER_BYTES + 1)
                if len(data) > MAX_ANSWER_BYTES:
                    self.close()
                    raise RpcUnavailable(f"{self.url} answered more than {MAX_ANSWER_BYTES:,} bytes")
                if resp.getheader("Connection", "").lower() == "close":
                    self.close()
                return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data
            except (OSError, http.client.HTTPException) as err:
                self.close()
                if attempt or isinstance(err, (ConnectionRefusedError, TimeoutError)):
                    raise RpcUnavailable(f"Unable to connect to {self.url}: {_why(err)}") from None
        raise AssertionError("unreachable")

    def call(self, method: str, params: Any = None) -> Any:
        """The result of one call as plain JSON values; RpcFailure for a JSON-RPC error."""
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params is not None:
            request["params"] = params
        status, _, body = self.raw(_encoder.encode(request))
        if status != 200:
            text = body.decode(errors="replace").strip()
            raise RpcFailure({"code": -status, "message": f"HTTP {status}: {text}"})
        try:
            reply = msgspec.json.decode(body)
        except decode_reasons.DECODE_FAILURES:
            raise RpcUnavailable(f"Connection closed: {self.url} did not answer with JSON") from None
        if not isinstance(reply, dict) or ("result" not in reply and "error" not in reply):
            raise RpcUnavailable(f"Connection closed: {self.url} did not answer with JSON-RPC")
        if "error" in reply:
            raise RpcFailure(_error_object(reply["error"]))
        return reply["result"]

    def call_typed(self, method: str, params: Any, result_type: type[T]) -> T:
        """The result of one call decoded into `result_type` (a record of snode.api.types);
        `params` may be such a record too. RpcFailure for an error or a result of another shape."""
        result = self.call(method, msgspec.to_builtins(params) if params is not None else None)
        try:
            return msgspec.convert(result, result_type)
        except msgspec.ValidationError as err:
            raise RpcFailure({
                "code": E.INTERNAL_ERROR,
                "message": f"{method}: {self.url} answered in a form this program cannot read "
                           f"({decode_reasons.reason(err)}); is snoded the same version?",
            }) from None

    def close(self) -> None:
        """Close the connection; the next call opens a new one."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def call_once(url: str, method: str, params: Any = None, *, timeout: float = 10) -> Any:
    """One call on a connection of its own, closed afterwards (tools and tests that poll many
    daemons, some of which may be gone)."""
    client = RpcClient(url, timeout=timeout)
    try:
        return client.call(method, params)
    finally:
        client.close()


_encoder = msgspec.json.Encoder()


def _error_object(error: Any) -> dict[str, Any]:
    # A well-behaved server sends {"code", "message"}; anything else still becomes one line.
    if isinstance(error, dict):
        return error
    return {"code": E.INTERNAL_ERROR, "message": str(error)}


def _why(err: BaseException) -> str:
    if isinstance(err, ConnectionRefusedError):
        return "is snoded running?"
    if isinstance(err, TimeoutError):
        return "timed out"
    if isinstance(err, (ConnectionResetError, http.client.RemoteDisconnected)):
        return "Connection closed by the daemon"
    if isinstance(err, http.client.BadStatusLine):  # its text is the bytes that came: no terminal's business
        return ("it does not answer in HTTP: is this snoded's P2P or quorumnet port? Give the address its "
                "--rpc-admin names")
    return printable(str(err) or type(err).__name__)
