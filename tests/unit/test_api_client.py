"""The one JSON-RPC client (snode.api.client), the one RPC address parser and the wallet's wrapper.

Addresses: `http://host:port`, `host:port`, IPv6 and a trailing `/` parse to one canonical URL;
anything else is one line naming the option. The client talks to a canned HTTP server on
loopback (a thread of this process, stopped at the end): typed results decode, an error answer
is an RpcFailure with its code, an answer of another shape is an RpcFailure naming the field, a
closed port is RpcUnavailable saying "Unable to connect". The wallet's DaemonClient turns each of
these into a DaemonError, the only error the wallet knows.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from snode.api import errors as E
from snode.api.client import RpcClient, RpcFailure, RpcUnavailable
from snode.api.types import HeightResult, InfoResult
from snode.common.endpoints import ConfigError, parse_http_url
from snode.wallet.daemon import DaemonClient
from snode.wallet.errors import DaemonError, WalletError


@pytest.mark.parametrize("text, url", [
    ("http://127.0.0.1:9231", "http://127.0.0.1:9231"),
    ("127.0.0.1:9231", "http://127.0.0.1:9231"),
    ("  HTTP://localhost:38091/ ", "http://localhost:38091"),
    ("[::1]:18091", "http://[::1]:18091"),
    ("http://[::1]:18091", "http://[::1]:18091"),
])
def test_rpc_addresses_parse_to_one_url(text: str, url: str) -> None:
    assert parse_http_url("--rpc", text) == url


@pytest.mark.parametrize("text, rule", [
    ("https://127.0.0.1:9231", "'https://127.0.0.1:9231' is not of the form http://<ip>:<port>"),
    ("http://127.0.0.1:9231/json_rpc", "is not of the form http://<ip>:<port>"),
    ("127.0.0.1", "'127.0.0.1' is not of the form http://<ip>:<port>"),
    ("http://127.0.0.1:0", "'0' is not a port number (1 to 65535)"),
    ("127.0.0.1:rpc", "'rpc' is not a port number"),
    ("300.1.1.1:9231", "'300.1.1.1' is not an IP address"),
    ("bad_host:9231", "'bad_host' is not a valid host name or IP address"),
])
def test_a_bad_rpc_address_is_one_line_naming_the_option(text: str, rule: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_http_url("--daemon-address", text)
    assert str(refused.value).startswith("--daemon-address: ") and rule in str(refused.value)


class _Canned(BaseHTTPRequestHandler):
    """Answers every POST with the next canned body; remembers the requests."""

    answers: list[Any] = []
    requests: list[Any] = []

    def do_POST(self) -> None:  # noqa: N802  (the name http.server calls)
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(request)
        body = json.dumps({"jsonrpc": "2.0", "id": request["id"], **type(self).answers.pop(0)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def canned() -> Iterator[tuple[str, type[_Canned]]]:
    """(URL, handler class) of a canned JSON-RPC server on a free loopback port."""
    handler = type("Handler", (_Canned,), {"answers": [], "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_typed_calls_decode_and_send_typed_params(canned: tuple[str, type[_Canned]]) -> None:
    url, handler = canned
    handler.answers += [{"result": {"height": 7, "hash": "ab" * 32, "newer_field": True}}]
    client = RpcClient(url)
    try:
        assert client.call_typed("get_height", HeightResult(height=1, hash="x"), HeightResult) == HeightResult(
            height=7, hash="ab" * 32)
    finally:
        client.close()
    assert handler.requests[0]["params"] == {"height": 1, "hash": "x"}


def test_an_error_answer_and_an_answer_of_another_shape_are_rpc_failures(
    canned: tuple[str, type[_Canned]],
) -> None:
    url, handler = canned
    handler.answers += [
        {"error": {"code": E.NOT_FOUND, "message": "no such block on the main chain"}},
        {"result": {"height": "seven", "hash": "ab"}},
    ]
    client = RpcClient(url)
    try:
        with pytest.raises(RpcFailure) as failed:
            client.call("get_block", {"height": 99})
        assert (failed.value.code, failed.value.message) == (E.NOT_FOUND, "no such block on the main chain")
        with pytest.raises(RpcFailure) as failed:
            client.call_typed("get_height", None, HeightResult)
        assert failed.value.code == E.INTERNAL_ERROR
        assert "get_height" in failed.value.message and "$.height" in failed.value.message
    finally:
        client.close()


def test_no_daemon_is_unable_to_connect() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(RpcUnavailable, match=f"^Unable to connect to {url}: is snoded running\\?$"):
        RpcClient(url).call_typed("get_info", None, InfoResult)


def test_the_wallet_sees_every_failure_as_one_daemon_error(canned: tuple[str, type[_Canned]]) -> None:
    url, handler = canned
    handler.answers += [
        {"error": {"code": E.TX_REJECTED, "message": "transaction rejected: double spend"}},
        {"result": {"height": 3, "hash": "cd" * 32}},
    ]
    daemon = DaemonClient(url.removeprefix("http://"))
    with pytest.raises(DaemonError) as refused:
        daemon.send("00")
    assert (refused.value.code, str(refused.value)) == (E.TX_REJECTED, "transaction rejected: double spend")
    assert daemon.tip() == HeightResult(height=3, hash="cd" * 32)
    port = _closed_port()
    with pytest.raises(DaemonError) as unreachable:
        DaemonClient(f"127.0.0.1:{port}").tip()
    assert unreachable.value.code is None
    assert str(unreachable.value) == f"Unable to connect to http://127.0.0.1:{port}: is snoded running?"
    with pytest.raises(WalletError, match="^--daemon-address: 'ftp://x:1' is not of the form"):
        DaemonClient("ftp://x:1")
