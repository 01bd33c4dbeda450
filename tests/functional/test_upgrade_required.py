"""A node that does not know a fork, on regtest with real daemons (issue #34 item 4,
docs/UPGRADES.md): started without `--test-fork v2@H` while two peers have it, it learns of v2
from their fork announcements, says UPGRADE REQUIRED with the fork and height in its status line,
get_info, /readyz, /metrics and --notify, stops at H-1 keeping v2's blocks as "cannot validate
yet" and its peers (nobody banned), and restarted with the schedule reaches the tip with no
reindex and no command."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from snode.net import protocol as P
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    narrator,
    next_loopback_ip,
    scaled,
    snode_cli,
    sync_blocks,
    wait_until,
)
from tests.functional.hostile import assert_serving, pong
from tests.functional.p2p import FakePeer
from tests.functional.sn_helpers import notified, notify_script

log = narrator(__name__)
H = 6
"""The height v2 is scheduled at on the upgraded nodes."""


def _get(node, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{node.ip}:{node.rpc_port}{path}", timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def test_a_node_on_the_old_schedule_stops_at_the_fork_and_goes_on_once_restarted_with_it(nodes, tmp_path):
    script, out = notify_script(tmp_path)
    up1 = nodes.add(extra_args=[f"--test-fork=v2@{H}"])
    up2 = nodes.add(extra_args=[f"--test-fork=v2@{H}"])
    old = nodes.add(extra_args=[f"--notify={script}"])
    log.info("The old-schedule node connects to two upgraded ones, which announce v2 at %d", H)
    connect_nodes(up2, up1)
    connect_nodes(old, up1)
    connect_nodes(old, up2)
    wait_until(lambda: len((old.get_info().get("upgrade_required") or {}).get("known_by", [])) >= 1, timeout=30,
               what="the old node to learn of v2 from its peers")
    assert_equal(old.get_info()["upgrade_required"]["confirmed"], False,
                 "announcements alone (peers' words: a warning, never a stop)")
    info = old.get_info()["upgrade_required"]
    assert_equal((info["fork"], info["height"], info["stopped"]), ("v2", H, False), "what the old node learnt")
    assert "snoded/" in info["known_by"][0], info
    assert f"UPGRADE REQUIRED: fork v2 at height {H}" in old.get_info()["status_line"], old.get_info()["status_line"]
    assert_equal(_get(old, "/readyz")[0], 200, "readiness before the fork height")
    log.info("The upgraded nodes show v2 as their next fork, with readiness, in get_info and snode-cli status")
    summary = f"fork v2 at {H} (in {H - 1} blocks): 0 of 0 active SNs ready; this node: ready"
    assert_equal(up1.get_info()["next_fork"]["summary"], summary, "the upgraded node's next fork")
    shown = snode_cli(up1, "status")
    assert summary in shown.stdout, shown.stdout + shown.stderr
    assert_equal(old.get_info()["next_fork"], None, "the old node's next fork (its schedule has none)")
    log.info("Its operator hears it through --notify")
    wait_until(lambda: any(e.get("SNODE_EVENT") == "upgrade_required" for e in notified(out)), timeout=30,
               what="the upgrade_required event")
    event = next(e for e in notified(out) if e["SNODE_EVENT"] == "upgrade_required")
    assert_equal((event["SNODE_STATE"], event["SNODE_HEIGHT"]), ("v2", str(H)), "the event's fork and height")

    log.info("The upgraded nodes make blocks up to H+2; the old one follows to H-1 and stops there")
    up1.generate_blocks(blocks=H - 1)
    sync_blocks([up1, up2, old])
    up1.generate_blocks(blocks=3)
    sync_blocks([up1, up2])
    wait_until(lambda: old.get_info()["upgrade_required"]["pending_blocks"] >= 1, timeout=30,
               what="the old node to keep block H")
    info = old.get_info()
    assert_equal(info["height"], H - 1, "the old node's height")
    assert_equal(info["upgrade_required"]["stopped"], True, "stopped")
    assert f"UPGRADE REQUIRED: fork v2 at height {H} (stopped at {H - 1})" in info["status_line"], info["status_line"]
    status, body = _get(old, "/readyz")
    assert_equal(status, 503, "readiness from the fork height")
    assert any(f"upgrade required: fork v2 starts at height {H}" in u for u in json.loads(body)["unmet"]), body
    metrics = _get(old, "/metrics")[1]
    assert 'snode_upgrade_required{fork="v2"} 1.0' in metrics, metrics
    assert f"snode_upgrade_fork_height {float(H)}" in metrics
    log.info("It keeps its peers, and nobody banned anybody")
    assert_equal(len(old.get_peers()["peers"]), 2, "the old node's peers")
    for node in (up1, up2, old):
        assert "banned" not in node.stderr_text(), node.log_tail()
        assert "invalid block" not in node.stderr_text(), node.log_tail()

    log.info("Restarted on its old schedule past the fork, it still connects: it announces v2 as its next fork")
    old.stop()
    old.start()
    assert_equal(old.get_info()["upgrade_required"]["stopped"], True, "what it learnt, after a restart")
    connect_nodes(old, up1)
    assert "dropping peer" not in up1.stderr_text() + old.stderr_text(), old.log_tail()
    log.info("Restarted with the schedule, it goes on from H-1 with the blocks it kept, before any peer")
    old.stop()
    old.start([f"--test-fork=v2@{H}"])
    wait_until(lambda: old.get_info()["height"] == H + 2, timeout=30, what="the kept blocks to be adopted")
    assert "reindex" not in old.stderr_text()
    log.info("and stays with the network's tip")
    up1.generate_blocks(blocks=1)
    old.add_peer(address=f"{up1.ip}:{up1.p2p_port}")
    sync_blocks([up1, old])
    info = old.get_info()
    assert_equal((info["height"], info["upgrade_required"]), (H + 3, None), "the restarted node")
    assert "UPGRADE REQUIRED" not in info["status_line"], info["status_line"]


def test_a_peer_that_streams_fork_announcements_is_heard_for_its_first(nodes):
    """ForkStatus is sent once, after the handshake (`protocol.ForkStatus`): a stranger sending
    one made-up height after another is heard for the first alone. The upgrade watch once took
    each as a new fork (a WARNING, and its file written and fsynced on the event loop, each time),
    and four made-up heights filled its places for good, shutting out the real fork's proofs."""
    node = nodes.add()
    peer = FakePeer(node, source_ip=next_loopback_ip())
    try:
        peer.handshake()
        deadline = time.monotonic() + scaled(10)
        status = None
        while status is None and time.monotonic() < deadline:
            message = peer.receive()
            status = message if isinstance(message, P.ForkStatus) else None
        assert status is not None, "the node sent no ForkStatus after the handshake"
        first = 1_000_000
        for i in range(200):
            peer.send(P.ForkStatus(status.fork_hash, first - i))
        log.info("200 ForkStatus of made-up heights sent on one connection; a ping answered after them")
        pong(peer, 7)
        info = node.get_info()["upgrade_required"]
        assert info is not None and info["height"] == first and not info["confirmed"], info
        saved = json.loads(next(node.data_dir.rglob("upgrade.json")).read_text())
        assert [fork["height"] for fork in saved] == [first], saved
    finally:
        peer.close()
    assert_serving(node)
