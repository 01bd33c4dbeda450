"""Twelve real daemons (issue #15, item 7): `snode-devnet up --nodes 12 --register` on this
machine, through service-node block production, for MINUTES minutes of real time.

Counts, over the measured span (from the first service-node block on):
- blocks made against the target (one per `target_block_time`, 2 s on devnet), failed rounds
  (a block of round r means r rounds before it failed), authority blocks (the backstop);
- each daemon's RSS (largest sample) and CPU share (its CPU seconds over the span, as a
  share of one core); the limit measured in the same run is the machine's cores (2 here: 13
  daemons cannot use more than 2 cores' worth between them).

`python -m bench devnet` (MINUTES 10); `SNODE_DEVNET_MINUTES=1` for a short look. Every daemon
is stopped by `snode-devnet down`, which stops exactly the pids `up` started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench.blocks_bench import wait
from bench.report import verdict
from snode.api.client import call_once as call
from snode.common.procs import cpu_seconds, memory_mib
from snode.params import DEVNET

NODES: Final = 12
MINUTES: Final = float(os.environ.get("SNODE_DEVNET_MINUTES", "10"))
SAMPLE_S: Final = 5.0


def log(text: str) -> None:
    print(f"devnet_bench: {text}", file=sys.stderr, flush=True)


def devnet(base: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "snode.tools.devnet", "--base-dir", str(base), *args],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)




def rss_mib(pid: int) -> float:
    return memory_mib(pid) or 0.0


def run(minutes: float = MINUTES) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="devnet-bench-") as tmp:
        base = Path(tmp) / "net"
        log(f"snode-devnet up --nodes {NODES} --register")
        up = devnet(base, "up", "--nodes", str(NODES), "--register")
        if up.returncode != 0:
            raise RuntimeError(f"snode-devnet up failed: {up.stderr.strip()[-500:]}")
        try:
            return _measure(base, minutes)
        finally:
            down = devnet(base, "down")
            log(f"snode-devnet down: exit {down.returncode}")


def _measure(base: Path, minutes: float) -> dict[str, Any]:
    rows = json.loads(devnet(base, "status", "--json").stdout)
    authority = rows[0]["rpc"]
    wait(lambda: call(authority, "get_info")["block_production"] == "service_nodes", 300,
          "service-node block production")
    first = call(authority, "get_height")["height"]
    log(f"service nodes produce from height {first}; measuring {minutes:g} minutes")
    pids = {row["name"]: row["pid"] for row in rows}
    cpu0 = {name: cpu_seconds(pid) or 0.0 for name, pid in pids.items()}
    peak = {name: 0.0 for name in pids}
    started = time.monotonic()
    while time.monotonic() - started < minutes * 60:
        for name, pid in pids.items():
            peak[name] = max(peak[name], rss_mib(pid))
        time.sleep(SAMPLE_S)  # a sampling period, not a wait for a condition
    span = time.monotonic() - started
    cpu = {name: ((cpu_seconds(pid) or 0.0) - cpu0[name]) / span for name, pid in pids.items()}
    last = call(authority, "get_height")["height"]
    blocks = [call(authority, "get_block", {"height": h}) for h in range(first + 1, last + 1)]
    chain_span = blocks[-1]["timestamp"] - call(authority, "get_block", {"height": first})["timestamp"]
    return {
        "minutes": span / 60, "blocks": len(blocks), "chain_seconds": chain_span,
        "expected_blocks": chain_span / DEVNET.target_block_time,
        "failed_rounds": sum(b["round"] for b in blocks),
        "blocks_after_failed_round": sum(1 for b in blocks if b["round"] > 0),
        "authority_blocks": sum(1 for b in blocks if b["producer"] == "authority"),
        "rss_mib": peak, "cpu_share": cpu, "cores": os.cpu_count() or 1,
    }


def report(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    per_minute = results["blocks"] / results["minutes"]
    console.print(
        f"Twelve real daemons: {results['minutes']:.1f} minutes, {results['blocks']} blocks "
        f"({per_minute:.1f} a minute; the chain's clock allowed {results['expected_blocks']:.0f}), "
        f"{results['failed_rounds']} failed rounds in {results['blocks_after_failed_round']} blocks, "
        f"{results['authority_blocks']} authority blocks "
        f"{verdict(results['failed_rounds'] == 0 and results['authority_blocks'] == 0)}")
    cores = results["cores"]
    table = Table(title=f"each daemon (limit: {cores} cores, {cores:.0%} of one core between them)")
    for column in ("daemon", "peak RSS (MiB)", "CPU (share of one core)"):
        table.add_column(column, justify="right")
    for name in results["rss_mib"]:
        table.add_row(name, f"{results['rss_mib'][name]:.0f}", f"{results['cpu_share'][name]:.1%}")
    total = sum(results["cpu_share"].values())
    table.add_row("all", f"{sum(results['rss_mib'].values()):.0f}", f"{total:.1%}")
    console.print(table)
