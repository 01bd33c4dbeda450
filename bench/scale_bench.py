"""Flat in N (issue #15, item 6): the per-block cost of the simulated network at 1,000 to 10,000
service nodes.

Runs `snode-sim` (one process per size, so that each peak RSS is its own) at 1k, 2k, 5k and 10k
service nodes with five contributors each, over BLOCKS service-node blocks after the bootstrap,
and reports per size:
- per-block CPU of the whole network's chain work (rounds, votes, checkpoints, the observer
  adopting the block), and of the real core alone (`apply_block` checking the template);
- the limit measured in the same run: Ed25519 verifications per second, and the per-block cost
  expressed as verifications (a block needs about 35: the leader's and validators' signatures
  checked by each other, the block's own, the checkpoint's every fourth block);
- the ratio of the 10k cost to the 1k cost (target <= 1.3), messages per block, memory per SN.

`python -m bench scale` prints the table and writes docs/scale.png (per-block cost against N)
when matplotlib is installed (`pip install -e '.[bench]'`; `make bench` does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench.report import verdict
from snode.core.crypto import SigningKey, verify

SIZES: Final = (1_000, 2_000, 5_000, 10_000)
CONTRIBUTORS_PER_NODE: Final = 5
BLOCKS: Final = 2_000
SEED: Final = 1
TARGET_RATIO: Final = 1.3
PLOT: Final = Path(__file__).resolve().parent.parent / "docs" / "scale.png"


def log(text: str) -> None:
    print(f"scale_bench: {text}", file=sys.stderr, flush=True)


def verify_us(samples: int = 3_000) -> float:
    """The limit: microseconds per Ed25519 verification on this machine."""
    key = SigningKey(bytes(range(32)))
    message = b"scale bench"
    signature = key.sign(message)
    started = time.perf_counter()
    for _ in range(samples):
        verify(key.public, message, signature)
    return (time.perf_counter() - started) / samples * 1e6


def simulate(service_nodes: int, blocks: int = BLOCKS) -> dict[str, Any]:
    """One `snode-sim --json` run."""
    command = [sys.executable, "-m", "snode.sim", "--service-nodes", str(service_nodes),
               "--contributors", str(service_nodes * CONTRIBUTORS_PER_NODE), "--blocks", str(blocks),
               "--seed", str(SEED), "--json"]
    log(" ".join(command[2:]))
    done = subprocess.run(command, capture_output=True, text=True, timeout=3_600)
    if done.returncode != 0:
        raise RuntimeError(f"snode-sim failed: {done.stderr.strip().splitlines()[-1:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run(sizes: tuple[int, ...] = SIZES, blocks: int = BLOCKS) -> dict[str, Any]:
    limit = verify_us()
    runs = {n: simulate(n, blocks) for n in sizes}
    low, high = runs[min(sizes)], runs[max(sizes)]
    results = {
        "verify_us": limit,
        "runs": runs,
        "ratio": high["per_block_cpu_ms"] / low["per_block_cpu_ms"],
        "core_ratio": high["core_check_ms_per_block"] / low["core_check_ms_per_block"],
    }
    results["plot"] = plot(runs)
    return results


def plot(runs: dict[int, dict[str, Any]]) -> str | None:
    """docs/scale.png; None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    sizes = sorted(runs)
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    ax.plot(sizes, [runs[n]["per_block_cpu_ms"] for n in sizes], "o-", label="whole network's chain work")
    ax.plot(sizes, [runs[n]["node_accept_ms_per_block"] for n in sizes], "s-", label="a node adopting the block")
    ax.plot(sizes, [runs[n]["core_check_ms_per_block"] for n in sizes], "^-", label="core alone (apply_block)")
    ax.set_xlabel("service nodes")
    ax.set_ylabel("CPU ms per block")
    ax.set_ylim(bottom=0)
    ax.set_title("snode-sim: per-block cost against network size")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(PLOT)
    plt.close(fig)
    return str(PLOT)


def report(results: dict[str, Any], console: Console | None = None) -> None:
    console = console or Console()
    limit = results["verify_us"]
    table = Table(title=f"Scale: snode-sim, {BLOCKS:,} service-node blocks per size "
                        f"(limit: one Ed25519 verification = {limit:.1f} us)")
    for column in ("service nodes", "contributors", "per block (ms)", "= verifications", "core alone (ms)",
                   "node adopts (ms)", "messages / block", "failed rounds", "reward deviation",
                   "peak RSS (MiB)", "KiB / SN"):
        table.add_column(column, justify="right")
    for n, r in sorted(results["runs"].items()):
        table.add_row(
            f"{n:,}", f"{r['contributors']:,}", f"{r['per_block_cpu_ms']:.2f}",
            f"{r['per_block_cpu_ms'] * 1000 / limit:.0f}", f"{r['core_check_ms_per_block']:.2f}",
            f"{r['node_accept_ms_per_block']:.2f}", f"{r['messages_per_block']:.0f}",
            str(r["failed_rounds"]), f"{r['max_reward_deviation']:.2f}", f"{r['peak_rss_mib']:.0f}",
            f"{r['rss_per_sn_kib']:.1f}",
        )
    console.print(table)
    ratio = results["ratio"]
    console.print(f"per-block cost at {max(results['runs']):,} / at {min(results['runs']):,}: {ratio:.2f} "
                  f"(target <= {TARGET_RATIO}) {verdict(ratio <= TARGET_RATIO)}; core alone: "
                  f"{results['core_ratio']:.2f}")
    console.print("plot: " + (results["plot"] or "not drawn (pip install -e '.[bench]' for matplotlib)"))
