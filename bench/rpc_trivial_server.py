"""The ceiling for `rpc_bench`: a trivial aiohttp JSON-RPC handler on the daemon's event loop.

`python bench/rpc_trivial_server.py HOST PORT` serves POST /json_rpc: it reads the body, decodes
the JSON call, and answers a fixed small result with the call's id (msgspec both ways, like the
daemon). No middleware, no method table, no access log. It runs on `snode.app.runtime.run_loop`,
so it gets uvloop exactly when the daemon does. Prints `ready` once listening; stops on SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import msgspec
from aiohttp import web

from snode.app.runtime import run_loop

RESULT = {"height": 0, "status": "OK"}
_encoder = msgspec.json.Encoder()


async def json_rpc(request: web.Request) -> web.Response:
    """The fixed answer, with the caller's id."""
    call: Any = msgspec.json.decode(await request.read())
    req_id = call.get("id") if isinstance(call, dict) else None
    body = _encoder.encode({"jsonrpc": "2.0", "id": req_id, "result": RESULT})
    return web.Response(body=body, content_type="application/json")


async def serve(host: str, port: int) -> int:
    """Serve until SIGTERM or SIGINT."""
    app = web.Application()
    app.router.add_post("/json_rpc", json_rpc)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.TCPSite(runner, host, port, shutdown_timeout=1.0).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print("ready", flush=True)
    await stop.wait()
    await runner.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(run_loop(serve(sys.argv[1], int(sys.argv[2]))))
