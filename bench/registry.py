"""The one list of benchmarks: name, what it measures, minutes it takes on the 2-core machine,
whether it starts daemons, its smoke size (the `run` arguments the smoke test passes), and
whether `python -m bench` with no name runs it (a tool is run only by name or its own command)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final


@dataclass(frozen=True)
class Benchmark:
    name: str
    module: str
    measures: str
    minutes: float
    daemons: bool
    smoke: dict[str, Any] | None = field(default=None)
    """Keyword arguments of `run` for a run of seconds; None: no smoke size yet."""
    tool: bool = False
    """Not in the default run: a comparison run by its own command (`python -m MODULE`)."""


BENCHMARKS: Final = (
    Benchmark("core", "bench.core_bench", "apply_block against Ed25519 verification", 2, False,
              {"service_nodes": 20, "block_sizes": (1, 5)}),
    Benchmark("store", "bench.store_bench", "store commits against bare SQLite; restart", 2, False,
              {"blocks": 20, "restart_outputs": 5_000}),
    Benchmark("rpc", "bench.rpc_bench", "get_service_nodes and get_info against msgspec and a trivial handler",
              5, True),
    Benchmark("sync", "bench.sync_bench", "sync from a local peer against Ed25519 verification", 10, True,
              {"blocks": 2_100, "runs": 1}),
    Benchmark("proof", "bench.proof_bench", "uptime-proof intake against one core's Ed25519 verification", 3, True,
              {"service_nodes": 40, "trial_count": 1}),
    Benchmark("intake", "bench.intake_bench", "CPU per peer proof on the loop thread, in process", 1, False,
              {"trial_count": 1}),
    Benchmark("mainnet", "bench.mainnet_bench", "one snoded's CPU and bytes at mainnet's cadence, 2k and 10k SNs",
              8, True, {"sizes": (40,), "compressions": (20,), "window_s": 4.0, "idle_s": 1.0}),
    Benchmark("blocks", "bench.blocks_bench", "service-node block latency and CPU on a 12-node devnet", 6, True),
    Benchmark("scale", "bench.scale_bench", "snode-sim per-block cost at 1k to 10k SNs", 15, False),
    Benchmark("devnet", "bench.devnet_bench", "12 real daemons for 10 minutes: blocks, RSS, CPU", 12, True),
    Benchmark("hostile", "bench.hostile_bench", "sync rate under two hostile peers against quiet, then an honest "
              "node's share of service on a devnet under issue #33's attacks", 14, True,
              {"blocks": 300, "service_s": 0}),
    Benchmark("snapshot", "bench.snapshot_bench", "a new node from a snapshot (1M outputs, 2,000 SNs) against "
              "its replay from genesis: tip, first proof, RSS; the root's cost; assume-valid", 10, True,
              {"outputs": 20_000, "service_nodes": 40, "owners": 5_000, "sync_blocks": 0}),
    Benchmark("mempool", "bench.mempool_bench", "the event loop's time after a block against 60,000 pooled transfers",
              2, False),
    Benchmark("final_block", "bench.final_block_bench", "a signed block staged with its template's result",
              1, False, tool=True),
    Benchmark("gossip", "bench.gossip_bench", "ProofGossip's bookkeeping on a simulated 12-node mesh", 1, False,
              tool=True),
    Benchmark("gossip_relay", "bench.gossip_relay", "the relay's CPU around a round of proofs", 1, False, tool=True),
    Benchmark("reader_compare", "bench.reader_compare", "P2P reader CPU, a commit's against today's", 1, False,
              tool=True),
    Benchmark("compiled", "bench.compiled_bench", "the compiled modules (make compiled) against their sources, "
              "per operation", 1, False, tool=True),
)
"""The tools print their figures from `main`, with no `run` and `report` to call from here."""

BY_NAME: Final = {b.name: b for b in BENCHMARKS}
DEFAULT: Final = tuple(b.name for b in BENCHMARKS if not b.tool)
