"""The admin port's web view in headless Chromium, driven over the DevTools protocol (issues #14
item 10 and #24 item 13): the page a real browser renders shows exactly the service nodes
`get_service_nodes` returns and the last blocks `get_block` returns (producer, round, signatures
k/n, checkpointed); every key is whole and its copy button copies it; the page follows /events
without a reload; a page per service node shows its contributors, fee, unlock height, rewards
(each one a block whose coinbase paid it) and state changes. It filters and sorts by links, keeps
its pinned-script policy and the admin port's Host check. The browser's EventSource is tested
against /events itself. A screenshot of every page is kept when a test fails
(build/artifacts/browser/), and one of the main page always (build/artifacts/web-view.png).

Run by `make browser-test` (which installs Debian's chromium when missing) and by `.ci/run`.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from snode.core.blocks import Block
from snode.core.encoding import decode
from snode.core.registration import sign_registration
from snode.core.transactions import Reservation
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST
from tests.functional.browser import ARTIFACTS, Browser, browser  # noqa: F401  (fixture)
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    send_spend,
    sync_blocks,
    wait_until,
)
from tests.functional.sn_helpers import POOL_MIN, fund_and_unlock, record, registered_solo

pytestmark = pytest.mark.browser
log = narrator(__name__)

ROWS = "[...document.querySelectorAll('#service-nodes tr[data-pubkey]')].map(r => ({...r.dataset}))"
BLOCKS = "[...document.querySelectorAll('#blocks tr[data-height]')].map(r => ({...r.dataset}))"
KEYS = "[...document.querySelectorAll('code.key')].map(k => k.textContent)"


def _rows(browser: Browser, url: str) -> list[dict[str, str]]:  # noqa: F811
    browser.goto(url)
    rows: list[dict[str, str]] = browser.eval(ROWS)
    return rows


def _check_blocks(browser: Browser, node: Any) -> None:  # noqa: F811
    """The page's last blocks are get_block's: producer, round, signatures k/n, checkpointed."""
    shown = browser.eval(BLOCKS)
    top = int(shown[0]["height"])
    assert [int(b["height"]) for b in shown] == list(range(top, top - len(shown), -1)), "newest first, no gap"
    for row in shown:
        block = node.get_block(height=int(row["height"]))
        signatures = f"{len(block['validators'])}/{block['validator_count']}" if block["validator_count"] else "-"
        assert_equal((row["producer"], int(row["round"]), row["signatures"], row["checkpointed"]),
                     (block["producer"], block["round"], signatures, str(block["checkpointed"]).lower()))


def _copies_the_whole_key(browser: Browser, origin: str, pubkey: str) -> None:  # noqa: F811
    browser.send("Browser.grantPermissions", origin=origin,
                 permissions=["clipboardReadWrite", "clipboardSanitizedWrite"])
    browser.send("Emulation.setFocusEmulationEnabled", enabled=True)
    browser.eval(f"[...document.querySelectorAll('code.key')].find(k => k.textContent === '{pubkey}')"
                 ".nextElementSibling.click()")
    wait_until(lambda: browser.eval("navigator.clipboard.readText()") == pubkey, timeout=30,
               what="the whole key in the clipboard")


def test_the_web_view_shows_the_chain_and_the_nodes_and_follows_events(nodes, browser):  # noqa: F811
    log.info("A hub, an active service node, and an open pool node awaiting contributions")
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    pool_op = key_from_label("web pool op")
    fund_and_unlock(hub, {pool_op.public: POOL_MIN + COIN})
    pool_key = key_from_label("web pool sn")
    send_spend(hub, pool_op, [], sign_registration(pool_key, REGTEST, 50_000, (Reservation(pool_op.public, POOL_MIN),),
                                                    int(time.time()) + REGTEST.registration_validity))
    pubkey = registered_solo(hub, sn, "web op", until="payable")
    origin = f"http://{sn.ip}:{sn.rpc_port}"

    log.info("Chromium renders the page; its rows are get_service_nodes' records, every key whole")
    rows = _rows(browser, origin + "/")
    expected = {r["service_node_pubkey"]: r for r in sn.get_service_nodes()["service_node_states"]}
    assert_equal(sorted(row["pubkey"] for row in rows), sorted(expected))
    for row in rows:
        rec = expected[row["pubkey"]]
        assert_equal((row["status"], int(row["contributors"]), int(row["staked"])),
                     (rec["status"], len(rec["contributors"]), rec["total_contributed"]))
    assert {row["status"] for row in rows} == {"Active", "Await"}
    keys = browser.eval(KEYS)
    assert {pubkey, pool_key.public.hex()} <= set(keys) and all(len(k) == 64 for k in keys), keys
    log.info("The last blocks are get_block's; a copy button copies a whole key")
    _check_blocks(browser, sn)
    _copies_the_whole_key(browser, origin, pool_key.public.hex())

    log.info("Two blocks later the page shows them, from /events, without a reload")
    wait_until(lambda: browser.eval("document.body.dataset.live") == "yes", timeout=30, what="the page live")
    browser.eval("window.samePage = true")
    hub.generate_blocks(blocks=2)
    sync_blocks([hub, sn])
    height = sn.get_info()["height"]
    wait_until(lambda: browser.eval("document.getElementById('height').textContent") == str(height),
               timeout=30, what=f"height {height} on the page")
    assert browser.eval("window.samePage") is True, "updated in place, not reloaded"
    wait_until(lambda: int(browser.eval(BLOCKS)[0]["height"]) == height, timeout=30, what="the new blocks listed")
    _check_blocks(browser, sn)

    log.info("Filter by status and sort by stake with the page's links")
    assert_equal([row["pubkey"] for row in _rows(browser, origin + "/?status=Await")], [pool_key.public.hex()])
    assert_equal([int(row["staked"]) for row in _rows(browser, origin + "/?sort=staked&order=desc")],
                 sorted((r["total_contributed"] for r in expected.values()), reverse=True))

    log.info("Its own page: contributors and stakes, fee, unlock, rewards paid by coinbases, activation")
    browser.goto(f"{origin}/sn/{pubkey}")
    rec = record(sn, pubkey)
    assert_equal([int(a) for a in browser.eval("[...document.querySelectorAll('#contributors tr[data-amount]')]"
                                               ".map(r => r.dataset.amount)")],
                 [c["amount"] for c in rec["contributors"]])
    card = browser.eval("document.getElementById('service-node').innerText")
    assert "none requested" in card and f"{rec['operator_fee'] / 10_000:g} %" in card, card
    changes = browser.eval(
        "[...document.querySelectorAll('#state-changes tr[data-height]')].map(r => ({...r.dataset}))")
    assert_equal(changes[-1], {"height": str(rec["activation_height"]), "change": "activate",
                               "reason": "first_uptime_proof"})
    rewards = [int(h) for h in browser.eval(
        "[...document.querySelectorAll('#rewards tr[data-height]')].map(r => r.dataset.height)")]
    operator = key_from_label("web op").public
    assert rewards, "a payable node with the only reward slot was paid"
    for h in rewards:
        coinbase = decode(bytes.fromhex(sn.get_block(height=h)["block_hex"]), Block).transactions[0]
        assert coinbase.outputs[0].owner == operator, h
    assert_equal(browser.eval("document.querySelectorAll('code.key').length"), 3,
                 "its key, the operator, the contributor")

    log.info("Headers: the one script pinned by hash, connections to this origin only, never framed")
    status, headers, _ = sn.rpc.raw("", method="GET", path="/")
    policy = headers["content-security-policy"]
    assert status == 200 and headers["x-frame-options"] == "DENY" and "default-src 'none'" in policy
    assert "script-src 'sha256-" in policy and "connect-src 'self'" in policy and "unsafe-inline' ;" not in policy
    assert_equal(sn.rpc.raw("", method="GET", path="/sn/" + "00" * 32)[0], 404)
    assert_equal(sn.rpc.raw("", method="GET", path="/", headers={"Host": "evil.example"})[0], 403)

    log.info("Save a screenshot of the main page as a test artifact")
    browser.goto(origin + "/")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(browser.screenshot(), ARTIFACTS / "web-view.png")
    assert (ARTIFACTS / "web-view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "a PNG screenshot"


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
