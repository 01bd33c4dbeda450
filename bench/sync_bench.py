"""Sync from a local peer against the physical limit: Ed25519 verification of the blocks' signatures.

Measures in one run (DESIGN.md section 10: sync at no less than half the rate that signature
verification alone allows):
- the chain: a 20,000-block regtest chain built in-process on the built-in regtest genesis
  (bench/sync_chain.py): 2,000 service nodes registered and activated, then a few transfers a
  block; written into a data dir with the store, block batches of 500 per transaction;
- the limit: Ed25519 verifications per second with PyNaCl on 2 threads doing nothing else (one
  per core; the node verifies in worker processes, `node.verifier.VerifierPool`), over a uniform
  sample of the chain's own signatures, measured before the first sync run and after each; the
  bound in blocks/s is that rate divided by the chain's signatures per block (producer, one per
  input, registrations, votes);
- the sync, SYNC_RUNS times: a real `snoded --regtest` serves the chain; an empty one started
  with `--add-priority-node` syncs it (GetBlocks, downloads of 500 blocks, stored 1,000 per
  transaction); the time from its start until `get_info` says height 20,000 and target_height
  0, and the rate from its first block on (start-up excluded). Each run's ratio is against the
  higher of the limits measured just before and just after it (the conservative bound); the
  verdict takes the median run, target >= 0.5. Neighbours on the machine move wall-clock
  figures by up to 2x, so the syncing daemon's CPU time per block (all threads and its verify
  workers, from /proc) is reported against the CPU time that verifying the same signatures
  takes: a share that their load moves less;
- the same sync with `--assume-valid` (the tip's hash) right after each run: the syncing daemon
  downloads the header chain first (peer protocol 5) and the blocks below the tip skip their
  input signature checks; its rate against the full run's just before it (same run, same load);
- where the time goes: the last 2,000 blocks replayed in-process through `Node.stage_batch` and
  `finish_batch`, pipelined as the daemon's sync loop does
  on a copy of the store at height 18,000, timed by phase (decode, apply_block's rules,
  signature checks, store commit, adopt); `--profile` adds a cProfile of a second such replay,
  on the thread's CPU clock (its cost per call inflates small builtins several times over: read
  it for call counts and call paths; docs/PERFORMANCE.md section 5 step 4 has the shares).

`--blocks N` and `--runs N` change the chain's length (BLOCKS by default; the replay still takes
its last REPLAY_BLOCKS) and the number of sync runs (SYNC_RUNS by default).

The daemons run from byte-compiled sources, as an installed snoded does (`daemons.compile_sources`).
Everything listens on 127.x addresses only; every daemon is stopped by its own pid.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import pstats
import re
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, Final

from rich.console import Console

from bench import daemons
from bench.daemons import P2P_PORT, SYNC_NET, Daemon, loopback_ip
from bench.report import figures_table, verdict
from bench.sync_chain import PARAMS, ChainStats, SyncChain
from snode.common.procs import cpu_seconds
from snode.core.blocks import Block, block_hash
from snode.core.crypto import signature_cache
from snode.core.encoding import decode
from snode.core.transition import SigCheck, verify_serially
from snode.net.protocol import MAX_BLOCKS_PER_BATCH
from snode.node.node import Node
from snode.node.verifier import INLINE_BELOW, Pending, VerifierPool
from snode.services.sync import SYNC_STORE_BLOCKS
from snode.store import DATABASE_FILE, ChainStore, Commit, PendingWrite, Undone

BLOCKS: Final = 20_000
SERVICE_NODES: Final = 2_000
TRANSFERS_PER_BLOCK: Final = 4
"""Mean transfers per block (uniform 0 to 8); about one in four spends three inputs."""
SPENDERS: Final = 128
"""Wallets that pay each other: each pays again once its change has unlocked."""
VERIFY_SAMPLES: Final = 4_000
VERIFY_THREADS: Final = 2
"""One per core of the CI-class machine (the node's VerifierPool has one worker per core)."""
REPLAY_BLOCKS: Final = 2_000
TARGET_RATIO: Final = 0.5
RSS_TARGET_MB: Final = 150
"""Issue #16: the syncing daemon's peak RSS on the 100,000-block chain, its workers apart."""
POLL_S: Final = 0.2
POLL_NEAR_END_S: Final = 0.02
POLL_NEAR_END_BLOCKS: Final = 1_500
"""Polled often only near the end, where the poll interval bounds the timing error (a poll
costs both daemon and bench some CPU on the same cores)."""
SYNC_RUNS: Final = 3
"""The VM's speed drifts by 20 % within seconds; the median of three runs, each against the
limit measured right before and right after it, is what the verdict uses."""
SYNC_TIMEOUT: Final = 600.0
"""Seconds a sync of BLOCKS blocks may take; longer chains get proportionally more."""
MIN_SECONDS: Final = 1.0
MIN_RUNS: Final = 5

log: Final = partial(daemons.log, "sync_bench")


# --- the limit ----------------------------------------------------------------------------

class ThreadedVerifier:
    """Verification alone, on `workers` threads: libsodium releases the GIL inside a check, and
    with nothing else to run the threads get it back at once, so this is the machine's rate."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="verify")

    def __call__(self, checks: Sequence[SigCheck]) -> int:
        step = -(-len(checks) // self.workers)
        starts = range(0, len(checks), step)
        results = self._pool.map(lambda s: verify_serially(checks[s:s + step]), starts)
        for start, bad in zip(starts, results):
            if bad >= 0:
                return start + bad
        return -1

    def close(self) -> None:
        self._pool.shutdown(wait=True)


def verify_rates(sample: Sequence[SigCheck]) -> dict[str, float]:
    """Verifications per second of `sample` (real signatures of the chain): on VERIFY_THREADS
    threads through ThreadedVerifier, and on one core, taking turns."""
    verifier = ThreadedVerifier(VERIFY_THREADS)
    checks = list(sample)
    try:
        def threaded() -> None:
            if verifier(checks) != -1:
                raise AssertionError("a signature of the benchmark chain does not verify")

        def serial() -> None:
            if verify_serially(checks) != -1:
                raise AssertionError("a signature of the benchmark chain does not verify")

        rounds: list[tuple[float, float, float]] = []
        started = time.perf_counter()
        while len(rounds) < MIN_RUNS or time.perf_counter() - started < MIN_SECONDS:
            threaded_s = _timed(threaded)
            cpu0 = time.thread_time()
            serial_s = _timed(serial)
            rounds.append((threaded_s, serial_s, time.thread_time() - cpu0))
    finally:
        verifier.close()
    return {
        "threads": len(checks) / statistics.median(r[0] for r in rounds),
        "one_core": len(checks) / statistics.median(r[1] for r in rounds),
        "per_cpu_s": len(checks) / statistics.median(r[2] for r in rounds),
    }


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def sync_timeout(blocks: int) -> float:
    """Seconds a sync of `blocks` blocks may take: SYNC_TIMEOUT per BLOCKS blocks, at least
    SYNC_TIMEOUT."""
    return SYNC_TIMEOUT * max(1.0, blocks / BLOCKS)


def measure_syncs(
    workdir: Path, source_dir: Path, tip_hash: bytes, sample: Sequence[SigCheck],
    blocks: int = BLOCKS, runs: int = SYNC_RUNS,
) -> tuple[list[dict[str, Any]], list[dict[str, float]]]:
    """Serve the `blocks`-block chain from source_dir with one daemon and sync it into an empty
    one `runs` times, measuring the verification limit before the first run and after each (so
    every run has a limit measured just before and just after it). The runs' figures and the
    `runs` + 1 limits."""
    source = Daemon(loopback_ip(SYNC_NET, 1), source_dir, name="source", log=log)
    try:
        log("starting the source snoded")
        source.start()
        info = source.wait_for_rpc()
        if info["height"] != blocks or info["top_block_hash"] != tip_hash.hex():
            raise RuntimeError(
                f"the source snoded opened the chain at height {info['height']} "
                f"({info['top_block_hash'][:16]}), not {blocks} ({tip_hash.hex()[:16]})"
            )
        log("measuring Ed25519 verification")
        limits = [verify_rates(sample)]
        syncs = []
        for number in range(1, runs + 1):
            log(f"sync {number} of {runs}: starting an empty snoded")
            syncs.append(_sync_once(workdir / f"syncing-{number}", source, tip_hash, blocks))
            shutil.rmtree(workdir / f"syncing-{number}", ignore_errors=True)
            log(f"sync {number} of {runs} again, with --assume-valid (the tip)")
            assumed = _sync_once(workdir / f"assumed-{number}", source, tip_hash, blocks,
                                 extra=[f"--assume-valid={tip_hash.hex()}"])
            syncs[-1]["assume_valid"] = assumed
            shutil.rmtree(workdir / f"assumed-{number}", ignore_errors=True)
            log("measuring Ed25519 verification again")
            limits.append(verify_rates(sample))
    finally:
        source.stop()
    return syncs, limits


def _sync_once(data_dir: Path, source: Daemon, tip_hash: bytes, blocks: int = BLOCKS,
               extra: Sequence[str] = ()) -> dict[str, Any]:
    """Start an empty snoded (with `extra` flags) with `source` as its priority node and time its
    sync of `blocks` blocks, polling get_info every POLL_S (every POLL_NEAR_END_S over the last
    POLL_NEAR_END_BLOCKS)."""
    syncing = Daemon(loopback_ip(SYNC_NET, 2), data_dir, name=data_dir.name, log=log,
                     extra=[f"--add-priority-node={source.ip}:{P2P_PORT}", *extra])
    try:
        source_cpu0 = source.cpu_seconds()
        started = syncing.start()
        up_s = first_s = done_s = None
        first_height = 0
        first_cpu = cpu = source_cpu = 0.0
        polls = 0
        timeout = sync_timeout(blocks)
        deadline = started + timeout
        last_log = started
        while True:
            polled = syncing.info()
            now = time.perf_counter()
            height = 0
            if polled is not None:
                polls += 1
                if up_s is None:
                    up_s = now - started
                height = polled["height"]
                if height > 0 and first_s is None:
                    first_s, first_height = now - started, height
                    first_cpu = syncing.cpu_seconds()
                if height == blocks and polled["target_height"] == 0:
                    done_s = now - started
                    cpu = syncing.cpu_seconds()
                    source_cpu = source.cpu_seconds() - source_cpu0
                    break
                if now - last_log > 10:
                    log(f"syncing: height {height:,} after {now - started:.0f} s")
                    last_log = now
            if now > deadline:
                break
            time.sleep(POLL_NEAR_END_S if height >= blocks - POLL_NEAR_END_BLOCKS else POLL_S)
        final = syncing.info() or {}
        peak_rss = syncing.peak_rss_mb()
        workers_rss = syncing.workers_rss_mb()
        if done_s is None:
            raise RuntimeError(
                f"the empty snoded reached height {final.get('height')} of {blocks} in "
                f"{timeout:.0f} s:\n{syncing.log_tail()}"
            )
        if final.get("top_block_hash") != tip_hash.hex():
            raise RuntimeError("the synced snoded's tip is not the source's")
    finally:
        syncing.stop()
    assert first_s is not None and up_s is not None
    return {
        "rpc_up_s": up_s,
        "first_block_s": first_s,
        "first_height": first_height,
        "total_s": done_s,
        "blocks_per_s": blocks / done_s,
        "blocks_per_s_after_start": (blocks - first_height) / max(done_s - first_s, 1e-9),
        "polls": polls,
        "cpu_s": cpu,
        "cpu_ms_per_block_after_start": 1000 * (cpu - first_cpu) / max(blocks - first_height, 1),
        "source_cpu_s": source_cpu,
        "peak_rss_mb": peak_rss,
        "workers_rss_mb": workers_rss,
        **_header_figures(syncing.log_tail(1 << 30)),
    }


def _header_figures(text: str) -> dict[str, float]:
    """From a syncing daemon's log: the seconds its header chain took to download (0: none was)
    and the blocks that skipped their input signatures below the assume-valid block."""
    took = re.findall(r"sync: the header chain of \S+ leads from \d+ to \d+[^(]*\(([\d.]+) s\)", text)
    skipped = re.findall(r"sync: (\d+) blocks below the assume-valid block \d+ skipped", text)
    return {"headers_s": sum(map(float, took)), "assumed_blocks": sum(map(int, skipped))}


# --- where the time goes: an in-process replay of the last blocks -------------------------

class Stopwatch:
    """Wall time and this thread's CPU time spent inside `with` blocks, summed. The CPU time is
    what a phase costs whatever the neighbours on the machine do."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def __enter__(self) -> Stopwatch:
        self._wall0, self._cpu0 = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self._wall0
        self.cpu += time.thread_time() - self._cpu0


class TimedWrite:
    """A pending store write whose commit is timed."""

    def __init__(self, inner: PendingWrite, watch: Stopwatch) -> None:
        self.inner, self.watch = inner, watch

    def commit(self) -> None:
        with self.watch:
            self.inner.commit()

    def rollback(self) -> None:
        self.inner.rollback()


class TimedStore(ChainStore):
    """The real store, timing its batch writes (the rows, and the commit once the node has
    waited for the signature checks: that wait is timed by TimedPending)."""

    commit = Stopwatch()

    def write(self, undone: Sequence[Undone], commits: Sequence[Commit], **kwargs: Any) -> Any:
        with self.commit:
            return TimedWrite(super().write(undone, commits, **kwargs), self.commit)


class TimedPending(Pending):
    """A verifier answer whose waiting is timed."""

    __slots__ = ("inner", "watch")

    def __init__(self, inner: Pending, watch: Stopwatch) -> None:
        super().__init__(inner.checks, None, None)
        self.inner, self.watch = inner, watch

    @property
    def done(self) -> bool:
        return self.inner.done

    def result(self) -> int:
        with self.watch:
            return self.inner.result()


class TimedVerifier(VerifierPool):
    """The node's VerifierPool, counting hand-offs and timing the node's waits for answers."""

    def __init__(self) -> None:
        super().__init__(VERIFY_THREADS)
        self.wait = Stopwatch()
        self.calls = 0
        self.signatures = 0
        self.pooled_calls = 0

    def submit(self, checks: Sequence[SigCheck]) -> Pending:
        self.calls += 1
        self.signatures += len(checks)
        self.pooled_calls += len(checks) >= INLINE_BELOW
        return TimedPending(super().submit(checks), self.wait)

    def workers_cpu_s(self) -> float:
        return sum(cpu_seconds(pid) or 0.0 for pid in self.worker_pids())


class TimedNode(Node):
    """The real node, timing staging (apply_block's rules and the hand-offs to the verifier)
    and what it does after the store commit (mempool, listeners)."""

    stage = Stopwatch()
    adopt = Stopwatch()

    def stage_batch(self, *args: Any, **kwargs: Any) -> Any:
        with self.stage:
            return super().stage_batch(*args, **kwargs)

    def _adopt(self, *args: Any, **kwargs: Any) -> None:
        with self.adopt:
            super()._adopt(*args, **kwargs)


def decode_batch(raws: Sequence[bytes]) -> list[Block]:
    """What the syncing node does with a Blocks reply before staging it (peers._decode_batch):
    canonical decode of each block and the chain check."""
    blocks = [decode(raw, Block) for raw in raws]
    for parent, child in zip(blocks, blocks[1:]):
        if child.header.prev_hash != block_hash(parent.header):
            raise AssertionError("replayed blocks do not form a chain")
    return blocks


def replay(snapshot_dir: Path, tail: Sequence[bytes], profile: bool) -> dict[str, Any]:
    """Apply `tail` on a copy of the store at its parent height (snapshot_dir holds it) through
    stage_batch / finish_batch in batches of MAX_BLOCKS_PER_BATCH, as the syncing daemon does, timing
    each phase; with `profile`, a second pass on another copy runs under cProfile."""
    results = _replay_once(snapshot_dir, tail, None)
    log("replaying them again with their input signatures skipped (assume-valid)")
    assumed = _replay_once(snapshot_dir, tail, None, assume_valid=True)
    results["assume_valid"] = {key: assumed[key] for key in ("blocks_per_s", "signatures", "main_cpu_ms",
                                                             "workers_cpu_ms")}
    if profile:
        profiler = cProfile.Profile(time.thread_time)  # the node thread's CPU, as the phases
        _replay_once(snapshot_dir, tail, profiler)
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(20)
        results["profile"] = out.getvalue()
    return results


def _replay_once(
    snapshot_dir: Path, tail: Sequence[bytes], profiler: cProfile.Profile | None, assume_valid: bool = False,
) -> dict[str, Any]:
    """One replay (`replay`). `assume_valid`: each download is staged with its last block as the
    assume-valid block, so every other block skips its input signatures, as a sync below a
    proven assume-valid block would (docs/STATE_ROOT.md: today a daemon proves it only for the
    blocks staged with that block)."""
    from snode.core.genesis import genesis_state, regtest_genesis

    state0, block0, consensus = genesis_state(regtest_genesis(), PARAMS)
    copy = snapshot_dir.parent / f"{snapshot_dir.name}-replay"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(snapshot_dir, copy)
    store = TimedStore.open(copy / DATABASE_FILE, genesis_block=block0, genesis_state=state0)
    assert isinstance(store, TimedStore)
    store.commit = Stopwatch()
    verifier = TimedVerifier()
    node = TimedNode(params=PARAMS, consensus=consensus, store=store, state=store.load_state(),
                     identity=None, producer_key=None, verifier=verifier)
    node.stage, node.adopt = Stopwatch(), Stopwatch()
    decoding, finishing = Stopwatch(), Stopwatch()
    try:
        if profiler is not None:
            profiler.enable()
        # As the daemon's sync loop: downloads are joined into store batches of
        # SYNC_STORE_BLOCKS, and batch N+1 is staged before batch N is finished.
        staged = None
        for start in range(0, len(tail), MAX_BLOCKS_PER_BATCH):
            with decoding:
                blocks = decode_batch(tail[start:start + MAX_BLOCKS_PER_BATCH])
            node.assume_valid = block_hash(blocks[-1].header) if assume_valid else None
            if staged is not None and len(staged.commits) + len(blocks) <= SYNC_STORE_BLOCKS:
                staged = node.stage_batch(blocks, int(time.time()), extending=staged)
                continue
            batch = node.stage_batch(blocks, int(time.time()), after=staged)
            if staged is not None:
                with finishing:  # more to come: the state rows may wait, as in the daemon
                    node.finish_batch(staged, int(time.time()), defer_state=True)
            staged = batch
        assert staged is not None
        with finishing:
            node.finish_batch(staged, int(time.time()))
        if profiler is not None:
            profiler.disable()
        workers_cpu = verifier.workers_cpu_s()
    finally:
        node.close()
        shutil.rmtree(copy, ignore_errors=True)
    n = len(tail)
    phases = {"decode": decoding, "stage": node.stage, "finish": finishing, "wait": verifier.wait,
              "commit": store.commit, "adopt": node.adopt}
    wall = decoding.wall + node.stage.wall + finishing.wall
    cpu = decoding.cpu + node.stage.cpu + finishing.cpu
    results: dict[str, Any] = {
        "blocks": n,
        "blocks_per_s": n / wall,
        "main_cpu_ms": 1000 * cpu / n,
        "workers_cpu_ms": 1000 * workers_cpu / n,
        "verify_calls": verifier.calls,
        "verify_pooled_calls": verifier.pooled_calls,
        "signatures": verifier.signatures,
        "ms": {name: 1000 * w.wall / n for name, w in phases.items()},
        "cpu_ms": {name: 1000 * w.cpu / n for name, w in phases.items()},
    }
    for key in ("ms", "cpu_ms"):
        ms = results[key]
        ms["store"] = ms["commit"] - ms["wait"]
    return results


# --- the benchmark ------------------------------------------------------------------------

def run(profile: bool = False, blocks: int = BLOCKS, runs: int = SYNC_RUNS) -> dict[str, Any]:
    """Every figure of this benchmark, as a dict (see `report`): a `blocks`-block chain, synced
    `runs` times."""
    if blocks <= REPLAY_BLOCKS:
        raise ValueError(f"blocks must be more than REPLAY_BLOCKS ({REPLAY_BLOCKS:,}), not {blocks:,}")
    if runs < 1:
        raise ValueError(f"runs must be at least 1, not {runs}")
    started = time.perf_counter()
    # The limit is what a signature costs when first seen: the daemons verify each once, but the
    # limit's sample is verified over and over (the in-process replay's inline checks too).
    signature_cache(False)
    with tempfile.TemporaryDirectory(prefix="snode-sync-bench-") as tmp:
        workdir = Path(tmp)
        log(f"building a {blocks:,}-block regtest chain with {SERVICE_NODES:,} service nodes")
        chain = SyncChain(
            workdir / "source", blocks=blocks, service_nodes=SERVICE_NODES,
            transfers_per_block=TRANSFERS_PER_BLOCK, spenders=SPENDERS, sample_size=VERIFY_SAMPLES,
            progress=log, snapshot_at=blocks - REPLAY_BLOCKS, snapshot_dir=workdir / "snapshot",
        )
        stats: ChainStats = chain.build()
        tip_hash, sample, tail = chain.state.tip_hash, chain.sample, chain.tail
        # The builder's states and wallets go: the replay below should run in a heap the size
        # of a node's, not with a second chain state beside it for the collector to walk.
        del chain
        gc.collect()
        log(f"built in {stats.build_s:.1f} s")
        syncs, limits = measure_syncs(workdir, workdir / "source", tip_hash, sample, blocks, runs)
        log(f"replaying the last {REPLAY_BLOCKS:,} blocks in-process")
        breakdown = replay(workdir / "snapshot", tail, profile)
    sigs_per_block = stats.signatures / stats.blocks
    for number, sync in enumerate(syncs):
        # Each run against the better of the limits measured just before and just after it.
        around = limits[number:number + 2]
        sync["verify_per_s"] = max(limit["threads"] for limit in around)
        sync["bound_blocks_per_s"] = sync["verify_per_s"] / sigs_per_block
        sync["ratio"] = sync["blocks_per_s"] / sync["bound_blocks_per_s"]
        sync["ratio_after_start"] = sync["blocks_per_s_after_start"] / sync["bound_blocks_per_s"]
        # Load-independent: the share of the syncing daemon's CPU time per block that verifying
        # its signatures alone takes (both in CPU seconds, so neighbours' load cancels out).
        sync["verify_alone_cpu_ms"] = 1000 * sigs_per_block / max(limit["per_cpu_s"] for limit in around)
        sync["cpu_share"] = sync["verify_alone_cpu_ms"] / sync["cpu_ms_per_block_after_start"]
    median = sorted(syncs, key=lambda r: r["ratio"])[len(syncs) // 2]
    for sync in syncs:  # each assume-valid sync against the full one of the same run, just before it
        sync["assume_valid"]["speedup"] = sync["assume_valid"]["blocks_per_s"] / sync["blocks_per_s"]
        sync["assume_valid"]["speedup_after_start"] = (sync["assume_valid"]["blocks_per_s_after_start"]
                                                       / sync["blocks_per_s_after_start"])
    verify_rate = max(limit["threads"] for limit in limits)
    verify_cpu_rate = max(limit["per_cpu_s"] for limit in limits)
    replay_sigs = breakdown["signatures"] / breakdown["blocks"]
    return {
        "chain": asdict(stats),
        "signatures_per_block": sigs_per_block,
        "verify_per_s": verify_rate,
        "verify_per_s_runs": [limit["threads"] for limit in limits],
        "verify_one_core_per_s": max(limit["one_core"] for limit in limits),
        "verify_per_cpu_s": verify_cpu_rate,
        "runs": syncs,
        "sync": median,
        "replay": {
            **breakdown,
            "signatures_per_block": replay_sigs,
            "bound_blocks_per_s": verify_rate / replay_sigs,
            "ratio": breakdown["blocks_per_s"] / (verify_rate / replay_sigs),
            "verify_alone_cpu_ms": 1000 * replay_sigs / verify_cpu_rate,
            "cpu_share": 1000 * replay_sigs / verify_cpu_rate
            / (breakdown["main_cpu_ms"] + breakdown["workers_cpu_ms"]),
        },
        "total_s": time.perf_counter() - started,
    }


def _verdict(ratio: float) -> str:
    return verdict(ratio >= TARGET_RATIO)


def report(results: dict[str, Any], console: Console) -> None:
    """Print the figures of `run`, each ratio with its target and verdict."""
    chain, sync, rp = results["chain"], results["sync"], results["replay"]
    console.print()
    console.print("[bold]sync: a real snoded syncing from a local peer, against Ed25519 verification[/]")
    console.print(
        f"chain: {chain['blocks']:,} blocks, {chain['service_nodes']:,} service nodes "
        f"({chain['active_service_nodes']:,} active), {chain['transfers']:,} transfers, "
        f"{chain['bytes'] / 1e6:.1f} MB, {chain['utxos']:,} unspent outputs at the tip; built "
        f"in-process in {chain['build_s']:.0f} s"
    )
    console.print(
        f"signatures: {chain['signatures']:,} ({chain['producer_signatures']:,} producer, "
        f"{chain['input_signatures']:,} input, {chain['other_signatures']:,} registration and "
        f"vote) = {results['signatures_per_block']:.2f} per block"
    )
    runs = ", ".join(f"{r:,.0f}" for r in results["verify_per_s_runs"])
    console.print(
        f"limit: {results['verify_per_s']:,.0f} Ed25519 verifications/s on {VERIFY_THREADS} "
        f"threads (ThreadedVerifier; best of {runs}, measured before the first sync and after each; "
        f"one core {results['verify_one_core_per_s']:,.0f}/s, {results['verify_per_cpu_s']:,.0f} per "
        f"CPU-second); each sync is compared with the better limit of the two around it"
    )
    table = figures_table("bound (same run)")
    bound = f"{sync['bound_blocks_per_s']:,.0f} blocks/s"
    table.add_row(f"sync {chain['blocks']:,} blocks, from daemon start (median of {len(results['runs'])})",
                  f"{sync['blocks_per_s']:,.0f} blocks/s", bound, f"{sync['ratio']:.3f}",
                  f">= {TARGET_RATIO}", _verdict(sync["ratio"]))
    table.add_row("  start-up excluded", f"{sync['blocks_per_s_after_start']:,.0f} blocks/s", bound,
                  f"{sync['ratio_after_start']:.3f}", f"(>= {TARGET_RATIO})",
                  _verdict(sync["ratio_after_start"]))
    table.add_row("  CPU per block: daemon vs verify alone",
                  f"{sync['cpu_ms_per_block_after_start']:.3f} ms", f"{sync['verify_alone_cpu_ms']:.3f} ms",
                  f"{sync['cpu_share']:.3f}", "(informational)", "")
    if sync.get("peak_rss_mb") is not None:
        table.add_row(f"  syncing daemon peak RSS ({SERVICE_NODES:,} SNs, {chain['blocks']:,} blocks)",
                      f"{sync['peak_rss_mb']:.0f} MiB ({sync['peak_rss_mb'] * 1.048576:.0f} MB)",
                      f"{RSS_TARGET_MB} MB", "", f"< {RSS_TARGET_MB} MB (issue #16)",
                      verdict(sync["peak_rss_mb"] * 1.048576 < RSS_TARGET_MB))
        table.add_row("  + its signature workers (RSS at the end)", f"{sync['workers_rss_mb']:.0f} MiB",
                      "", "", "", "")
    assumed_sync = sync["assume_valid"]
    table.add_row("  the same with --assume-valid (the tip) vs full verification, same run",
                  f"{assumed_sync['blocks_per_s']:,.0f} blocks/s", f"{sync['blocks_per_s']:,.0f} blocks/s",
                  f"{assumed_sync['speedup']:.2f}", "(informational)", "")
    table.add_row("    start-up excluded", f"{assumed_sync['blocks_per_s_after_start']:,.0f} blocks/s",
                  f"{sync['blocks_per_s_after_start']:,.0f} blocks/s", f"{assumed_sync['speedup_after_start']:.2f}",
                  "(informational)", "")
    table.add_row("    CPU per block (daemon and its workers), with vs without",
                  f"{assumed_sync['cpu_ms_per_block_after_start']:.3f} ms",
                  f"{sync['cpu_ms_per_block_after_start']:.3f} ms",
                  f"{sync['cpu_ms_per_block_after_start'] / assumed_sync['cpu_ms_per_block_after_start']:.2f}",
                  "(informational)", "")
    table.add_row(f"in-process replay, last {rp['blocks']:,}", f"{rp['blocks_per_s']:,.0f} blocks/s",
                  f"{rp['bound_blocks_per_s']:,.0f} blocks/s", f"{rp['ratio']:.3f}", "(informational)", "")
    assumed = rp["assume_valid"]
    table.add_row("  the same, input signatures skipped (assume-valid) vs checked",
                  f"{assumed['blocks_per_s']:,.0f} blocks/s", f"{rp['blocks_per_s']:,.0f} blocks/s",
                  f"{assumed['blocks_per_s'] / rp['blocks_per_s']:.2f}", "(informational)", "")
    console.print(table)
    console.print(
        f"headers first: the header chain took {sync['headers_s']:.1f} s of the sync "
        f"({assumed_sync['headers_s']:.1f} s with --assume-valid, where {assumed_sync['assumed_blocks']:,} of "
        f"{chain['blocks']:,} blocks skipped their input signatures); assume-valid per run (rate, CPU per block): "
        + "; ".join(f"{r['assume_valid']['speedup']:.2f}, "
                    f"{r['cpu_ms_per_block_after_start'] / r['assume_valid']['cpu_ms_per_block_after_start']:.2f}"
                    for r in results["runs"]))
    console.print("every sync run (ratio from daemon start / start-up excluded / CPU share; bound): " + "; ".join(
        f"{r['ratio']:.3f} / {r['ratio_after_start']:.3f} / {r['cpu_share']:.3f}; {r['bound_blocks_per_s']:,.0f}"
        for r in results["runs"]
    ))
    console.print(
        f"median sync: {sync['total_s']:.2f} s from starting the empty snoded to height {chain['blocks']:,} with "
        f"target_height 0 (RPC up after {sync['rpc_up_s']:.2f} s, first blocks at "
        f"{sync['first_block_s']:.2f} s, height {sync['first_height']:,}); polled every {POLL_S} s, "
        f"every {POLL_NEAR_END_S} s over the last {POLL_NEAR_END_BLOCKS:,} blocks; "
        f"CPU: syncing daemon {sync['cpu_s']:.1f} s, serving daemon {sync['source_cpu_s']:.1f} s"
    )
    ms, cpu = rp["ms"], rp["cpu_ms"]
    console.print(
        f"replay, per block, wall ms (node thread's CPU ms): decode {ms['decode']:.3f} "
        f"({cpu['decode']:.3f}) + stage (apply_block's rules, hand-offs) {ms['stage']:.3f} "
        f"({cpu['stage']:.3f}) + finish {ms['finish']:.3f} ({cpu['finish']:.3f}) = store rows and "
        f"commit {ms['store']:.3f} ({cpu['store']:.3f}) + waiting for signatures {ms['wait']:.3f} + "
        f"adopt {ms['adopt']:.3f} ({cpu['adopt']:.3f}); CPU: node thread {rp['main_cpu_ms']:.3f} ms + "
        f"verify workers {rp['workers_cpu_ms']:.3f} ms, against verifying the same signatures alone: "
        f"{rp['verify_alone_cpu_ms']:.3f} CPU ms ({1000 * rp['signatures_per_block'] / results['verify_per_s']:.3f} "
        f"ms at the 2-thread rate); CPU share {rp['cpu_share']:.3f}"
    )
    console.print(
        f"replay: {rp['signatures']:,} signatures ({rp['signatures_per_block']:.2f} per block) in "
        f"{rp['verify_calls']:,} hand-offs, {rp['verify_pooled_calls']:,} of them to the worker processes"
    )
    if "profile" in rp:
        console.print()
        console.print("[bold]cProfile of the in-process replay (the node thread: decode, stage, finish)[/]")
        console.print(rp["profile"], markup=False, highlight=False, soft_wrap=True)
    console.print(f"sync benchmark took {results['total_s']:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.sync_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="add a cProfile of the in-process replay")
    parser.add_argument("--blocks", type=int, default=BLOCKS, metavar="N",
                        help=f"blocks in the chain to sync (default {BLOCKS:,}; more than {REPLAY_BLOCKS:,})")
    parser.add_argument("--runs", type=int, default=SYNC_RUNS, metavar="N",
                        help=f"sync runs; the verdict takes the median (default {SYNC_RUNS})")
    args = parser.parse_args()
    if args.blocks <= REPLAY_BLOCKS:
        parser.error(f"--blocks must be more than {REPLAY_BLOCKS:,} (the in-process replay's blocks)")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    from snode.tools.tables import make_console

    report(run(profile=args.profile, blocks=args.blocks, runs=args.runs), make_console())


if __name__ == "__main__":
    main()
