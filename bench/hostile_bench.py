"""An honest sync under attack (issue #22): the sync rate while two hostile peers attack the
syncing daemon at full speed, against the quiet rate measured in the same run.

- the chain: a BLOCKS-block regtest chain built in-process (bench/sync_chain.py, with
  SERVICE_NODES service nodes and a few transfers a block), served by a real `snoded --regtest`;
- quiet: an empty `snoded` syncs it from that peer alone, QUIET_RUNS times (one before the
  attacked run and one after, so that the machine's drift shows);
- attacked: an empty `snoded` syncs it while HOSTILE_PEERS processes attack it
  (bench/hostile_peer.py: oversize blocks, self-signed and authority-signed orphans, junk proof
  floods, GetBlocks leeching, each from a fresh loopback address once the last is banned);
- the figures: each sync's blocks/s from daemon start to height BLOCKS with target_height 0;
  the attacked rate against the mean quiet rate (target >= TARGET_RATIO); the syncing daemon's
  CPU time per block (its workers included), quiet against attacked: what the attacks cost the
  victim itself, which the neighbours' load (the attackers' own CPU included: they share the
  two cores) moves far less than the rates; the attacked
  daemon's peak RSS (VmHWM, its workers apart) against the quiet one's; the bans by reason; what
  the attackers sent and pulled.

Then the honest node's share of service on a devnet while issue #33's attacks run against it
(bench/hostile_service.py: quorumnet idle connections, admin slowloris, a lying height, dead
dial targets, an insider's quorumnet flood, a full mempool against an honest transfer paying 100x
the minimum fee), quiet against attacked; `--service-seconds 0` leaves it out.

`--blocks N` syncs a shorter chain. Everything listens on 127.x addresses only; every daemon
and attacker is stopped by its own pid.
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from bench import daemons, hostile_mempool, hostile_service
from bench.daemons import P2P_PORT, SYNC_NET, Daemon, loopback_ip
from bench.hostile_peer import COUNTERS, attack
from bench.report import figures_table, verdict
from bench.sync_chain import SyncChain

BLOCKS: Final = 20_000
SERVICE_NODES: Final = 200
"""Fewer than the sync benchmark's 2,000: this one measures a ratio, and the chain builds faster."""
HOSTILE_PEERS: Final = 2
QUIET_RUNS: Final = 2
TARGET_RATIO: Final = 0.8
SYNC_TIMEOUT: Final = 600.0
ADDRESSES_PER_ATTACKER: Final = 100
"""Loopback addresses each attacker takes in turn (a banned one is refused for 600 s)."""
POLL_S: Final = 0.1

log: Final = partial(daemons.log, "hostile_bench")


def _sync(workdir: Path, source: Daemon, tip_hash: bytes, blocks: int, hostile: int) -> dict[str, Any]:
    """One empty daemon syncing from `source` while `hostile` attackers attack it."""
    name = f"attacked-{time.monotonic_ns()}" if hostile else f"quiet-{time.monotonic_ns()}"
    victim = Daemon(loopback_ip(SYNC_NET, 12), workdir / name, name=name, log=log,
                    extra=[f"--add-priority-node={source.ip}:{P2P_PORT}"])
    counters = multiprocessing.Array("q", len(COUNTERS))
    attackers: list[multiprocessing.Process] = []
    try:
        started = victim.start()
        info = victim.wait_for_rpc()
        genesis = bytes.fromhex(info["genesis_hash"])
        prefix = victim.ip.rsplit(".", 1)[0]
        for n in range(hostile):
            first = 20 + n * ADDRESSES_PER_ATTACKER
            addresses = [f"{prefix}.{last}" for last in range(first, first + ADDRESSES_PER_ATTACKER)]
            process = multiprocessing.Process(
                target=attack, args=(victim.ip, P2P_PORT, genesis, addresses, counters, blocks - 1), daemon=True)
            process.start()
            attackers.append(process)
        done = _wait_synced(victim, blocks, started)
        cpu = victim.cpu_seconds()
        peak = victim.peak_rss_mb()
        bans = Counter(_reason(b["reason"]) for b in victim.call("get_peers")["bans"])
        final = victim.info() or {}
        if final.get("top_block_hash") != tip_hash.hex():
            raise RuntimeError(f"{victim.label} ended on another tip:\n{victim.log_tail()}")
    finally:
        for process in attackers:
            process.terminate()  # by its own pid
            process.join(10)
        victim.stop()
        shutil.rmtree(workdir / name, ignore_errors=True)
    return {"total_s": done, "blocks_per_s": blocks / done, "cpu_ms_per_block": 1000 * cpu / blocks,
            "peak_rss_mb": peak, "bans": dict(bans),
            "attack": dict(zip(COUNTERS, counters[:]))}


def _wait_synced(victim: Daemon, blocks: int, started: float) -> float:
    """Seconds from the daemon's start until it reports height `blocks` and no sync target."""
    deadline = started + SYNC_TIMEOUT * max(1.0, blocks / BLOCKS)
    while time.perf_counter() < deadline:
        info = victim.info()
        if info is not None and info["height"] == blocks and info["target_height"] == 0:
            return time.perf_counter() - started
        time.sleep(POLL_S)
    raise RuntimeError(f"{victim.label} did not sync {blocks:,} blocks in time:\n{victim.log_tail()}")


def _reason(text: str) -> str:
    """A ban reason without its numbers (block heights, sizes), to count bans by kind."""
    return " ".join(w for w in text.split() if not any(c.isdigit() for c in w))[:70]


def run(blocks: int = BLOCKS, service_s: float = hostile_service.SPAN_S) -> dict[str, Any]:
    """Every figure of this benchmark (see `report`)."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="snode-hostile-bench-") as tmp:
        workdir = Path(tmp)
        log(f"building a {blocks:,}-block regtest chain with {SERVICE_NODES:,} service nodes")
        chain = SyncChain(workdir / "source", blocks=blocks, service_nodes=SERVICE_NODES,
                          transfers_per_block=4, spenders=128, sample_size=10, progress=log)
        stats = chain.build()
        tip_hash = chain.state.tip_hash
        del chain
        source = Daemon(loopback_ip(SYNC_NET, 11), workdir / "source", name="source", log=log)
        try:
            source.start()
            source.wait_for_rpc()
            runs: list[dict[str, Any]] = []
            for hostile in (0, HOSTILE_PEERS, 0)[:QUIET_RUNS + 1]:
                log(f"sync {'with ' + str(hostile) + ' hostile peers' if hostile else 'alone'}")
                runs.append(_sync(workdir, source, tip_hash, blocks, hostile))
        finally:
            source.stop()
    quiet = [r for i, r in enumerate(runs) if i != 1]
    attacked = runs[1]
    quiet_rate = statistics.mean(r["blocks_per_s"] for r in quiet)
    quiet_cpu = statistics.mean(r["cpu_ms_per_block"] for r in quiet)
    return {"blocks": blocks, "chain_mb": stats.bytes / 1e6, "quiet": quiet, "attacked": attacked,
            "quiet_blocks_per_s": quiet_rate, "ratio": attacked["blocks_per_s"] / quiet_rate,
            "quiet_cpu_ms_per_block": quiet_cpu, "cpu_ratio": quiet_cpu / attacked["cpu_ms_per_block"],
            "service": hostile_service.run(service_s) if service_s > 0 else None,
            "total_s": time.perf_counter() - started}


def report(results: dict[str, Any], console: Console) -> None:
    console.print()
    console.print(f"[bold]hostile: an honest sync while {HOSTILE_PEERS} hostile peers attack the syncing daemon[/]")
    console.print(f"chain: {results['blocks']:,} blocks, {SERVICE_NODES:,} service nodes, "
                  f"{results['chain_mb']:.1f} MB")
    attacked = results["attacked"]
    table = figures_table("quiet (same run)")
    table.add_row("sync under attack, from daemon start", f"{attacked['blocks_per_s']:,.0f} blocks/s",
                  f"{results['quiet_blocks_per_s']:,.0f} blocks/s", f"{results['ratio']:.3f}",
                  f">= {TARGET_RATIO}", verdict(results["ratio"] >= TARGET_RATIO))
    table.add_row("  syncing daemon's CPU per block (workers included)", f"{attacked['cpu_ms_per_block']:.2f} ms",
                  f"{results['quiet_cpu_ms_per_block']:.2f} ms", f"{results['cpu_ratio']:.3f}",
                  "(informational)", "")
    quiet_peak = max(r["peak_rss_mb"] or 0.0 for r in results["quiet"])
    table.add_row("  peak RSS of the attacked daemon", f"{attacked['peak_rss_mb'] or 0:.0f} MiB",
                  f"{quiet_peak:.0f} MiB", "", "(informational)", "")
    console.print(table)
    console.print("quiet runs: " + ", ".join(f"{r['blocks_per_s']:,.0f} blocks/s ({r['total_s']:.1f} s)"
                                             for r in results["quiet"]))
    a = attacked["attack"]
    console.print(f"attackers: {a['connections']:,} connections, {a['bytes_sent'] / 2**20:,.0f} MiB sent, "
                  f"{a['bytes_pulled'] / 2**20:,.0f} MiB of blocks pulled, {a['closed_by_victim']:,} "
                  f"connections cut by the victim")
    bans = attacked["bans"]
    console.print(f"bans: {sum(bans.values())}" + "".join(f"\n  {n} x {reason}" for reason, n in
                                                         sorted(bans.items(), key=lambda kv: -kv[1])))
    if results.get("service") is not None:
        _report_service(results["service"], console)
    console.print(f"hostile benchmark took {results['total_s']:.0f} s")


def _report_service(service: dict[str, Any], console: Console) -> None:
    """The honest node's share of service, quiet against attacked (counts, not timings)."""
    console.print(f"[bold]service on a devnet of {service['nodes']} service nodes, {service['span_s']:g} s quiet "
                  f"then {service['span_s']:g} s attacked[/]")
    table = figures_table("quiet (same run)")
    quiet, attacked = service["quiet"], service["attacked"]
    for label, key in (("blocks the victim produced", "victim_blocks"), ("blocks in all", "blocks"),
                       ("victim's proofs accepted by the authority", "proofs_accepted"),
                       ("victim's admin RPC answered (samples)", "answered"),
                       ("samples seen decommissioned", "inactive_samples")):
        table.add_row(label, f"{attacked[key]:,}", f"{quiet[key]:,}", "", "", "")
    table.add_row("victim's share of blocks", f"{attacked['share']:.0%}", f"{quiet['share']:.0%}", "",
                  "no loss", verdict(hostile_service.passed(service)))
    mempool = service["mempool"]
    rounds = mempool["mempool_rounds"]
    table.add_row("honest 100x-fee transfers into a full pool: accepted at once", f"{mempool['honest_accepted']} "
                  f"of {rounds}", "", "", "all", verdict(rounds > 0 and mempool["honest_accepted"] == rounds))
    table.add_row(f"  mined within {hostile_mempool.MINED_WITHIN} blocks", f"{mempool['honest_mined']} of {rounds}",
                  "", "", "all", verdict(rounds > 0 and mempool["honest_mined"] == rounds))
    table.add_row("  most entries in the victim's pool", f"{mempool['pool_entries_max']:,} "
                  f"({mempool['pool_bytes_max']:,} bytes)", "", "", f"<= {mempool['pool_entries_bound']:,}",
                  verdict(mempool["pool_entries_max"] <= mempool["pool_entries_bound"]))
    console.print(table)
    console.print("attacks: " + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in service["attacks"].items())
                  + f"; mempool: {mempool['mempool_flood_sent']:,} transfers at the minimum fee sent over P2P, "
                  f"{mempool['mempool_void_rounds']} rounds not counted (a block emptied the pool first), "
                  f"honest transfers mined at most {mempool['mined_blocks_max']} blocks after")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=BLOCKS, metavar="N",
                        help=f"blocks in the chain to sync (default {BLOCKS:,})")
    parser.add_argument("--service-seconds", type=float, default=hostile_service.SPAN_S, metavar="S",
                        help=f"each span of the devnet service phase (default {hostile_service.SPAN_S:g}; 0: none)")
    args = parser.parse_args()
    if args.blocks < 1_000:
        parser.error("--blocks must be at least 1,000")
    from snode.tools.tables import make_console

    report(run(blocks=args.blocks, service_s=args.service_seconds), make_console())


if __name__ == "__main__":
    main()
