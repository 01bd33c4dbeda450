"""The admin RPC against the limits of this machine (issue 3).

`python -m bench.rpc_bench [--profile]` (also run by `python -m bench`). It builds, in one run, a
regtest chain in a real `snoded --regtest` subprocess, through its RPC only: the regtest faucet
pays operator and contributor keys (fanned out through a few intermediate keys, since outputs
unlock 10 blocks after their block), then 2,000 service nodes are registered with real,
SN-key-signed registration transactions (4 in 5 solo; 1 in 5 a pool of three whose contributors
stake afterwards, half of the pools left awaiting their last contributor), the funded ones are
activated by state changes of the regtest authority (the quorum while no node is active), and a
few more blocks make them payable.

Then, each beside its limit measured in the same run:
- `get_service_nodes` (all 2,000 records): median and p99 latency of the full request/response
  over one keep-alive connection, against the time msgspec takes to serialise the same records
  alone. Targets: median < 10 ms and median <= 3x serialise. The daemon caches the encoded list
  until the tip or the uptime proofs change, so the first call after a new block is measured too
  (informational: on a live network every accepted proof makes the next call such a call).
- `get_info` requests/s over 32 keep-alive connections, against a trivial aiohttp JSON handler
  (bench/rpc_trivial_server.py, same event loop) driven by the same load generator: `wrk` when
  installed, else bench/rpc_loadgen.py in its own process; back-to-back pairs of runs, median
  ratio. Target: >= 0.7x the trivial rate. Each server's CPU time per request is shown too.

`--profile` adds a cProfile of building the get_service_nodes answer with a stale cache.
Everything listens on 127.x addresses only; every process started here is stopped by its pid.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import msgspec
from rich.console import Console

from bench import daemons
from bench.daemons import BENCH_DIR, RPC_NET, Daemon, child_env, loopback_ip, stop_process
from bench.report import figures_table, verdict
from snode.api.client import RpcClient
from snode.common.procs import cpu_seconds
from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.registration import sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import UtxoEntry
from snode.core.state_change import sign_votes, state_change_tx
from snode.core.transactions import (
    OutPoint,
    Reservation,
    Stake,
    Transaction,
    Transfer,
    TxOut,
    txid,
)
from snode.core.txbuilder import Spendable, build_spend
from snode.params import COIN, REGTEST, REGTEST_AUTHORITY_SEED, REGTEST_FAUCET_SEED

SERVICE_NODES: Final = 2_000
POOL_EVERY: Final = 5
"""Every fifth service node is a pool: operator 100,000 coins, two reserved contributors."""
POOL_SHARES: Final = (100_000 * COIN, 60_000 * COIN, 40_000 * COIN)
OUTPUTS_PER_TX: Final = 1_000
"""Payments per fan-out transaction (about 44 bytes each; a transaction holds 100 KB)."""
LATENCY_CALLS: Final = 300
LATENCY_WARMUP: Final = 10
COLD_CALLS: Final = 20
SERIALISE_RUNS: Final = 200
LOAD_CONNECTIONS: Final = 32
LOAD_SECONDS: Final = 2
LOAD_WARMUP_SECONDS: Final = 1
LOAD_PAIRS: Final = 15
"""Back-to-back runs of the trivial handler and of get_info (interleaved: which goes first
alternates); the ratio is the median pair's, its spread the pairs' range, and its 96 %
interval the 4th and 12th of the 15 pair ratios in order (a median's order-statistic interval:
the chance that the true median lies outside it is 2 x P(Binomial(15, 1/2) <= 3) = 0.035)."""
MEDIAN_INTERVAL: Final = (3, 11)
"""Indexes (from 0) of the sorted pair ratios that bound the median's 96 % interval."""
TARGET_MEDIAN_MS: Final = 10.0
TARGET_SERIALISE_RATIO: Final = 3.0
TARGET_INFO_RATIO: Final = 0.9
"""Issue #16 (the first round's target was 0.7)."""
START_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 15.0
SN_BODY: Final = b'{"jsonrpc":"2.0","id":1,"method":"get_service_nodes","params":{}}'
INFO_BODY: Final = '{"jsonrpc":"2.0","id":1,"method":"get_info","params":{}}'
WRK_SCRIPT: Final = (
    'wrk.method = "POST"\n'
    "wrk.body = '{body}'\n"
    'wrk.headers["Content-Type"] = "application/json"\n'
)


log: Final = partial(daemons.log, "rpc_bench")


def key(label: str) -> SigningKey:
    """A deterministic key for this benchmark."""
    return SigningKey(hashlib.blake2b(f"snode rpc bench {label}".encode(), digest_size=32).digest())


# --- processes ----------------------------------------------------------------------------

def free_port(host: str) -> int:
    """A TCP port free on host right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Server:
    """A server process this benchmark started."""

    host: str
    port: int
    pid: int


@contextmanager
def daemon(workdir: Path) -> Iterator[tuple[RpcClient, Server]]:
    """A `snoded --regtest` of its own on a 127.x address; stopped by pid on the way out."""
    host = loopback_ip(RPC_NET, 1)
    rpc_port, p2p_port = free_port(host), free_port(host)
    snoded = Daemon(host, workdir / "node", rpc_port=rpc_port, p2p_port=p2p_port,
                    stdout=workdir / "snoded.stdout", stderr=workdir / "snoded.stderr", rpc_timeout=120,
                    start_timeout=START_TIMEOUT, stop_timeout=STOP_TIMEOUT, log=log)
    try:
        snoded.start()
        snoded.wait_for_rpc()
        yield snoded.rpc, Server(host, rpc_port, snoded.pid)
    finally:
        snoded.stop()


@contextmanager
def trivial_server() -> Iterator[Server]:
    """bench/rpc_trivial_server.py in its own process. Stopped by pid."""
    host = loopback_ip(RPC_NET, 2)
    port = free_port(host)
    proc = subprocess.Popen(
        [sys.executable, str(BENCH_DIR / "rpc_trivial_server.py"), host, str(port)],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, env=child_env(),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "ready", or EOF if it died
        if line.strip() != b"ready":
            raise RuntimeError(f"the trivial server did not start (exit code {proc.poll()})")
        yield Server(host, port, proc.pid)
    finally:
        stop_process(proc, STOP_TIMEOUT)


# --- the chain ----------------------------------------------------------------------------

class ChainBuilder:
    """Registers SERVICE_NODES service nodes through one daemon's RPC, with signed transactions."""

    def __init__(self, rpc: RpcClient) -> None:
        self.rpc = rpc
        self.params = REGTEST
        self.faucet = SigningKey(REGTEST_FAUCET_SEED)
        self.authority = SigningKey(REGTEST_AUTHORITY_SEED)
        self.operators = [key(f"operator {i}") for i in range(SERVICE_NODES)]
        self.sn_keys = [key(f"service node {i}") for i in range(SERVICE_NODES)]
        self.pools = [i for i in range(SERVICE_NODES) if i % POOL_EVERY == POOL_EVERY - 1]
        self.contributors = {i: (key(f"contributor a {i}"), key(f"contributor b {i}")) for i in self.pools}
        self.awaiting = set(self.pools[1::2])
        """Pools whose second contributor never stakes: they stay awaiting contributions."""
        self.coins: dict[bytes, list[Spendable]] = {}
        """The outputs of each benchmark key that its next transaction may spend."""

    def send(self, tx: Transaction) -> None:
        self.rpc.call("send_raw_transaction", {"tx_hex": encode(tx).hex()})

    def mine(self, blocks: int) -> None:
        """Mine `blocks` blocks; the first must take every pending transaction."""
        self.rpc.call("generate_blocks", {"blocks": blocks})
        left = self.rpc.call("get_info")["mempool_size"]
        if left:
            raise RuntimeError(f"{left} transactions are still in the mempool after mining")

    def mine_and_unlock(self) -> None:
        """Mine the pending transactions, then until their outputs may be spent."""
        self.mine(1 + self.params.unlock_confirmations)

    def pay(self, payer: SigningKey, spendable: Sequence[Spendable], payments: Sequence[tuple[bytes, int]]) -> None:
        """One transfer from payer; records the payees' new outputs for their next spend."""
        tx = build_spend(spendable, payer, [TxOut(k, a) for k, a in payments], Transfer(), self.params)
        self.send(tx)
        tid = txid(tx)
        for index, out in enumerate(tx.outputs):
            self.coins.setdefault(out.owner, []).append(
                (OutPoint(tid, index), UtxoEntry(out.owner, out.amount, 0))
            )

    def faucet_outputs(self) -> list[Spendable]:
        address = encode_address(self.params.address_prefix, self.faucet.public)
        result = self.rpc.call("get_outputs", {"address": address})
        return [
            (OutPoint(bytes.fromhex(o["txid"]), o["index"]),
             UtxoEntry(self.faucet.public, o["amount"], o["unlock_height"]))
            for o in result["outputs"] if o["unlock_height"] <= result["height"] + 1
        ]

    def fund(self) -> None:
        """Faucet -> intermediate keys -> every operator and contributor (two unlock waits)."""
        payments: list[tuple[bytes, int]] = []
        for i, op in enumerate(self.operators):
            stake = POOL_SHARES[0] if i in self.contributors else self.params.staking_requirement
            payments.append((op.public, stake + COIN))
        for a, b in self.contributors.values():
            payments += [(a.public, POOL_SHARES[1] + COIN), (b.public, POOL_SHARES[2] + COIN)]
        chunks = [payments[s:s + OUTPUTS_PER_TX] for s in range(0, len(payments), OUTPUTS_PER_TX)]
        middles = [key(f"intermediate {n}") for n in range(len(chunks))]
        self.pay(self.faucet, self.faucet_outputs(),
                 [(m.public, sum(a for _, a in chunk) + COIN) for m, chunk in zip(middles, chunks)])
        self.mine_and_unlock()
        for m, chunk in zip(middles, chunks):
            self.pay(m, self.coins.pop(m.public), chunk)
        self.mine_and_unlock()

    def register(self, expiry: int) -> None:
        """One registration transaction per service node, paid by its operator."""
        for i, (op, sn) in enumerate(zip(self.operators, self.sn_keys)):
            reservations: tuple[Reservation, ...]
            if i in self.contributors:
                a, b = self.contributors[i]
                reservations = (Reservation(op.public, POOL_SHARES[0]), Reservation(a.public, POOL_SHARES[1]),
                                Reservation(b.public, POOL_SHARES[2]))
                fee_ppm = 50_000
            else:
                reservations = (Reservation(op.public, self.params.staking_requirement),)
                fee_ppm = 0
            reg = sign_registration(sn, self.params, fee_ppm, reservations, expiry)
            self.send(build_spend(self.coins.pop(op.public), op, [], reg, self.params))
        self.mine(1)

    def stake(self) -> None:
        """Every pool's first contributor stakes; every other pool's second one too."""
        for i in self.pools:
            a, b = self.contributors[i]
            stakers = [(a, POOL_SHARES[1])] + ([] if i in self.awaiting else [(b, POOL_SHARES[2])])
            for staker, amount in stakers:
                payload = Stake(sn_pubkey=self.sn_keys[i].public, amount=amount)
                self.send(build_spend(self.coins.pop(staker.public), staker, [], payload, self.params))
        self.mine(1)

    def activate(self) -> int:
        """Activate every funded node (the authority is the quorum while none is active)."""
        quorum_height = int(self.rpc.call("get_height")["height"])
        funded = [sn for n, sn in enumerate(self.sn_keys) if n not in self.awaiting]
        kind, reason = StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF
        for sn in funded:
            votes = sign_votes([self.authority], self.params.network_id, sn.public, kind, reason, quorum_height)
            self.send(state_change_tx(votes, sn.public, kind, reason, quorum_height))
        self.mine(1 + self.params.payable_grace)
        return len(funded)

    def build(self) -> dict[str, Any]:
        """The whole chain; seconds per phase and what get_service_nodes then shows."""
        phases: dict[str, float] = {}
        for name, step in (
            ("fund", self.fund),
            ("register", lambda: self.register(int(time.time()) + 7 * 86400)),
            ("stake", self.stake),
            ("activate", self.activate),
        ):
            t0 = time.perf_counter()
            step()
            phases[name] = time.perf_counter() - t0
            log(f"setup: {name} done in {phases[name]:.1f} s")
        records = self.rpc.call("get_service_nodes")["service_node_states"]
        by_status: dict[str, int] = {}
        for r in records:
            by_status[r["status"]] = by_status.get(r["status"], 0) + 1
        if len(records) != SERVICE_NODES:
            raise RuntimeError(f"get_service_nodes returned {len(records)} records, not {SERVICE_NODES}")
        return {"phases": phases, "records": len(records), "by_status": by_status,
                "height": int(self.rpc.call("get_height")["height"])}


# --- get_service_nodes --------------------------------------------------------------------

def _timed_post(conn: http.client.HTTPConnection, body: bytes) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    conn.request("POST", "/json_rpc", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    elapsed = time.perf_counter() - t0
    if resp.status != 200:
        raise RuntimeError(f"get_service_nodes answered HTTP {resp.status}")
    return elapsed, data


def percentile(samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation."""
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def measure_service_nodes(rpc: RpcClient) -> dict[str, Any]:
    """Latency of the full list (cached and right after a new block) against serialising it."""
    conn = http.client.HTTPConnection(rpc.host, rpc.port, timeout=60)
    try:
        for _ in range(LATENCY_WARMUP):
            _, body = _timed_post(conn, SN_BODY)
        warm = [_timed_post(conn, SN_BODY)[0] for _ in range(LATENCY_CALLS)]
        cold = []
        for _ in range(COLD_CALLS):
            rpc.call("generate_blocks", {"blocks": 1})
            cold.append(_timed_post(conn, SN_BODY)[0])
    finally:
        conn.close()
    records = json.loads(body)["result"]["service_node_states"]
    if len(records) != SERVICE_NODES:
        raise RuntimeError(f"get_service_nodes returned {len(records)} records")
    encoder = msgspec.json.Encoder()
    times = []
    for _ in range(SERIALISE_RUNS):
        t0 = time.perf_counter()
        encoder.encode(records)
        times.append(time.perf_counter() - t0)
    serialise_ms = statistics.median(times) * 1000
    median_ms = statistics.median(warm) * 1000
    cold_ms = statistics.median(cold) * 1000
    return {
        "response_bytes": len(body),
        "median_ms": median_ms,
        "p99_ms": percentile(warm, 99) * 1000,
        "serialise_ms": serialise_ms,
        "ratio": median_ms / serialise_ms,
        "after_block_median_ms": cold_ms,
        "after_block_p99_ms": percentile(cold, 99) * 1000,
        "after_block_ratio": cold_ms / serialise_ms,
    }


# --- get_info throughput ------------------------------------------------------------------

def wrk_rate(host: str, port: int, script: Path, seconds: float) -> tuple[float, int]:
    """(requests/s, requests) that `wrk -t2 -c32` gets from POST /json_rpc in `seconds`."""
    url = f"http://{host}:{port}/json_rpc"
    out = subprocess.run(
        ["wrk", "-t2", f"-c{LOAD_CONNECTIONS}", f"-d{seconds:g}s", "-s", str(script), url],
        capture_output=True, text=True, timeout=seconds + 30, check=True,
    ).stdout
    rate = re.search(r"Requests/sec:\s*([\d.]+)", out)
    if rate is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    bad = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    if bad is not None:
        raise RuntimeError(f"{bad.group(1)} requests to {url} failed:\n{out}")
    count = re.search(r"(\d+) requests in", out)
    return float(rate.group(1)), int(count.group(1)) if count else 0


def loadgen_rate(host: str, port: int, seconds: float) -> tuple[float, int]:
    """(requests/s, requests answered in all) of bench/rpc_loadgen.py (own process) in `seconds`."""
    out = subprocess.run(
        [sys.executable, str(BENCH_DIR / "rpc_loadgen.py"), host, str(port), str(seconds),
         str(LOAD_CONNECTIONS), INFO_BODY],
        capture_output=True, text=True, timeout=seconds + 60, check=True, env=child_env(),
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    if result["errors"]:
        raise RuntimeError(f"{result['errors']} requests to {host}:{port} failed")
    # The server's CPU time over this run also covers the warm-up's requests.
    return float(result["rate"]), int(result["requests"]) + int(result["warmup_requests"])


def measure_get_info(rpc: RpcClient, servers: dict[str, Server], workdir: Path) -> dict[str, Any]:
    """get_info requests/s against the trivial handler's: same load generator, in pairs of
    back-to-back runs (alternating which goes first), so that both see the same machine.

    Also each server's own CPU time per request, which other load on the machine disturbs less.
    """
    if "result" not in json.loads(rpc.raw(INFO_BODY)[2]):
        raise RuntimeError("get_info does not answer a result")
    tool = "wrk" if shutil.which("wrk") else "rpc_loadgen"
    if tool == "wrk":
        script = workdir / "post.lua"
        script.write_text(WRK_SCRIPT.format(body=INFO_BODY))

        def load(host: str, port: int, seconds: float) -> tuple[float, int]:
            return wrk_rate(host, port, script, seconds)
    else:
        log("wrk is not installed (install with: apt-get install wrk); using bench/rpc_loadgen.py")
        load = loadgen_rate
    for server in servers.values():
        load(server.host, server.port, LOAD_WARMUP_SECONDS)
    loads = [os.getloadavg()[0]]
    rates: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    for n in range(LOAD_PAIRS):
        log(f"get_info load, pair {n + 1} of {LOAD_PAIRS} ({tool})")
        for name in (list(servers) if n % 2 == 0 else list(servers)[::-1]):
            server = servers[name]
            before = cpu_seconds(server.pid)
            rate, count = load(server.host, server.port, LOAD_SECONDS)
            after = cpu_seconds(server.pid)
            rates[name].append(rate)
            if before is not None and after is not None and count:
                cpu[name].append((after - before) / count * 1e6)
    loads.append(os.getloadavg()[0])
    ratios = [d / t for d, t in zip(rates["get_info"], rates["trivial"])]
    ordered = sorted(ratios)
    result: dict[str, Any] = {
        "load_generator": tool,
        "range": (ordered[0], ordered[-1]),
        "interval": (ordered[MEDIAN_INTERVAL[0]], ordered[MEDIAN_INTERVAL[1]]),
        "load_average": loads,
        "trivial_per_s": statistics.median(rates["trivial"]),
        "get_info_per_s": statistics.median(rates["get_info"]),
        "ratio": statistics.median(ratios),
        "pair_ratios": ratios,
    }
    if cpu["trivial"] and cpu["get_info"]:
        result["trivial_cpu_us"] = statistics.median(cpu["trivial"])
        result["get_info_cpu_us"] = statistics.median(cpu["get_info"])
        result["cpu_ratio"] = result["trivial_cpu_us"] / result["get_info_cpu_us"]
    return result


# --- profile ------------------------------------------------------------------------------

def profile_service_nodes(data_dir: Path, runs: int = 5, top: int = 15) -> str:
    """cProfile of building the full get_service_nodes answer (cache cleared before each call),
    in this process, on the stopped daemon's data dir."""
    import asyncio
    import cProfile
    import io
    import pstats

    from snode.api.types import GetServiceNodesParams
    from snode.app.datadir import DataDir
    from snode.core.genesis import genesis_state
    from snode.node.node import Node
    from snode.rpc.methods import MethodTable
    from snode.store import ChainStore

    datadir = DataDir(data_dir)
    state0, block0, consensus = genesis_state(datadir.genesis(REGTEST, None), REGTEST)
    store = ChainStore.open(datadir.database, genesis_block=block0, genesis_state=state0)
    node = Node(params=REGTEST, consensus=consensus, store=store, state=store.load_state(),
                identity=None, producer_key=None)
    try:
        methods = MethodTable(node, request_stop=lambda: None)
        params = GetServiceNodesParams()

        async def cold_calls() -> None:
            for _ in range(runs):
                methods.answers._list = None  # the whole list again; unchanged records' encodings are kept
                await methods.get_service_nodes(params)

        profiler = cProfile.Profile()
        profiler.enable()
        asyncio.run(cold_calls())
        profiler.disable()
    finally:
        node.close()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    return out.getvalue()


# --- the benchmark ------------------------------------------------------------------------

def run(profile: bool = False) -> dict[str, Any]:
    """Every figure of this benchmark, as a dict (see `report`). `profile` adds a cProfile of
    building the get_service_nodes answer when the daemon's cache is stale."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="snode-rpc-bench-") as tmp:
        workdir = Path(tmp)
        log("starting snoded --regtest")
        with daemon(workdir) as (rpc, snoded), trivial_server() as trivial:
            log(f"building a regtest chain with {SERVICE_NODES} service nodes over RPC")
            t0 = time.perf_counter()
            chain = ChainBuilder(rpc).build()
            chain["setup_s"] = time.perf_counter() - t0
            log(f"setup took {chain['setup_s']:.1f} s; measuring get_service_nodes")
            service_nodes = measure_service_nodes(rpc)
            get_info = measure_get_info(rpc, {"trivial": trivial, "get_info": snoded}, workdir)
        results: dict[str, Any] = {"chain": chain, "get_service_nodes": service_nodes, "get_info": get_info}
        if profile:
            log("profiling get_service_nodes in-process on the stopped daemon's data dir")
            results["profile"] = profile_service_nodes(workdir / "node")
    results["total_s"] = time.perf_counter() - started
    return results


def report(results: dict[str, Any], console: Console) -> None:
    """Print the figures of `run` as a table, each with its target and verdict."""
    chain, sn, info = results["chain"], results["get_service_nodes"], results["get_info"]
    console.print()
    console.print("[bold]rpc: the admin RPC of a real snoded --regtest against this machine's limits[/]")
    statuses = ", ".join(f"{n:,} {s}" for s, n in sorted(chain["by_status"].items()))
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in chain["phases"].items())
    console.print(
        f"chain: {chain['records']:,} service nodes ({statuses}) at height {chain['height']}, "
        f"built through RPC in {chain['setup_s']:.1f} s ({phases})"
    )
    table = figures_table("limit (same run)")
    ser = f"{sn['serialise_ms']:.2f} ms"
    table.add_row("get_service_nodes median", f"{sn['median_ms']:.2f} ms", "", "",
                  f"< {TARGET_MEDIAN_MS:g} ms", verdict(sn["median_ms"] < TARGET_MEDIAN_MS))
    table.add_row("get_service_nodes median vs serialise", f"{sn['median_ms']:.2f} ms", ser,
                  f"{sn['ratio']:.2f}", f"<= {TARGET_SERIALISE_RATIO:g}",
                  verdict(sn["ratio"] <= TARGET_SERIALISE_RATIO))
    table.add_row("get_service_nodes p99", f"{sn['p99_ms']:.2f} ms", "", "", "", "")
    table.add_row("  first call after a new block, median", f"{sn['after_block_median_ms']:.2f} ms", ser,
                  f"{sn['after_block_ratio']:.2f}", f"(< {TARGET_MEDIAN_MS:g} ms)",
                  verdict(sn["after_block_median_ms"] < TARGET_MEDIAN_MS))
    table.add_row("  first call after a new block, p99", f"{sn['after_block_p99_ms']:.2f} ms", "", "", "", "")
    table.add_row(f"get_info over {LOAD_CONNECTIONS} connections", f"{info['get_info_per_s']:,.0f}/s",
                  f"{info['trivial_per_s']:,.0f}/s", f"{info['ratio']:.2f}", f">= {TARGET_INFO_RATIO:g}",
                  verdict(info["ratio"] >= TARGET_INFO_RATIO))
    if "cpu_ratio" in info:
        table.add_row("  server CPU per request, trivial / get_info", f"{info['get_info_cpu_us']:.0f} us",
                      f"{info['trivial_cpu_us']:.0f} us", f"{info['cpu_ratio']:.2f}",
                      f"(>= {TARGET_INFO_RATIO:g})", verdict(info["cpu_ratio"] >= TARGET_INFO_RATIO))
    console.print(table)
    console.print(
        f"get_service_nodes: {LATENCY_CALLS} calls over one keep-alive connection, full response "
        f"read ({sn['response_bytes'] / 1e6:.2f} MB); limit = msgspec.json.encode of the same "
        f"records alone (median of {SERIALISE_RUNS}). 'After a new block' = {COLD_CALLS} calls, "
        "each right after generate_blocks, when the daemon's cached answer is stale "
        "(informational: also after every accepted uptime proof)."
    )
    console.print(
        f"get_info: {info['load_generator']}, {LOAD_CONNECTIONS} keep-alive connections, "
        f"{LOAD_PAIRS} interleaved pairs of {LOAD_SECONDS} s runs after a warm-up; rates and ratio "
        f"are medians (pair ratios {', '.join(f'{r:.2f}' for r in info['pair_ratios'])}); limit = "
        "a trivial aiohttp JSON-RPC handler (bench/rpc_trivial_server.py) on the same event loop."
    )
    low, high = info["interval"]
    console.print(
        f"get_info ratio spread: pairs {info['range'][0]:.2f}-{info['range'][1]:.2f}, "
        f"the median's 96 % interval {low:.2f}-{high:.2f} (any two medians inside it are the same "
        f"result on this machine); 1-minute load average {info['load_average'][0]:.1f} before, "
        f"{info['load_average'][1]:.1f} after, on {os.cpu_count()} cores"
    )
    console.print(
        "server CPU per request = the server process's user+system time over a run / requests "
        "answered (informational: less disturbed by other load on the machine than requests/s)."
    )
    if info["load_generator"] != "wrk":
        console.print("wrk is not installed (install with: apt-get install wrk): the in-Python load "
                      "generator ran instead; its figures are not comparable with wrk's.")
    if "profile" in results:
        console.print()
        console.print("[bold]cProfile of building the get_service_nodes answer (cache stale)[/]")
        console.print(results["profile"], markup=False, highlight=False, soft_wrap=True)
    console.print(f"rpc benchmark took {results['total_s']:.0f} s")


if __name__ == "__main__":
    from snode.tools.tables import make_console

    report(run(profile="--profile" in sys.argv[1:]), make_console())
