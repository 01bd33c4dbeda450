"""Block application against the physical limit: how much of apply_block is signature checking.

Measures in one run, on one core:
- the limit: Ed25519 verifications per second with PyNaCl (`core.crypto.verify`);
- `apply_block` on blocks of 1, 50 and 500 transfers, with 2,000 active, payable service nodes
  in the state (built with DevChain: funded at genesis, registered in blocks of 250, activated by
  the authority);
- per block, the time spent verifying the block's signatures alone, and its share of the
  apply_block time. DESIGN.md section 10 wants sync at no less than half the rate that signature
  verification alone allows, so the target share is >= 0.5;
- per block, the cost of the state root at the tip (fork v2, `core.state_root`): the checksum
  updated from the block's undo record and the root the header carries, against apply_block's
  time (issue #36: at most 0.5 ms a block), and once, the whole state summed from scratch (what
  the fork's first block costs a node).

apply_block is pure, so each block is applied many times to the same parent state.
`python -m bench --profile` adds a cProfile of apply_block on the largest block.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench.report import timed, verdict
from snode.core import mempool as mp
from snode.core.blocks import Block
from snode.core.crypto import SigningKey, signature_cache, verify
from snode.core.production import build_block
from snode.core.state_root import after_block_with_root, state_checksum
from snode.core.transition import SigCheck, apply_block, verify_serially
from snode.core.txbuilder import build_transfer
from snode.devchain import DevChain, key_from_label
from snode.params import COIN

SERVICE_NODES: Final = 2_000
REGISTRATIONS_PER_BLOCK: Final = 250
BLOCK_SIZES: Final = (1, 50, 500)
VERIFY_SAMPLES: Final = 3_000
TARGET_SIG_SHARE: Final = 0.5
MIN_SECONDS: Final = 1.0
"""Each figure repeats its measurement for at least this long and at least MIN_RUNS times."""
MIN_RUNS: Final = 5
TARGET_ROOT_MS: Final = 0.5
"""The most a block's state root may cost at the tip (issue #36)."""


def log(text: str) -> None:
    """Progress on stderr, so that stdout holds the figures."""
    print(f"core_bench: {text}", file=sys.stderr, flush=True)


def seconds_per_run(*fns: Callable[[], object]) -> list[float]:
    """Median wall time of one call of each fn, over enough rounds to fill MIN_SECONDS.

    The functions take turns within each round, so that a neighbour's load on the machine
    slows them alike and their ratio stays fair.
    """
    rounds: list[list[float]] = []
    started = time.perf_counter()
    while len(rounds) < MIN_RUNS or time.perf_counter() - started < MIN_SECONDS:
        rounds.append([timed(fn) for fn in fns])
    return [statistics.median(column) for column in zip(*rounds)]


# --- the limit ----------------------------------------------------------------------------

def verify_rate() -> float:
    """Ed25519 verifications per second on one core, over VERIFY_SAMPLES distinct signatures."""
    keys = [key_from_label(f"bench verify {i}") for i in range(64)]
    samples = []
    for i in range(VERIFY_SAMPLES):
        key = keys[i % len(keys)]
        message = i.to_bytes(32, "big")
        samples.append((key.public, message, key.sign(message)))

    def verify_all() -> None:
        for public, message, signature in samples:
            if not verify(public, message, signature):
                raise AssertionError("a benchmark signature does not verify")

    [seconds] = seconds_per_run(verify_all)
    return VERIFY_SAMPLES / seconds


# --- the state ----------------------------------------------------------------------------

def build_chain(spenders: Sequence[SigningKey], service_nodes: int = SERVICE_NODES) -> DevChain:
    """A DevChain with `service_nodes` active, payable service nodes and funded spenders."""
    operators = [key_from_label(f"bench operator {i}") for i in range(service_nodes)]
    nodes = [key_from_label(f"bench node {i}") for i in range(service_nodes)]
    allocations = {k.public: 200_001 * COIN for k in operators}
    allocations.update({k.public: 1_000 * COIN for k in spenders})
    chain = DevChain.create(allocations)
    chain.register_active(list(zip(operators, nodes)), per_block=REGISTRATIONS_PER_BLOCK)
    chain.mine(chain.params.payable_grace)
    active = sum(1 for sn in chain.state.service_nodes.values() if sn.active)
    if active != service_nodes:
        raise AssertionError(f"{active} of {service_nodes} service nodes are active after setup")
    return chain


def transfer_block(chain: DevChain, spenders: Sequence[SigningKey], count: int) -> Block:
    """The block after the tip holding `count` transfers, one from each of the first spenders."""
    pool = mp.Mempool()
    for i, key in enumerate(spenders[:count]):
        to = spenders[(i + 1) % len(spenders)].public
        tx = build_transfer(chain.spendable(key.public), key, to, 10 * COIN, chain.params)
        pool, _ = mp.admit(pool, tx, chain.state, chain.consensus, now=chain.now)
    block, stale = build_block(chain.state, pool, chain.consensus, chain.authority, timestamp=chain.now + 2)
    if stale or len(block.transactions) != count + 1:
        raise AssertionError(f"the {count}-transfer block holds {len(block.transactions) - 1} transfers")
    return block


# --- the measurement ----------------------------------------------------------------------

def block_signatures(chain: DevChain, block: Block) -> list[SigCheck]:
    """Every signature check apply_block makes for `block` (producer and inputs)."""
    captured: list[SigCheck] = []

    def capture(checks: Sequence[SigCheck]) -> int:
        captured.extend(checks)
        return -1

    apply_block(chain.state, block, chain.consensus, verifier=capture)
    return captured


def measure_block(chain: DevChain, block: Block) -> dict[str, float]:
    """apply_block time, the verify-alone time of its signatures, and the derived rates."""
    transfers = len(block.transactions) - 1
    checks = block_signatures(chain, block)
    after, undo = apply_block(chain.state, block, chain.consensus)
    parent = state_checksum(chain.state)
    network_id = chain.params.network_id
    apply_s, verify_s, root_s = seconds_per_run(
        lambda: apply_block(chain.state, block, chain.consensus), lambda: verify_serially(checks),
        lambda: after_block_with_root(network_id, parent, after, undo),
    )
    return {
        "root_ms": root_s * 1000,
        "root_share": root_s / apply_s,
        "root_entries": sum(len(changes) for changes in (undo.utxos, undo.service_nodes, undo.quorums,
                                                          undo.checkpoints)),
        "transfers": transfers,
        "signatures": len(checks),
        "apply_ms": apply_s * 1000,
        "blocks_per_s": 1 / apply_s,
        "transfers_per_s": transfers / apply_s,
        "verify_ms": verify_s * 1000,
        "sig_share": verify_s / apply_s,
    }


def run(profile: bool = False, service_nodes: int = SERVICE_NODES,
        block_sizes: tuple[int, ...] = BLOCK_SIZES) -> dict[str, Any]:
    """Every figure of this benchmark, as a dict (see `report`); fewer nodes and smaller blocks
    for a quick look (the smoke test)."""
    log("measuring Ed25519 verification (the limit)")
    signature_cache(False)  # each verification as of a signature seen for the first time
    rate = verify_rate()
    spenders = [key_from_label(f"bench spender {i}") for i in range(max(block_sizes))]
    log(f"building a chain with {service_nodes} service nodes")
    started = time.perf_counter()
    chain = build_chain(spenders, service_nodes)
    setup_s = time.perf_counter() - started
    blocks = {n: transfer_block(chain, spenders, n) for n in block_sizes}
    results: dict[str, Any] = {
        "ed25519_verify_per_s": rate,
        "service_nodes": len(chain.state.service_nodes),
        "setup_s": setup_s,
        "blocks": {},
    }
    for n, block in blocks.items():
        log(f"applying the {n}-transfer block")
        results["blocks"][n] = measure_block(chain, block)
    log("summing the whole state once (the fork's first block)")
    results["full_sum"] = full_sum(chain)
    if profile:
        results["profile"] = {
            n: profile_apply(chain, blocks[n]) for n in (min(block_sizes), max(block_sizes))
        }
    return results


def full_sum(chain: DevChain) -> dict[str, float]:
    """The whole state's checksum from scratch: its entries and the seconds it takes."""
    state = chain.state
    entries = len(state.utxos) + len(state.service_nodes) + len(state.quorums) + len(state.checkpoints)
    [seconds] = seconds_per_run(lambda: state_checksum(state))
    return {"entries": entries, "seconds": seconds, "us_per_entry": seconds / entries * 1e6}


def profile_apply(chain: DevChain, block: Block, top: int = 15) -> str:
    """cProfile of apply_block on `block` (about 1,000 signatures' worth), by own time."""
    runs = max(1000 // len(block.transactions), 10)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(runs):
        apply_block(chain.state, block, chain.consensus)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


def report(results: dict[str, Any], console: Console) -> None:
    """Print the figures of `run` as tables, each ratio with its target and verdict."""
    console.print()
    console.print("[bold]core: apply_block against Ed25519 verification (one core)[/]")
    console.print(
        f"limit: {results['ed25519_verify_per_s']:,.0f} Ed25519 verifications/s (PyNaCl, one core)"
    )
    console.print(
        f"state: {results['service_nodes']:,} active, payable service nodes "
        f"(built in {results['setup_s']:.1f} s)"
    )
    table = Table(show_edge=False, pad_edge=False)
    for name in ("transfers", "signatures", "apply ms", "blocks/s", "transfers/s",
                 "verify ms", "other ms", "sig share", "target", "verdict"):
        table.add_column(name, justify="right", no_wrap=True)
    for figures in results["blocks"].values():
        share = figures["sig_share"]
        table.add_row(
            str(figures["transfers"]), str(figures["signatures"]), f"{figures['apply_ms']:.2f}",
            f"{figures['blocks_per_s']:,.0f}", f"{figures['transfers_per_s']:,.0f}",
            f"{figures['verify_ms']:.2f}", f"{figures['apply_ms'] - figures['verify_ms']:.2f}",
            f"{share:.2f}", f">= {TARGET_SIG_SHARE}", verdict(share >= TARGET_SIG_SHARE),
        )
    console.print(table)
    console.print("apply ms = apply_block time per block; verify ms = verifying its signatures alone")
    console.print("other ms = apply ms - verify ms; sig share = verify ms / apply ms")
    report_root(results, console)
    for n, text in results.get("profile", {}).items():
        console.print()
        console.print(f"[bold]cProfile of apply_block, {n}-transfer block[/]")
        console.print(text, markup=False, highlight=False, soft_wrap=True)


def report_root(results: dict[str, Any], console: Console) -> None:
    """The state root's cost a block at the tip, against apply_block's and the 0.5 ms target."""
    console.print()
    console.print("[bold]state root at the tip (fork v2): per block, from the parent's checksum[/]")
    table = Table(show_edge=False, pad_edge=False)
    for name in ("transfers", "entries changed", "root ms", "apply ms", "root/apply", "target", "verdict"):
        table.add_column(name, justify="right", no_wrap=True)
    for figures in results["blocks"].values():
        table.add_row(
            str(figures["transfers"]), str(figures["root_entries"]), f"{figures['root_ms']:.3f}",
            f"{figures['apply_ms']:.2f}", f"{figures['root_share']:.2f}", f"<= {TARGET_ROOT_MS} ms",
            verdict(figures["root_ms"] <= TARGET_ROOT_MS),
        )
    console.print(table)
    full = results["full_sum"]
    console.print(f"the whole state from scratch (a fork's first block, once): {full['entries']:,} entries "
                  f"in {full['seconds']:.2f} s, {full['us_per_entry']:.1f} us an entry")
    console.print("entries changed = keys the block's undo record lists (each a removal and an addition)")
