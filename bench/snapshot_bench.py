"""A new node started from a snapshot against the same node replaying from genesis (issue #36 item 8).

Measures in one run:
- the chain: a regtest chain in the v2 era (every header carries its state root) whose state
  holds OUTPUTS unspent outputs and SERVICE_NODES registered, active service nodes
  (bench/snapshot_chain.py), built in-process and kept under the cache dir, keyed by its
  parameters (SNODE_BENCH_CACHE, default ~/.cache/snode-bench): the output says how long it took
  to build, or that it was reused;
- the source: a real `snoded --regtest --test-fork=v2@1 --snapshots` on the chain (a copy of the
  cached data dir) writes the snapshot of the highest height that is a multiple of regtest's
  `snapshot_interval` (5) and `snapshot_depth` (2) blocks below the tip, at start, as any node
  with snapshots on does (`services.snapshots`): the bench waits for it and reads the time it
  took from the source's log;
- the new node: an empty data dir holding the `key` file of the chain's service node 0, started
  with `--service-node`, the source as its priority node and only the trusted point
  (`--trusted-checkpoint HEIGHT:HASH`, the snapshot's block, read from the source): the seconds
  from its start until `get_info` says the tip's height with `target_height` 0 (target 60 s),
  until its first uptime proof is accepted (a peer, the source, acknowledged it: its own
  `get_service_nodes` record's `last_uptime_proof`; the daemon's own proof loop, which proves
  every `proof_interval` once its key is registered on its chain, after the doppelganger check's
  two proof intervals from its start; target 90 s), and its peak RSS (VmHWM, its signature
  workers apart; target under 250 MB). The backfill of the blocks below the snapshot starts once it is
  at the tip, as by default; it is not waited for;
- the same node replaying from genesis: a second empty data dir with the same key, without the
  trusted point, on the same address; the same three figures, and each time's ratio (replay /
  snapshot);
- the state root's cost a block at the tip, in-process on the built chain's last blocks: each
  applied on its parent (taken back from the stored tip with its undo record) by apply_block,
  and the root's part alone (`state_root.after_block_with_root`), against apply_block's time;
- assume-valid's sync rate against full verification: `python -m bench sync`'s daemons on a
  SYNC_BLOCKS-block chain (`--sync-blocks N`), one run, its figure printed (0: not run, as the
  smoke does).

Everything listens on 127.x addresses only; every daemon is stopped by its own pid.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from bench import daemons
from bench.daemons import P2P_PORT, Daemon, loopback_ip
from bench.report import figures_table, verdict
from bench.snapshot_chain import PARAMS, TEST_FORK_FLAG, ChainStats, build_cached, sn_key
from snode.common.data_dir import KEY_FILE, key_file_text
from snode.core.blocks import Block, block_hash
from snode.core.encoding import decode
from snode.core.genesis import genesis_state, regtest_genesis
from snode.core.state_root import after_block_with_root, current_checksum, undo_summed
from snode.core.transition import apply_block
from snode.store import DATABASE_FILE, ChainStore
from snode.store.snapshot import Snapshots

OUTPUTS: Final = 1_000_000
SERVICE_NODES: Final = 2_000
OWNERS: Final = 250_000
"""Distinct owners of the outputs (four outputs each)."""
TIP_TARGET_S: Final = 60.0
PROOF_TARGET_S: Final = 90.0
RSS_TARGET_MB: Final = 250.0
SNAPSHOT_NET: Final = daemons.BLOCKS_NET
"""The 127.x range of these daemons: the blocks benchmark's (the two never run at once)."""
POLL_S: Final = 0.2
TIMEOUT_S: Final = 900.0
"""Seconds a start (snapshot or replay) may take before the run fails."""
SNAPSHOT_WAIT_S: Final = 600.0
SYNC_BLOCKS: Final = 5_000
"""Blocks of the chain `python -m bench sync`'s daemons sync once for assume-valid's figure."""
ROOT_BLOCKS: Final = 8
"""Blocks at the tip whose state root's cost is measured."""

log: Final = partial(daemons.log, "snapshot_bench")


def cache_dir() -> Path:
    """Where built chains are kept: SNODE_BENCH_CACHE, or ~/.cache/snode-bench."""
    given = os.environ.get("SNODE_BENCH_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "snode-bench"


def snapshot_height(tip: int) -> int:
    """The height the source writes its snapshot at: the highest multiple of the interval at
    least `snapshot_depth` below the tip (`services.snapshots.due_height`)."""
    interval = PARAMS.snapshot_interval
    return (tip - PARAMS.snapshot_depth) // interval * interval


def written_in(source: Daemon, height: int) -> float | None:
    """The seconds the source's log says the snapshot of `height` took, None before it is written."""
    found = re.search(rf"wrote the snapshot of height {height} \((\d+) chunks, (\d+) bytes\) in ([\d.]+) s",
                      source.log_tail(1 << 20))
    return float(found.group(3)) if found else None


def serve(source_dir: Path, stats: ChainStats) -> tuple[Daemon, dict[str, Any]]:
    """Start the source on the chain and wait for its snapshot; it and the snapshot's figures."""
    source = Daemon(loopback_ip(SNAPSHOT_NET, 1), source_dir, name="source", log=log,
                    extra=[TEST_FORK_FLAG, "--snapshots"])
    source.start()
    info = source.wait_for_rpc()
    if info["height"] != stats.blocks or info["top_block_hash"] != stats.tip_hash:
        source.stop()
        raise RuntimeError(f"the source snoded opened the chain at height {info['height']}, not {stats.blocks}")
    height = snapshot_height(stats.blocks)
    log(f"waiting for the source's snapshot of height {height}")
    deadline = time.monotonic() + SNAPSHOT_WAIT_S
    while (took := written_in(source, height)) is None:
        if time.monotonic() > deadline:
            source.stop()
            raise RuntimeError(f"the source wrote no snapshot of height {height} in {SNAPSHOT_WAIT_S:.0f} s:\n"
                               f"{source.log_tail()}")
        source.info()  # raises if it died
        time.sleep(POLL_S)
    block = decode(bytes.fromhex(source.call("get_block", {"height": height})["block_hex"]), Block)
    (path,) = [p for p in Snapshots(source_dir).paths() if int(p.name[:10]) == height]
    size = sum(f.stat().st_size for f in path.iterdir())
    chunks = len([f for f in path.iterdir() if f.name != "manifest"])
    return source, {"height": height, "hash": block_hash(block.header).hex(), "write_s": took,
                    "bytes": size, "chunks": chunks, "source_rss_mb": source.peak_rss_mb()}


def start_node(workdir: Path, name: str, source: Daemon, stats: ChainStats, extra: list[str], *,
               check_history: bool = False) -> dict[str, Any]:
    """Start an empty service node of key 0 with `source` as its priority node and `extra`
    flags; the seconds to the tip (target_height 0) and to its first accepted proof, its peak RSS
    then; with `check_history`, then the seconds to its history verified (`_verified`)."""
    data_dir = workdir / name
    data_dir.mkdir(mode=0o700)
    key = sn_key(0)
    key_path = data_dir / KEY_FILE
    key_path.write_bytes(key_file_text(key.seed))
    key_path.chmod(0o600)
    ip = loopback_ip(SNAPSHOT_NET, 2)
    node = Daemon(ip, data_dir, name=name, log=log,
                  extra=[TEST_FORK_FLAG, "--service-node", f"--service-node-public-ip={ip}",
                         f"--add-priority-node={source.ip}:{P2P_PORT}", *extra])
    pubkey = key.public.hex()
    try:
        started = node.start()
        tip_s = proof_s = None
        deadline = started + TIMEOUT_S
        last_log = started
        while tip_s is None or proof_s is None:
            info = node.info()
            now = time.perf_counter()
            if info is not None:
                if tip_s is None and info["height"] == stats.blocks and info["target_height"] == 0:
                    tip_s = now - started
                    if info["top_block_hash"] != stats.tip_hash:
                        raise RuntimeError(f"the {name} node's tip is not the source's")
                if proof_s is None and info["height"] > 0:
                    records = node.call("get_service_nodes", {"service_node_pubkeys": [pubkey]})
                    if any(r["last_uptime_proof"] for r in records["service_node_states"]):
                        proof_s = now - started
                if now - last_log > 10:
                    download = info.get("snapshot_download") or {}
                    log(f"{name}: height {info['height']:,} after {now - started:.0f} s"
                        + (f", snapshot {download.get('chunks')}/{download.get('total_chunks')} chunks"
                           if download and not download.get("done") else ""))
                    last_log = now
            if now > deadline:
                raise RuntimeError(f"the {name} node was not at the tip with a proof accepted in {TIMEOUT_S:.0f} s "
                                   f"(tip after {tip_s} s, proof after {proof_s} s):\n{node.log_tail()}")
            time.sleep(POLL_S)
        rss = node.peak_rss_mb()
        workers = node.workers_rss_mb()
        cpu = node.cpu_seconds()
        verified_s, check_rss = _verified(node, started, deadline + TIMEOUT_S) if check_history else (None, 0.0)
        text = node.log_tail(1 << 24)
    finally:
        node.stop()
    loaded = re.search(r"loaded the snapshot of height \d+.*", text)
    checked = re.search(r"history check: done in .*", text)
    return {"tip_s": tip_s, "proof_s": proof_s, "peak_rss_mb": rss, "workers_rss_mb": workers, "cpu_s": cpu,
            "loaded": loaded.group(0) if loaded else "", "verified_s": verified_s, "check_rss_mb": check_rss,
            "checked": checked.group(0) if checked else ""}


def _verified(node: Daemon, started: float, deadline: float) -> tuple[float, float]:
    """After the first proof: the seconds from the start to `history_verified` (the backfill,
    then the replay from genesis in its child process), and the largest RSS of the daemon's
    children sampled meanwhile (the replay's process, and the signature workers), in MiB."""
    children = 0.0
    while True:
        info = node.info()
        now = time.perf_counter()
        if info is not None and info.get("history_verified"):
            return now - started, children
        children = max(children, node.workers_rss_mb())
        if now > deadline:
            raise RuntimeError(f"the node's history was not verified in {deadline - started:.0f} s:\n{node.log_tail()}")
        time.sleep(POLL_S)


def root_cost(data_dir: Path, blocks: int = ROOT_BLOCKS) -> dict[str, float]:
    """The state root's cost a block at the tip, in-process: each of the last `blocks` blocks
    applied on its parent (taken back from the stored tip by its undo record), apply_block's time
    and the root's part alone (medians, ms), and the entries each block changed."""
    doc = regtest_genesis()
    state0, block0, consensus = genesis_state(doc, PARAMS)
    store = ChainStore.open(data_dir / DATABASE_FILE, genesis_block=block0, genesis_state=state0)
    try:
        state = store.load_state()
        tips = []
        for _ in range(blocks):
            block = store.get_block(state.tip_hash)
            assert block is not None
            parent = undo_summed(state, store.get_undo(state.tip_hash))
            tips.append((parent, block))
            state = parent
    finally:
        store.close()
    apply_ms, root_ms, keys = [], [], []
    for parent, block in tips:
        t0 = time.perf_counter()
        applied, undo = apply_block(parent, block, consensus, verifier=lambda checks: -1)
        t1 = time.perf_counter()
        checksum = current_checksum(parent)
        assert checksum is not None
        after_block_with_root(PARAMS.network_id, checksum, applied, undo)
        t2 = time.perf_counter()
        apply_ms.append(1000 * (t1 - t0))
        root_ms.append(1000 * (t2 - t1))
        keys.append(len(undo.utxos) + len(undo.service_nodes) + len(undo.quorums) + len(undo.checkpoints))
    return {"apply_ms": statistics.median(apply_ms), "root_ms": statistics.median(root_ms),
            "keys": statistics.median(keys), "blocks": blocks}


def run(outputs: int = OUTPUTS, service_nodes: int = SERVICE_NODES, owners: int = OWNERS,
        sync_blocks: int = SYNC_BLOCKS, cache: Path | None = None) -> dict[str, Any]:
    """Every figure of this benchmark (see `report`)."""
    started = time.perf_counter()
    log(f"the chain: {outputs:,} unspent outputs, {service_nodes:,} service nodes")
    chain_dir, stats, built = build_cached(cache or cache_dir(), outputs=outputs, service_nodes=service_nodes,
                                           owners=owners, progress=log)
    log(("built" if built else "reused the cached chain built") + f" in {stats.build_s:.0f} s: {chain_dir}")
    with tempfile.TemporaryDirectory(prefix="snode-snapshot-bench-") as tmp:
        workdir = Path(tmp)
        shutil.copytree(chain_dir, workdir / "source")
        log("measuring the state root's cost at the tip, in-process")
        root = root_cost(workdir / "source")
        log("starting the source snoded")
        source, snap = serve(workdir / "source", stats)
        try:
            log(f"a new node with only the trusted point {snap['height']}")
            from_snapshot = start_node(workdir, "from-snapshot", source, stats,
                                       [f"--trusted-checkpoint={snap['height']}:{snap['hash']}"],
                                       check_history=True)
            log("the same node replaying from genesis")
            from_genesis = start_node(workdir, "from-genesis", source, stats, [])
        finally:
            source.stop()
    assume_valid = None
    if sync_blocks:
        from bench import sync_bench

        log(f"assume-valid against full verification: bench sync on {sync_blocks:,} blocks, one run")
        sync = sync_bench.run(blocks=sync_blocks, runs=1)["sync"]
        assume_valid = {"blocks": sync_blocks, "full": sync["blocks_per_s"],
                        "assumed": sync["assume_valid"]["blocks_per_s"], "speedup": sync["assume_valid"]["speedup"],
                        "speedup_after_start": sync["assume_valid"]["speedup_after_start"]}
    return {"chain": stats.__dict__, "built_now": built, "snapshot": snap, "from_snapshot": from_snapshot,
            "from_genesis": from_genesis, "root": root, "assume_valid": assume_valid,
            "load": os.getloadavg(), "total_s": time.perf_counter() - started}


def report(results: dict[str, Any], console: Console) -> None:
    """Print the figures of `run`, each with its target and verdict."""
    chain, snap, snapped, replay, root = (results[k] for k in ("chain", "snapshot", "from_snapshot",
                                                                "from_genesis", "root"))
    console.print()
    console.print("[bold]snapshot: a new node from the trusted point against the same node replaying from genesis[/]")
    console.print(
        f"chain: {chain['blocks']:,} blocks (v2 from block 1), {chain['utxos']:,} unspent outputs "
        f"({chain['owners']:,} owners), {chain['service_nodes']:,} service nodes ({chain['active_service_nodes']:,} "
        f"active), {chain['bytes'] / 1e6:.1f} MB; built in-process in {chain['build_s']:.0f} s"
        + ("" if results["built_now"] else " (reused from the cache)")
    )
    console.print(
        f"snapshot of height {snap['height']}: {snap['chunks']:,} chunks, {snap['bytes'] / 1e6:.1f} MB, written by "
        f"the source in {snap['write_s']:.1f} s (its log)"
    )
    table = figures_table("limit / same run")
    rows: list[tuple[str, float, float, Callable[[float], str]]] = [
        ("at the tip, get_info target_height 0", snapped["tip_s"], replay["tip_s"], lambda v: f"{v:.1f} s"),
        ("first uptime proof accepted", snapped["proof_s"], replay["proof_s"], lambda v: f"{v:.1f} s"),
    ]
    targets = (TIP_TARGET_S, PROOF_TARGET_S)
    for (what, snap_s, replay_s, fmt), target in zip(rows, targets):
        table.add_row(f"from the snapshot: {what}", fmt(snap_s), f"{target:.0f} s", f"{snap_s / target:.2f}",
                      f"<= {target:.0f} s", verdict(snap_s <= target))
        table.add_row("  from genesis (full replay), same run", fmt(replay_s), fmt(snap_s),
                      f"{replay_s / snap_s:.2f}", "(replay / snapshot)", "")
    rss = snapped["peak_rss_mb"] * 1.048576
    table.add_row("from the snapshot: peak RSS (VmHWM)", f"{snapped['peak_rss_mb']:.0f} MiB ({rss:.0f} MB)",
                  f"{RSS_TARGET_MB:.0f} MB", f"{rss / RSS_TARGET_MB:.2f}", f"< {RSS_TARGET_MB:.0f} MB",
                  verdict(rss < RSS_TARGET_MB))
    table.add_row("  from genesis (full replay), same run", f"{replay['peak_rss_mb']:.0f} MiB",
                  f"{snapped['peak_rss_mb']:.0f} MiB", f"{replay['peak_rss_mb'] / snapped['peak_rss_mb']:.2f}",
                  "(informational)", "")
    if snapped["verified_s"] is not None:
        table.add_row("from the snapshot: history backfilled and verified (replay from genesis, child process)",
                      f"{snapped['verified_s']:.1f} s", f"tip {snapped['tip_s']:.1f} s",
                      f"{snapped['verified_s'] / snapped['tip_s']:.2f}", "(informational)", "")
        table.add_row("  its children's largest RSS meanwhile (the replay's process)",
                      f"{snapped['check_rss_mb']:.0f} MiB", f"{replay['peak_rss_mb']:.0f} MiB",
                      f"{snapped['check_rss_mb'] / replay['peak_rss_mb']:.2f}", "(from genesis' peak)", "")
    table.add_row(f"state root a block at the tip ({root['keys']:.0f} keys changed, median of {root['blocks']})",
                  f"{root['root_ms']:.2f} ms", f"apply_block {root['apply_ms']:.2f} ms",
                  f"{root['root_ms'] / root['apply_ms']:.2f}", "(informational)", "")
    av = results["assume_valid"]
    if av is not None:
        table.add_row(f"assume-valid sync vs full verification (bench sync, {av['blocks']:,} blocks)",
                      f"{av['assumed']:,.0f} blocks/s", f"{av['full']:,.0f} blocks/s", f"{av['speedup']:.2f}",
                      "(informational)", "")
    console.print(table)
    if av is None:
        console.print("assume-valid: not run (--sync-blocks 0); `python -m bench sync` prints it")
    console.print(
        f"CPU: from the snapshot {snapped['cpu_s']:.1f} s, from genesis {replay['cpu_s']:.1f} s; signature workers' "
        f"RSS at the end {snapped['workers_rss_mb']:.0f} / {replay['workers_rss_mb']:.0f} MiB; the source's peak RSS "
        f"after writing the snapshot {snap['source_rss_mb']:.0f} MiB; load average "
        + ", ".join(f"{v:.2f}" for v in results["load"])
    )
    for line in (snapped["loaded"], snapped.get("checked", "")):
        if line:
            console.print(f"the new node's log: {line}", markup=False, highlight=False)
    console.print(f"snapshot benchmark took {results['total_s']:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=OUTPUTS, metavar="N",
                        help=f"unspent outputs (default {OUTPUTS:,})")
    parser.add_argument("--service-nodes", type=int, default=SERVICE_NODES, metavar="N",
                        help=f"service nodes (default {SERVICE_NODES:,})")
    parser.add_argument("--sync-blocks", type=int, default=SYNC_BLOCKS, metavar="N",
                        help=f"bench sync's chain for assume-valid's figure (default {SYNC_BLOCKS:,}; 0: not run)")
    args = parser.parse_args()
    if args.outputs < 1 or args.service_nodes < 1:
        parser.error("--outputs and --service-nodes must be at least 1")
    if args.sync_blocks and args.sync_blocks <= 2_000:
        parser.error("--sync-blocks must be 0 or more than 2,000 (bench sync's in-process replay)")
    from snode.tools.tables import make_console

    report(run(outputs=args.outputs, service_nodes=args.service_nodes, owners=args.outputs // 4,
               sync_blocks=args.sync_blocks), make_console())


if __name__ == "__main__":
    main()
