"""A rolling upgrade on a real network (issue #34 item 8, docs/UPGRADES.md): a devnet of 12
service nodes producing blocks schedules fork v2 60 blocks ahead (devnet blocks are 2 s apart:
about 2 minutes), and its nodes are restarted with the new schedule one by one while the chain
goes on, each down for a few seconds, well inside the participation grace (60 s); one service
node is left on the old schedule. Shown: the rolling restarts cost no failed round beyond the
ones of the restarted leaders themselves; block H is version 2 with a state root; the old node
stops at H-1 saying UPGRADE REQUIRED with the fork and height, its proofs are refused and it is
decommissioned `outdated_software`, not deregistered; restarted with the schedule it reaches the
tip with no reindex and is recommissioned. Also: three observers killed with SIGKILL when their
tips are H-1, H and H+1 agree on the network's tip once restarted; a fresh node syncs from
genesis across H; a transaction signed for v2 is refused before H and one signed for v1 after it,
each with its reason; a fresh node on the old schedule is refused after H in one line, not
banned (the old service node, connected before H, kept its peers).
A second, short test makes a reorganisation of 2 blocks across H between two halves of a regtest
chain (a partitioned half of the devnet would be minutes of backstop rounds).

`make upgrade-test` runs it (marker `upgrade`, outside `make test`); .ci/run runs that target.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest

from snode.core.blocks import Block
from snode.core.encoding import decode, encode
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_spend
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, REGTEST, V1, V2, ForkRules
from tests.functional.figures import write_figures
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    faucet_key,
    narrator,
    scaled,
    spendable_outputs,
    sync_blocks,
    wait_until,
)
from tests.functional.sn_helpers import SnNet, record

log = narrator(__name__)
COUNT = 12
AHEAD = 60
"""How many blocks ahead of the tip v2 is scheduled (devnet: 2 s a block, about 2 minutes)."""
SPACING = 3
"""Blocks the chain makes between one restart and the next (the whole roll: about 36 blocks)."""
RESTART_SLACK = 2
"""Failed rounds a restart may cost: the rounds its node leads while it is down or catching up
(a node down ~5 s misses at most two or three blocks' rounds, and leads one of them at most)."""

pytestmark = [pytest.mark.upgrade, pytest.mark.timeout(int(scaled(900)))]


def _header(node: Any, height: int) -> Any:
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block).header


def _failed_rounds(node: Any, low: int, high: int) -> int:
    """Failed rounds of blocks low..high: a block made in round r follows r failed rounds."""
    return sum(node.get_block(height=h)["round"] for h in range(low, high + 1))


def _restart(node: Any, fork: str, peers: list[Any], watcher: Any) -> float:
    """Stop `node`, start it with `fork`, connect it to `peers` and wait until it has the
    watcher's tip again; the seconds it was away."""
    began = time.monotonic()
    assert_equal(node.stop(), 0, f"node{node.index}'s exit code")
    node.extra_args.append(fork)
    node.start()
    for peer in peers:
        connect_nodes(node, peer)
    wait_until(lambda: node.get_info()["height"] >= watcher.get_info()["height"], timeout=60,
               what=f"node{node.index} back at the tip")
    return time.monotonic() - began


def _roll(net: SnNet, fork: str, old: Any, observers: list[Any]) -> list[float]:
    """Restart the authority and every service node but `old` with `fork`, one at a time (the
    authority redials every node, a service node the authority)."""
    away = []
    for node in [net.authority, *net.sns]:
        if node is old:
            continue
        peers = [*net.sns, *observers] if node is net.authority else [net.authority]
        height = old.get_info()["height"]
        away.append(_restart(node, fork, peers, old))
        log.info("node%d restarted with %s: away %.1f s; tip %d", node.index, fork, away[-1],
                 old.get_info()["height"])
        wait_until(lambda: old.get_info()["height"] >= height + SPACING, timeout=60,  # noqa: B023
                   what=f"{SPACING} blocks after node{node.index}'s restart")
    return away


def _rolled(net: SnNet, fork: str, old: Any, observers: list[Any], start: int,
            H: int) -> tuple[list[float], int, int]:
    """`_roll`, checked: each node away less than the grace, all of them before H, no failed
    round beyond the restarts' cost, every node still active; (times away, height, failed rounds)."""
    began = time.monotonic()
    away = _roll(net, fork, old, observers)
    rolled = old.get_info()["height"]
    log.info("Rolled in %.0f s, at height %d; longest away %.1f s (participation grace %d s)",
             time.monotonic() - began, rolled, max(away), DEVNET.participation_grace)
    assert rolled < H - 1, f"the restarts took past the fork ({rolled} of {H}): schedule it further ahead"
    assert max(away) < DEVNET.participation_grace, away
    failed = _failed_rounds(old, start + 1, rolled)
    log.info("Failed rounds during the rolling restarts: %d over %d blocks", failed, rolled - start)
    assert failed <= RESTART_SLACK * len(away), (failed, len(away))
    for key in net.pubkeys:
        assert record(net.authority, key)["active"], record(net.authority, key)
    return away, rolled, failed


def _linked(a: Any, b: Any) -> None:
    """Connect a and b unless they are."""
    if not any(p["address"].startswith(b.ip + ":") for p in a.get_peers()["peers"]):
        connect_nodes(a, b)


def _kill_at(observers: list[Any], heights: list[int], network: list[Any]) -> None:
    """SIGKILL each observer the moment its tip is its height; restart it; it agrees on the tip."""
    def reached(observer: Any, height: int) -> bool:
        return bool(observer.get_info()["height"] >= height)
    for observer, height in zip(observers, heights, strict=True):
        wait_until(lambda: reached(observer, height), timeout=60,  # noqa: B023  (called at once)
                   what=f"node{observer.index} at {height}", interval=0.02)
        at = observer.get_info()["height"]
        observer.kill()
        log.info("node%d killed with SIGKILL at its tip %d (aimed at %d)", observer.index, at, height)
    for observer in observers:
        observer.start()
        connect_nodes(observer, network[0])
    sync_blocks([*network, *observers], timeout=90)


def test_a_rolling_upgrade_of_twelve_service_nodes_crosses_the_fork_without_cost(nodes, tmp_path):
    log.info("An authority and %d service nodes on a devnet with no fork scheduled", COUNT)
    net = SnNet(nodes, tmp_path, COUNT)
    net.register_all()
    wait_until(lambda: net.active(net.authority) == COUNT, timeout=180, what="all nodes active")
    wait_until(lambda: net.authority.get_info()["block_production"] == "service_nodes", timeout=90,
               what="service-node block production")
    old, old_key = net.sns[-1], net.pubkeys[-1]
    genesis = f"--genesis={tmp_path / 'genesis.json'}"
    start = net.authority.get_info()["height"]
    H = start + AHEAD
    fork = f"--test-fork=v2@{H}"
    observers = [nodes.add(network="devnet", extra_args=[genesis, fork]) for _ in range(3)]
    for observer in observers:
        connect_nodes(observer, net.authority)

    log.info("Fork v2 scheduled at %d (%d blocks ahead): restart the authority and %d service nodes with it, "
             "one by one; node%d stays on the old schedule", H, AHEAD, COUNT - 1, old.index)
    away, rolled, failed = _rolled(net, fork, old, observers, start, H)

    _refused(net, V2, f"is signed for fork v2, which starts at height {H}; this chain is on v1: sign it again")
    log.info("The old node learns of v2 from its peers and says so before the height (a warning: peers' "
             "announcements alone never stop a node)")
    for peer in net.sns[:2]:
        _linked(old, peer)
    wait_until(lambda: (old.get_info().get("upgrade_required") or {}).get("fork") == "v2", timeout=60,
               what="the old node to learn of v2")
    assert f"UPGRADE REQUIRED: fork v2 at height {H}" in old.get_info()["status_line"], old.get_info()["status_line"]
    _kill_at(observers, [H - 1, H, H + 1], [net.authority])
    upgraded = [net.authority, *net.sns[:-1]]
    wait_until(lambda: net.authority.get_info()["height"] >= H + 3, timeout=120, what=f"block {H + 3}")
    before = _failed_rounds(net.authority, rolled + 1, H - 1)
    log.info("Failed rounds from the end of the restarts to %d: %d", H - 1, before)
    assert failed + before <= RESTART_SLACK * len(away), (failed, before, len(away))

    log.info("Block %d is version 2 with a state root; block %d is version 1", H, H - 1)
    assert_equal(_header(net.authority, H - 1).version, 1, "block H-1's version")
    header = _header(net.authority, H)
    assert_equal(header.version, 2, "block H's version")
    assert len(header.state_root) == 32 and any(header.state_root), header.state_root
    _old_node_stops(old, H)
    out = _old_node_decommissioned(net, old, old_key)
    after = _failed_rounds(net.authority, H, out)
    log.info("Failed rounds from %d to the old node's decommission at %d: %d (the rounds it leads, as a node "
             "that is down)", H, out, after)
    assert after <= 1 + (out - H) // 4, (after, out - H)
    _old_node_upgraded(net, old, old_key, H)
    _fresh_nodes(nodes, net, genesis, fork, H)
    _refused(net, V1, f"is signed for fork v1; this chain is on v2 from height {H}: sign it again")
    sync_blocks([*upgraded, old, *observers], timeout=90)
    write_figures("rolling upgrade (12 SNs)", {"restarts": len(away), "max_away_s": round(max(away), 1),
                                              "failed_rounds_rolling": failed, "failed_rounds_to_fork": before,
                                              "failed_rounds_old_node_down": after})


def _old_node_stops(old: Any, H: int) -> None:
    log.info("The old node stops at %d and says UPGRADE REQUIRED with the fork and height", H - 1)
    wait_until(lambda: (old.get_info()["upgrade_required"] or {}).get("stopped"), timeout=60,
               what="the old node stopped")
    info = old.get_info()
    assert_equal(info["height"], H - 1, "the old node's height")
    assert_equal((info["upgrade_required"]["fork"], info["upgrade_required"]["height"]), ("v2", H), "what it says")
    assert f"UPGRADE REQUIRED: fork v2 at height {H} (stopped at {H - 1})" in info["status_line"], info["status_line"]
    assert old.get_peers()["peers"], "the old node kept no peer"


def _old_node_decommissioned(net: SnNet, old: Any, old_key: str) -> int:
    log.info("Its proofs are refused as outdated; the quorum decommissions it outdated_software, not deregistered")
    wait_until(lambda: not record(net.authority, old_key)["active"], timeout=120, what="the old node decommissioned")
    assert_equal(record(net.authority, old_key)["last_decommission_reason"], "outdated_software", "the reason")
    assert "refuse this snoded's proofs as outdated" in old.get_info()["status_line"], old.get_info()["status_line"]
    return int(record(net.authority, old_key)["last_state_change_height"])


def _old_node_upgraded(net: SnNet, old: Any, old_key: str, H: int) -> None:
    log.info("Restarted with the schedule, it reaches the tip with no reindex and is recommissioned")
    assert_equal(old.stop(), 0, "the old node's exit code")
    old.extra_args.append(f"--test-fork=v2@{H}")
    old.start()
    connect_nodes(old, net.authority)
    sync_blocks([net.authority, old], timeout=90)
    assert "reindex" not in old.stderr_text(), old.log_tail()
    info = old.get_info()
    assert info["upgrade_required"] is None and "UPGRADE REQUIRED" not in info["status_line"], info
    wait_until(lambda: record(net.authority, old_key)["active"], timeout=120, what="the old node recommissioned")
    assert record(net.authority, old_key)["decommission_count"] == 1, record(net.authority, old_key)
    assert_equal(_header(old, H).version, 2, "block H on the upgraded old node")


def _fresh_nodes(nodes: Any, net: SnNet, genesis: str, fork: str, H: int) -> None:
    log.info("A fresh node with the schedule syncs from genesis across %d", H)
    fresh = nodes.add(network="devnet", extra_args=[genesis, fork])
    connect_nodes(fresh, net.authority)
    sync_blocks([net.authority, fresh], timeout=90)
    assert_equal(fresh.get_block(height=H)["hash"], net.authority.get_block(height=H)["hash"], "block H's hash")
    assert_equal(fresh.stop(), 0, "the fresh node's exit code")
    log.info("A fresh node on the old schedule is refused after %d in one line, not banned", H)
    stranger = nodes.add(network="devnet", extra_args=[genesis])
    stranger.add_peer(address=f"{net.authority.ip}:{net.authority.p2p_port}")
    line = (f"peer is on fork v1 with no fork scheduled; this node is on fork v2 from height {H}: the peer "
            "does not know v2 (an older snoded)")
    wait_until(lambda: line in net.authority.stderr_text(), timeout=30, what="the refusal on the authority")
    refusals = [x for x in net.authority.stderr_text().splitlines() if f"dropping peer {stranger.ip}:" in x]
    assert refusals and all(line in x for x in refusals), refusals
    assert "Traceback" not in net.authority.stderr_text(), net.authority.log_tail()
    assert "banned" not in net.authority.stderr_text().split(line, 1)[1], net.authority.log_tail()
    assert not any(p["address"].startswith(stranger.ip + ":") for p in net.authority.get_peers()["peers"])
    assert_equal(stranger.stop(), 0, "the stranger's exit code")


def _refused(net: SnNet, signed_for: ForkRules, reason: str) -> None:
    log.info("A transaction signed for %s is refused with its reason", signed_for.name)
    op = net.operators[0]
    tx = build_spend(spendable_outputs(net.authority, op), op, [TxOut(op.public, 1000)], Transfer(), DEVNET,
                     signed_for=signed_for)
    assert_raises_rpc_error(None, reason, net.authority.send_raw_transaction, tx_hex=encode(tx).hex())


def test_a_reorganisation_of_two_blocks_across_the_fork_on_regtest(nodes):
    """Two regtest halves of one chain at H-1: one mines H and H+1 (with a transaction signed for
    v2), the other H to H+2; joined, the first reorganises its 2 blocks across H onto the longer
    branch, whose block H is version 2 too, and its transaction is back in its mempool."""
    H = 6
    fork = f"--test-fork=v2@{H}"
    a = nodes.add(extra_args=[fork])
    a.generate_blocks(blocks=H - 1)
    log.info("One chain to %d, copied into a second data dir: two halves that do not see each other", H - 1)
    assert_equal(a.stop(), 0, "the first half's exit code")
    b = nodes.add(extra_args=[fork], start=False)
    b.data_dir.mkdir(parents=True)
    for name in ("chain.sqlite3", "chain.sqlite3-wal"):
        if (a.data_dir / name).exists():
            shutil.copyfile(a.data_dir / name, b.data_dir / name)
    a.start()
    b.start()
    assert_equal(b.get_info()["height"], H - 1, "the second half's height")
    to = key_from_label("rolling reorg payee").public
    tx = build_spend(spendable_outputs(a, faucet_key()), faucet_key(), [TxOut(to, COIN)], Transfer(), REGTEST,
                     signed_for=V2)
    txid = a.send_raw_transaction(tx_hex=encode(tx).hex())["txid"]
    a.generate_blocks(blocks=2)
    assert txid in a.get_block(height=H)["tx_ids"]
    b.generate_blocks(blocks=3)
    log.info("Joined: the first half reorganises blocks %d and %d onto the other's %d..%d", H, H + 1, H, H + 2)
    connect_nodes(a, b)
    sync_blocks([a, b])
    assert "reorganized" in a.stderr_text(), a.log_tail()
    assert_equal(a.get_info()["height"], H + 2, "the tip after the reorganisation")
    assert_equal((_header(a, H - 1).version, _header(a, H).version), (1, 2), "versions of blocks H-1 and H")
    wait_until(lambda: txid in [t["txid"] for t in a.get_mempool()["transactions"]], timeout=30,
               what="the undone v2 transaction back in the mempool")
