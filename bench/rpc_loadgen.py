"""In-Python HTTP load generator for `rpc_bench`, used when `wrk` is not installed.

`python bench/rpc_loadgen.py HOST PORT SECONDS CONNECTIONS BODY [--client raw|aiohttp]` opens
CONNECTIONS keep-alive connections, keeps one POST /json_rpc of BODY in flight on each for
SECONDS (after a half-second warm-up), and prints one JSON line:
{"requests": n, "seconds": s, "rate": n/s, "errors": e, "warmup_requests": w, "client": c}.

`raw` (the default) is a minimal HTTP/1.1 client on asyncio protocols. aiohttp's client costs
so much CPU per request that on a 2-core machine it, not the server, sets the rate, and a fast
and a slow server look alike: against the trivial server on one loaded 2-core run, raw got about
7,300 req/s, the aiohttp client 3,500, and wrk 8,400. `aiohttp` is the ClientSession variant,
kept for comparison. A response counts when its status is 200 and its body holds a JSON-RPC
`"result"`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from functools import partial
from typing import Any, cast

from snode.app.runtime import run_loop

WARMUP_S = 0.5


class _Connection(asyncio.Protocol):
    """One keep-alive connection sending the same request until the deadline."""

    def __init__(self, request: bytes, deadline: float, done: asyncio.Future[None]) -> None:
        self.request = request
        self.deadline = deadline
        self.done = done
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.ok = 0
        self.errors = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have the same methods.
        self.transport = cast(asyncio.Transport, transport)
        self.transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    length = int(line[15:])
            total = end + 4 + length
            if len(self.buffer) < total:
                return
            body = bytes(self.buffer[end + 4:total])
            del self.buffer[:total]
            if head.startswith(b"http/1.1 200") and b'"result"' in body:
                self.ok += 1
            else:
                self.errors += 1
            assert self.transport is not None
            if time.perf_counter() < self.deadline:
                self.transport.write(self.request)
            else:
                self.transport.close()
                return

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _raw_phase(host: str, port: int, seconds: float, connections: int, body: bytes) -> dict[str, Any]:
    request = (
        f"POST /json_rpc HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    deadline = started + seconds
    protocols = []
    for _ in range(connections):
        done: asyncio.Future[None] = loop.create_future()
        _, proto = await loop.create_connection(partial(_Connection, request, deadline, done), host, port)
        protocols.append(proto)
    await asyncio.wait_for(asyncio.gather(*(p.done for p in protocols)), seconds + 30)
    elapsed = time.perf_counter() - started
    ok = sum(p.ok for p in protocols)
    return {"requests": ok, "seconds": elapsed, "rate": ok / elapsed,
            "errors": sum(p.errors for p in protocols)}


async def _aiohttp_phase(host: str, port: int, seconds: float, connections: int, body: bytes) -> dict[str, Any]:
    import aiohttp

    url = f"http://{host}:{port}/json_rpc"
    headers = {"Content-Type": "application/json"}
    counts = {"ok": 0, "errors": 0}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections)) as session:
        started = time.perf_counter()
        deadline = started + seconds

        async def worker() -> None:
            while time.perf_counter() < deadline:
                async with session.post(url, data=body, headers=headers) as resp:
                    data = await resp.read()
                    counts["ok" if resp.status == 200 and b'"result"' in data else "errors"] += 1

        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    return {"requests": counts["ok"], "seconds": elapsed, "rate": counts["ok"] / elapsed,
            "errors": counts["errors"]}


async def main(host: str, port: int, seconds: float, connections: int, body: bytes, client: str) -> int:
    phase = _raw_phase if client == "raw" else _aiohttp_phase
    warmup = await phase(host, port, WARMUP_S, connections, body)
    result = await phase(host, port, seconds, connections, body)
    result["client"] = client
    result["warmup_requests"] = warmup["requests"] + warmup["errors"]
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    kind = "raw"
    if "--client" in args:
        i = args.index("--client")
        kind = args[i + 1]
        del args[i:i + 2]
    if len(args) != 5 or kind not in ("raw", "aiohttp"):
        sys.exit("usage: rpc_loadgen.py HOST PORT SECONDS CONNECTIONS BODY [--client raw|aiohttp]")
    sys.exit(run_loop(main(args[0], int(args[1]), float(args[2]), int(args[3]), args[4].encode(), kind)))
