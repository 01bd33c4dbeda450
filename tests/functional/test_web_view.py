"""The admin port's web view in headless Chromium (issue #14, item 10): the page a real browser
renders shows exactly the service nodes `get_service_nodes` returns, with their status,
contributors and stake; it filters and sorts by links, holds no script, and keeps the admin
port's Host check. A screenshot is saved as a test artifact (build/artifacts/web-view.png).

Run by `make browser-test` (which installs Debian's chromium when missing) and by `.ci/run`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from snode.core.registration import sign_registration
from snode.core.transactions import Reservation
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.browser import ARTIFACTS, browser, chromium  # noqa: F401  (fixture)
from tests.functional.framework import (
    assert_equal, connect_nodes, narrator, scaled, send_spend, sync_blocks, wait_until,
)
from tests.functional.sn_helpers import POOL_MIN, SOLO, fund_and_unlock, mine_until, record, register

pytestmark = pytest.mark.browser
log = narrator(__name__)

def _run_chromium(args: list[str], profile: Path) -> str:
    """Headless Chromium to completion; stopped by its process group if it hangs."""
    proc = subprocess.Popen(
        [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=scaled(60))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the browser and its helpers, by our child's group
        proc.communicate()
        raise AssertionError("chromium did not finish within 60 s") from None
    return out


class Rows(HTMLParser):
    """The service-node rows of the rendered DOM: their data-* attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "tr" and "data-pubkey" in found:
            self.rows.append(found)
        if tag == "script":
            self.scripts += 1


def _rendered(url: str, profile: Path) -> Rows:
    parser = Rows()
    parser.feed(_run_chromium(["--dump-dom", url], profile))
    return parser


def test_the_web_view_shows_what_get_service_nodes_returns(nodes, tmp_path):
    log.info("A hub, an active service node, and an open pool node awaiting contributions")
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    operator, pool_op = key_from_label("web op"), key_from_label("web pool op")
    fund_and_unlock(hub, {operator.public: SOLO + COIN, pool_op.public: POOL_MIN + COIN})
    register(sn, hub, operator, SOLO)
    pool_key = key_from_label("web pool sn")
    send_spend(hub, pool_op, [], sign_registration(pool_key, REGTEST, 50_000, (Reservation(pool_op.public, POOL_MIN),),
                                                    int(time.time()) + REGTEST.registration_validity))
    hub.generate_blocks(blocks=1)
    pubkey = sn.get_service_node_key()["service_node_pubkey"]
    mine_until(hub, lambda: record(hub, pubkey)["active"], timeout=60, what="the node active")
    sync_blocks([hub, sn])
    url = f"http://{sn.ip}:{sn.rpc_port}/"

    log.info("Headless Chromium renders the page; its rows are get_service_nodes' records")
    page = _rendered(url, tmp_path / "profile")
    expected = {r["service_node_pubkey"]: r for r in sn.get_service_nodes()["service_node_states"]}
    assert_equal(sorted(row["data-pubkey"] for row in page.rows), sorted(expected))
    for row in page.rows:
        rec = expected[row["data-pubkey"]]
        assert_equal((row["data-status"], int(row["data-contributors"]), int(row["data-staked"])),
                     (rec["status"], len(rec["contributors"]), rec["total_contributed"]))
    assert {row["data-status"] for row in page.rows} == {"Active", "Await"}
    assert page.scripts == 0, "the page works without JavaScript"

    log.info("Filter by status and sort by stake with the page's links")
    awaiting = _rendered(url + "?status=Await", tmp_path / "profile")
    assert_equal([row["data-pubkey"] for row in awaiting.rows], [pool_key.public.hex()])
    by_stake = _rendered(url + "?sort=staked&order=desc", tmp_path / "profile")
    assert_equal([int(row["data-staked"]) for row in by_stake.rows], [SOLO, POOL_MIN])

    log.info("This node's card shows its status and the network's view of its proof")
    raw = sn.rpc.raw("", method="GET", path="/")
    html = raw[2].decode()
    assert raw[0] == 200 and "accepted by the network" in html and 'class="Active">Active' in html
    assert raw[1]["x-frame-options"] == "DENY" and "default-src 'none'" in raw[1]["content-security-policy"]
    status, _, _ = sn.rpc.raw("", method="GET", path="/", headers={"Host": "evil.example"})
    assert_equal(status, 403)

    log.info("Save a screenshot as a test artifact")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "web-view.png"
    shot.unlink(missing_ok=True)
    _run_chromium([f"--screenshot={shot}", "--window-size=1280,800", url], tmp_path / "profile")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "a PNG screenshot"


LISTEN = """
window.got = [];
window.source = new EventSource('/events');
for (const kind of ['block', 'missed']) {
  source.addEventListener(kind, e => got.push([kind, e.lastEventId, JSON.parse(e.data)]));
}
true
"""


def test_a_browsers_event_source_gets_named_events_and_reconnects_by_itself(nodes, browser):  # noqa: F811
    node = nodes.add()
    log.info("Chromium's EventSource on the admin port's origin, listening for 'block' events")
    browser.goto(f"http://{node.ip}:{node.rpc_port}/healthz")
    browser.eval(LISTEN)
    wait_until(lambda: browser.eval("source.readyState") == 1, timeout=30, what="the stream open")
    node.generate_blocks(blocks=2)
    wait_until(lambda: len(browser.eval("got")) >= 2, timeout=30, what="two block events in the browser")
    got = browser.eval("got")
    assert_equal([(kind, body["height"]) for kind, _, body in got], [("block", 1), ("block", 2)])
    last_id = got[-1][1]
    assert last_id.isdigit(), got

    log.info("The daemon restarts: the browser reconnects by itself, sending Last-Event-ID %s", last_id)
    node.stop()
    node.start()
    wait_until(lambda: len(browser.eval("got")) >= 3, timeout=60, what="the browser reconnected")
    kind, _, body = browser.eval("got")[2]
    assert_equal((kind, body["after"]), ("missed", int(last_id)), "the daemon got the browser's Last-Event-ID")
    node.generate_blocks(blocks=1)
    wait_until(lambda: browser.eval("got.length") >= 4, timeout=30, what="a block after the reconnect")
    assert_equal([g[2]["height"] for g in browser.eval("got")[3:]], [3])
