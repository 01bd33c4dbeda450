"""The container's HEALTHCHECK: liveness, GET /healthz on the admin port (200 while the daemon
serves). Not /readyz: a node that syncs or waits for its registration is alive, and an
orchestrator restarts a container it finds unhealthy. Sends the admin RPC's cookie
(`/data/rpc.cookie`, `__cookie__:<hex>`) as HTTP Basic auth when the daemon wrote one.
SNODE_HEALTH_PORT: the admin port, when --rpc-admin moves it off 9231 (`docker run -e`).
Exit 0 healthy, 1 not."""

import base64
import os
import sys
import urllib.request

port = os.environ.get("SNODE_HEALTH_PORT", "9231")
request = urllib.request.Request(f"http://127.0.0.1:{port}/healthz")
try:
    with open("/data/rpc.cookie", encoding="ascii") as cookie:
        login = cookie.read().strip()
    request.add_header("Authorization", "Basic " + base64.b64encode(login.encode()).decode())
except OSError:
    pass  # no cookie: a loopback-only admin RPC, or a daemon older than cookies
try:
    with urllib.request.urlopen(request, timeout=4) as answer:
        sys.exit(0 if answer.status == 200 else 1)
except Exception as err:  # noqa: BLE001 (any failure is "unhealthy", said in one line)
    print(f"healthz: {err}", file=sys.stderr)
    sys.exit(1)
