"""The admin JSON-RPC server: HTTP rules and the JSON-RPC 2.0 envelope around `methods`.

Bound to loopback by default. Refused before any method runs: methods other than POST (405),
a Content-Type other than application/json (415), bodies over 1 MiB (413), a Host header that
is not the bind address, a loopback name or an allowed host (403, DNS rebinding) and any request
with a browser Origin header (403, cross-site request forgery), and, where the server asks for
credentials (snode.api.credentials), a request without them (401). JSON-RPC errors go back with
HTTP 200; nothing a client sends produces an HTTP 500.

The probes (/healthz, /readyz) ask for no credential: an orchestrator's liveness and readiness
checks (the container's HEALTHCHECK calls /readyz) hold none, and all they tell is whether the
daemon serves and is ready, with its height, which any P2P peer learns too; they change nothing.
Every path that reveals more (/json_rpc, /metrics, /events, the page) or changes anything asks.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import ipaddress
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import msgspec
from aiohttp import web

from snode.api import errors as E
from snode.api.credentials import BasicAuth
from snode.api.errors import RpcError
from snode.api.openrpc import DISCOVER
from snode.api.sse import EventSource, EventStreams
from snode.common import decode_reasons
from snode.core.errors import SnodeError

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 1024 * 1024
MAX_BATCH = 1000
BODY_TIMEOUT = 10.0
"""Seconds a request's body has, once its head is in (the head's own deadline:
`api.connections.HEADER_TIMEOUT`): a body trickled byte by byte cannot hold a connection."""
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})

_json_encoder = msgspec.json.Encoder()
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'",
    "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}


def page_headers(script: str) -> dict[str, str]:
    """PAGE_HEADERS for a page whose one inline script is `script`: the policy allows that script
    (by its hash: nothing injected into the page can run) and connections to this origin only
    (its /events stream and its own page), and still no frame, form, plugin or other origin."""
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = (f"{PAGE_HEADERS['Content-Security-Policy']}; script-src 'sha256-{digest}'; connect-src 'self'; "
              "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    return {**PAGE_HEADERS, "Content-Security-Policy": policy}


@functools.lru_cache(maxsize=256)
def _host_allowed(host_header: str | None, bind_host: str, allowed: frozenset[str]) -> bool:
    """Whether a Host header names this node (remembered: every request of a client sends the same)."""
    if host_header is None:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):
        host = host[1:host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if host in LOOPBACK_NAMES or host in allowed or host == bind_host:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _plain(status: int, text: str) -> web.Response:
    return web.Response(status=status, text=text + "\n", content_type="text/plain")


def refusal(request: web.Request, bind_host: str, allowed: frozenset[str],
            allow_flag: str | None = "--rpc-allow-host") -> web.Response | None:
    """403 for cross-site (Origin header) and DNS-rebinding (foreign Host) requests, else None.
    `allow_flag`: the server's option that allows another Host name (None: it has none).

    Checked at the top of each handler rather than in a middleware: aiohttp wraps every request
    in extra layers once any middleware exists, which costs about 7 % of get_info's throughput.
    """
    if "Origin" in request.headers:
        return _plain(403, "Forbidden: requests from web browsers (with an Origin header) are refused")
    if not _host_allowed(request.headers.get("Host"), bind_host, allowed):
        address = bind_host if bind_host not in ("0.0.0.0", "::") else "127.0.0.1"
        return _plain(
            403,
            f"Forbidden: Host '{request.headers.get('Host')}' is not this server's address; "
            f"call it by {address}" + (f" or add {allow_flag}" if allow_flag else ""),
        )
    return None


def _error(req_id: Any, err: RpcError) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": req_id, "error": err.to_json()}


class Methods(Protocol):
    """What the envelope dispatches to: the daemon's MethodTable, the wallet's WalletRpc. `call`
    returns the method's awaitable (an `async def call` does too); errors may come from either."""

    def call(self, method: str, params: dict[str, Any]) -> Awaitable[Any]: ...


ACCEPTED_HOSTS = 64
"""Host headers a handler remembers having accepted (a client sends the same one every time)."""


class JsonRpcHandler:
    """Parses envelopes, dispatches to the method table, shapes responses."""

    def __init__(self, methods: Methods, bind_host: str, allowed_hosts: tuple[str, ...],
                 allow_flag: str | None = "--rpc-allow-host", log_name: str = "the daemon log",
                 observe: Callable[[str, float], None] | None = None,
                 discover: Callable[[], dict[str, Any]] | None = None,
                 auth: BasicAuth | None = None) -> None:
        self.methods = methods
        self.discover = discover
        """The server's OpenRPC document, answered to `rpc.discover`."""
        self.observe = observe
        """Told each call's method and the seconds it took to answer (the latency metrics)."""
        self.auth = auth
        """The credentials every call needs (None: none, the admin RPC on loopback)."""
        self.log_name = log_name
        """Where an internal error's details are (named in its -32603 answer)."""
        self.bind_host = bind_host
        self.allowed = frozenset(allowed_hosts)
        self.allow_flag = allow_flag
        self._accepted: set[str | None] = set()

    async def post(self, request: web.Request) -> web.StreamResponse:
        headers = request.headers
        host = headers.get("Host")
        if "Origin" in headers or host not in self._accepted:
            refused = refusal(request, self.bind_host, self.allowed, self.allow_flag)
            if refused is not None:
                return refused
            if len(self._accepted) < ACCEPTED_HOSTS:
                self._accepted.add(host)
        if self.auth is not None and not self.auth.allows(headers.get("Authorization")):
            return self.auth.refusal()
        # The usual header is compared as it is: aiohttp's parse of it costs a fifth of a get_info.
        if headers.get("Content-Type") != "application/json" and request.content_type != "application/json":
            return _plain(415, "Unsupported Media Type: send the header 'Content-Type: application/json'")
        length = headers.get("Content-Length")  # under 7 digits is under the limit: no int() needed
        if length is not None and len(length) > 6 and (request.content_length or 0) > MAX_BODY_BYTES:
            return _plain(413, f"Payload Too Large: the limit is {MAX_BODY_BYTES} bytes")
        try:
            async with asyncio.timeout(BODY_TIMEOUT):
                body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _plain(413, f"Payload Too Large: the limit is {MAX_BODY_BYTES} bytes")
        except TimeoutError:
            return _plain(408, f"Request Timeout: the body did not arrive within {BODY_TIMEOUT:g} s")
        try:
            message = msgspec.json.decode(body)
        except decode_reasons.DECODE_FAILURES as err:
            return self._reply(_error(None, RpcError(E.PARSE_ERROR, f"Parse error: {decode_reasons.reason(err)}")))
        except RecursionError:
            return self._reply(_error(None, RpcError(E.PARSE_ERROR, "Parse error: JSON nested too deeply")))
        if isinstance(message, list):
            if not message:
                return self._reply(_error(None, RpcError(E.INVALID_REQUEST, "Invalid Request: empty batch")))
            if len(message) > MAX_BATCH:
                too_many = f"Invalid Request: a batch holds at most {MAX_BATCH} calls"
                return self._reply(_error(None, RpcError(E.INVALID_REQUEST, too_many)))
            replies = [r for r in [await self._one(m) for m in message] if r is not None]
            return self._reply(replies) if replies else web.Response(status=204)
        reply = await self._one(message)
        return self._reply(reply) if reply is not None else web.Response(status=204)

    def _reply(self, payload: Any) -> web.Response:
        return web.Response(body=_json_encoder.encode(payload), content_type="application/json")

    async def _one(self, message: Any) -> dict[str, Any] | None:
        if not isinstance(message, dict):
            return _error(None, RpcError(E.INVALID_REQUEST, "Invalid Request: a call is a JSON object"))
        req_id = message.get("id")
        notification = "id" not in message
        if not isinstance(req_id, (str, int, type(None))) or isinstance(req_id, bool):
            return _error(None, RpcError(E.INVALID_REQUEST, "Invalid Request: id must be a string, a number or null"))
        if message.get("jsonrpc") != "2.0":
            return _error(req_id, RpcError(E.INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"'))
        method = message.get("method")
        if not isinstance(method, str):
            return _error(req_id, RpcError(E.INVALID_REQUEST, 'Invalid Request: "method" must be a string'))
        params = message.get("params", {})
        if params is None:
            params = {}
        if isinstance(params, list) and not params:
            params = {}
        if not isinstance(params, dict):
            return _error(req_id, RpcError(E.INVALID_PARAMS, 'Invalid params: "params" must be an object'))
        started = time.perf_counter()
        try:
            if method == DISCOVER and self.discover is not None:
                if params:
                    raise RpcError(E.INVALID_PARAMS, f"Invalid params: {DISCOVER} takes no parameters")
                result = self.discover()
            else:
                result = await self.methods.call(method, params)
        except RpcError as err:
            reply = _error(req_id, err)
        except SnodeError as err:
            reply = _error(req_id, RpcError(E.MISC_ERROR, err.reason))
        except Exception:  # a bug: log it, answer -32603, keep serving
            log.exception("internal error in %s", method)
            reply = _error(req_id, RpcError(E.INTERNAL_ERROR, f"Internal error in {method}; see {self.log_name}"))
        else:
            reply = {"jsonrpc": "2.0", "id": req_id, "result": result}
        if self.observe is not None:
            self.observe(method, time.perf_counter() - started)
        return None if notification else reply


async def _method_not_allowed(request: web.Request) -> web.Response:
    return web.Response(
        status=405, text="Method Not Allowed: use POST with 'Content-Type: application/json'\n",
        headers={"Allow": "POST"}, content_type="text/plain",
    )


def make_app(methods: Methods, *, bind_host: str, allowed_hosts: tuple[str, ...],
             allow_host_flag: str | None = "--rpc-allow-host", log_name: str = "the daemon log",
             metrics: Callable[[str], tuple[bytes, str]] | None = None,
             observe: Callable[[str, float], None] | None = None,
             discover: Callable[[], dict[str, Any]] | None = None,
             unmet: Callable[[], dict[str, Any]] | None = None,
             events: EventSource | None = None,
             page: Callable[[str, Mapping[str, str]], Awaitable[tuple[int, str]]] | None = None,
             page_script: str = "", auth: BasicAuth | None = None) -> web.Application:
    """The aiohttp application for the admin RPC, `/metrics`, and the probes: `/healthz` (200
    while the daemon serves) and `/readyz` (200 when `unmet()` lists no unmet condition, else
    503; the JSON body names each). `allow_host_flag`: the server's option that allows another
    Host name, named in the 403 that refuses one (None: the server has no such option);
    `log_name`: where an internal error's details are, named in its -32603 answer; `metrics`: the
    /metrics body and content type for a scraper's Accept header; `observe`: told each call's
    method and seconds; `discover`: the OpenRPC document `rpc.discover` answers; `page`: the
    web view's (status, HTML) for a GET of `/` or `/sn/<key>`, whose one script is `page_script`;
    `auth`: the credentials every path but the probes asks for (None: none)."""
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    handler = JsonRpcHandler(methods, bind_host, allowed_hosts, allow_host_flag, log_name, observe, discover, auth)
    app.router.add_post("/json_rpc", handler.post)
    app.router.add_route("*", "/json_rpc", _method_not_allowed)
    allowed = frozenset(allowed_hosts)

    def refused(request: web.Request, *, probe: bool = False) -> web.Response | None:
        answer = refusal(request, bind_host, allowed, allow_host_flag)
        if answer is None and not probe and auth is not None and not auth.allows(
                request.headers.get("Authorization")):
            return auth.refusal()
        return answer

    def guarded(serve: Callable[[web.Request], web.Response], *,
                probe: bool = False) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            answer = refused(request, probe=probe)
            return answer if answer is not None else serve(request)
        return handle

    if metrics is not None:
        app.router.add_get("/metrics", guarded(lambda request: _metrics(metrics, request)))
    app.router.add_get("/healthz", guarded(lambda _: web.json_response({"status": "ok"}), probe=True))
    if page is not None:
        _add_pages(app, page, page_script, refused)
    if events is not None:
        streams = EventStreams(events)

        async def serve_events(request: web.Request) -> web.StreamResponse:
            answer = refused(request)
            return answer if answer is not None else await streams.serve(request)
        app.router.add_get("/events", serve_events)
    if unmet is not None:
        def ready(_: web.Request) -> web.Response:
            body = unmet()
            return web.json_response(body, status=200 if not body["unmet"] else 503)
        app.router.add_get("/readyz", guarded(ready, probe=True))
    return app


def _metrics(metrics: Callable[[str], tuple[bytes, str]], request: web.Request) -> web.Response:
    """/metrics in the format the scraper's Accept header asks for."""
    body, content_type = metrics(request.headers.get("Accept", ""))
    return web.Response(body=body, headers={"Content-Type": content_type})


def _add_pages(app: web.Application, page: Callable[[str, Mapping[str, str]], Awaitable[tuple[int, str]]],
               script: str, refuse: Callable[[web.Request], web.Response | None]) -> None:
    """The web view's routes: `/` and a page per service node, `/sn/<key>`."""
    headers = page_headers(script)

    async def serve_page(request: web.Request) -> web.Response:
        refused = refuse(request)
        if refused is not None:
            return refused
        # Read-only, its one script pinned, never framed: a page on the admin port must not
        # become a way to act on it (clickjacking) or to load anything from elsewhere.
        status, html = await page(request.path, request.query)
        return web.Response(status=status, text=html, content_type="text/html", headers=headers)
    app.router.add_get("/", serve_page)
    app.router.add_get("/sn/{pubkey}", serve_page)
