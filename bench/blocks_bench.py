"""Service-node block production against its floor (issue #12's benchmark).

Measures in one run:
- the network: a devnet of 12 real service-node daemons and an authority daemon, each its own
  process on its own 127.x address; the genesis pays the operators, who register every node;
  the quorums activate them and block production passes to the service nodes;
- the latency: for each of BLOCKS service-node blocks, from the start of the round that made it
  (its parent's timestamp + the block time + round x round time) to the moment the last of the
  12 daemons applied it (each daemon logs the block with a millisecond timestamp): p50 and p99;
- the floor, measured in this process on the CPU clock once the daemons are stopped (so
  neither they nor the machine's other load inflate it: on 2 cores a floor measured beside 13
  busy daemons moved by 2x between runs): what any block must cost at least, one after the other
  on one core: the leader's signature, `needed` validator signatures verified
  (7 of 11), one `apply_block` of a real service-node block of this chain on its parent, and
  two loopback round trips on CurveZMQ (template out and signature back);
- ratio = p50 latency / floor, target <= 3 (issue #12; issue #16 aims at 2);
- the CPU each daemon spends per block (its process and threads over the measured blocks), and
  its median as a ratio of the floor, target <= 4 (issue #27);
- the protocol's work a block beside the floor (`protocol_floor`: every validator signature a
  block carries and the other nodes' uptime proofs, counted from devnet's parameters, and the
  CurveZMQ handshakes each daemon counted over the measured blocks in /metrics, each priced in
  this process), and the CPU per block as a ratio of it;
- the fresh CurveZMQ handshakes a block per SN (`quorum_counts`: the daemons' own counts, in
  and out, and their reachability checks passed by a held connection or made by a handshake):
  counts, which the machine's load does not move;
- with `python -m bench --profile blocks`: where the second service node's CPU goes per block
  (bench/blocks_profile.py: cProfile on its CPU clock inside the daemon, SNODE_PROFILE);
- with `python -m bench --perf blocks` (Python 3.13 or newer, Linux perf): where the third one's
  CPU really goes per block (bench/perf_split.py: `perf record` from outside during the measured
  blocks, Python frames by perf_jit).

Everything listens on 127.x addresses only; every daemon is stopped by its own pid.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import zmq
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from bench import blocks_profile, perf_split
from bench.daemons import BLOCKS_NET, Daemon, loopback_ip
from bench.daemons import log as bench_log
from bench.report import figures_table, verdict
from snode.api.client import RpcFailure
from snode.app.profiling import ENV as PROFILE_ENV
from snode.core.address import encode_address
from snode.core.blocks import Block
from snode.core.crypto import SigningKey, signature_cache, verify
from snode.core.encoding import decode, encode
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis, genesis_state, parse_genesis
from snode.core.pulse import validator_message
from snode.core.registration import parse_command
from snode.core.state import UtxoEntry
from snode.core.transactions import OutPoint
from snode.core.transition import apply_block
from snode.core.txbuilder import build_spend
from snode.params import COIN, DEVNET
from snode.tools.tables import make_console

SERVICE_NODES = 12
BLOCKS = 100
TARGET = 3.0
CPU_TARGET = 4.0
LOG_LINE = re.compile(r"^(\S+ \S+) INFO snode\.node\.node: block (\d+) ([0-9a-f]{16})")


def log(text: str) -> None:
    bench_log("blocks", text)


# --- the floor ----------------------------------------------------------------------------

def _curve_pair() -> tuple[zmq.Context[zmq.Socket[bytes]], zmq.Socket[bytes], str, Callable[[], zmq.Socket[bytes]]]:
    """A context, a CurveZMQ ROUTER bound on loopback, its endpoint, and a maker of DEALERs with
    keys it admits (not connected yet)."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    server_public, server_secret = zmq.curve_keypair()
    client_public, client_secret = zmq.curve_keypair()
    router = ctx.socket(zmq.ROUTER)
    router.curve_server = True
    router.curve_secretkey, router.curve_publickey = server_secret, server_public
    port = router.bind_to_random_port(f"tcp://{loopback_ip(BLOCKS_NET, 250)}")

    def dealer() -> zmq.Socket[bytes]:
        sock = ctx.socket(zmq.DEALER)
        sock.curve_secretkey, sock.curve_publickey = client_secret, client_public
        sock.curve_serverkey = server_public
        return sock

    return ctx, router, f"tcp://{loopback_ip(BLOCKS_NET, 250)}:{port}", dealer


def zmq_round_trip_s(trips: int = 400) -> float:
    """Median CPU seconds (this process's, ZeroMQ's I/O threads included) of one request and
    reply between a CurveZMQ DEALER and ROUTER on loopback."""
    ctx, router, endpoint, make_dealer = _curve_pair()
    dealer = make_dealer()
    dealer.connect(endpoint)
    payload = os.urandom(200)
    times = []
    try:
        for _ in range(trips):
            started = time.process_time()
            dealer.send(payload)
            ident, data = router.recv_multipart()
            router.send_multipart([ident, data])
            dealer.recv()
            times.append(time.process_time() - started)
    finally:
        dealer.close(linger=0)
        router.close(linger=0)
        ctx.term()
    return statistics.median(times[trips // 10:])


def zmq_handshake_s(handshakes: int = 150) -> float:
    """Median CPU seconds (this process's, ZeroMQ's I/O threads included) of one CurveZMQ
    connection on loopback, both ends: a DEALER connects with ZMQ_IMMEDIATE (writable once the
    handshake is complete, as a reachability test's is) and is closed."""
    ctx, router, endpoint, make_dealer = _curve_pair()
    times = []
    try:
        for _ in range(handshakes):
            started = time.process_time()
            dealer = make_dealer()
            dealer.setsockopt(zmq.IMMEDIATE, 1)
            dealer.connect(endpoint)
            poller = zmq.Poller()
            poller.register(dealer, zmq.POLLOUT)
            while not poller.poll(1000):
                pass
            dealer.close(linger=0)
            times.append(time.process_time() - started)
    finally:
        router.close(linger=0)
        ctx.term()
    return statistics.median(times[handshakes // 10:])


def protocol_floor(floor: dict[str, float], results: dict[str, Any]) -> dict[str, float]:
    """What the protocol asks of each service node per block on top of `floor`, at this
    machine's prices: every validator signature a block carries verified (the floor counts the
    `needed` ones), the uptime proofs of the other nodes (one each per proof interval) verified,
    counted from the network's parameters and the measured block interval, and the CurveZMQ
    handshakes the daemons counted (`quorum_counts`: whole handshakes, both ends as measured, a
    block per SN, median)."""
    interval = results["block_interval_s"]
    others = SERVICE_NODES - 1
    proofs = others * interval / DEVNET.proof_interval
    handshakes = results["quorum"]["handshakes"]
    verify_one = floor["verify_s"] / results["needed"]
    extra_signatures = results["signatures_mean"] - results["needed"]
    parts = {"proofs": proofs, "handshakes": handshakes, "extra_signatures": extra_signatures,
             "handshake_s": floor["handshake_s"],
             "signatures_s": (extra_signatures + proofs) * verify_one,
             "handshakes_s": handshakes * floor["handshake_s"]}
    parts["floor_s"] = floor["floor_s"] + parts["signatures_s"] + parts["handshakes_s"]
    return parts


QUORUM_COUNTS: Final = {
    "in": ("snode_quorumnet_handshakes_total", {"side": "in"}),
    "out": ("snode_quorumnet_handshakes_total", {"side": "out"}),
    "held": ("snode_reachability_checks_total", {"by": "held"}),
    "probed": ("snode_reachability_checks_total", {"by": "handshake"}),
}
"""What `quorum_counts` reads from each daemon's /metrics."""
HUB_COUNTS: Final[dict[str, tuple[str, dict[str, str]]]] = {
    "events": ("snode_event_hub_events_total", {}),
    "deliveries": ("snode_event_hub_deliveries_total", {}),
}
"""What `hub_counts` reads: the event hub's events published and subscriber calls (issue #37 item 3)."""


def scrape_counts(daemon: Daemon) -> dict[str, float]:
    """The daemon's quorumnet and event hub counts now (QUORUM_COUNTS, HUB_COUNTS), from its /metrics."""
    status, _, body = daemon.rpc.raw("", method="GET", path="/metrics")
    if status != 200:
        raise RuntimeError(f"{daemon.label}: /metrics answered {status}")
    found = {(s.name, tuple(sorted(s.labels.items()))): s.value
             for family in text_string_to_metric_families(body.decode()) for s in family.samples}
    return {key: found.get((name, tuple(sorted(labels.items()))), 0.0)
            for key, (name, labels) in {**QUORUM_COUNTS, **HUB_COUNTS}.items()}


def hub_counts(before: list[dict[str, float]], after: list[dict[str, float]], blocks: int) -> dict[str, float]:
    """Event hub events and deliveries per SN and block: median and max over the SNs."""
    out: dict[str, float] = {}
    for key in HUB_COUNTS:
        per = [(b[key] - a[key]) / blocks for a, b in zip(before, after)]
        out[key], out[f"{key}_max"] = statistics.median(per), max(per)
    return out


def quorum_counts(before: list[dict[str, float]], after: list[dict[str, float]], blocks: int) -> dict[str, float]:
    """Per SN and block, medians over the SNs: handshakes in (answered by its listener), out (its
    probes and connections), whole (their mean: each handshake has two ends, and the price
    measured is both), and reachability checks passed by a held connection or by a handshake."""
    per = {key: [(b[key] - a[key]) / blocks for a, b in zip(before, after)] for key in QUORUM_COUNTS}
    whole = [(i + o) / 2 for i, o in zip(per["in"], per["out"])]
    return {**{key: statistics.median(values) for key, values in per.items()},
            "handshakes": statistics.median(whole), "handshakes_max": max(whole)}


def chain_blocks(daemon: Daemon) -> list[Block]:
    """Every block of `daemon`'s chain, genesis excluded."""
    height = daemon.call("get_info")["height"]
    return [decode(bytes.fromhex(daemon.call("get_block", {"height": h})["block_hex"]), Block)
            for h in range(1, height + 1)]


def floor_s(blocks: list[Block], genesis: Path, needed: int) -> dict[str, float]:
    """The floor's parts, on this chain: sign, verify `needed`, apply its last SN block, 2 RTTs."""
    signature_cache(False)  # each signature and apply as a node meets them: the first time
    state, _, consensus = genesis_state(parse_genesis(genesis.read_bytes(), DEVNET), DEVNET)
    for block in blocks[:-1]:
        state, _ = apply_block(state, block, consensus)
    last = blocks[-1]
    apply_times = []
    for _ in range(20):
        started = time.process_time()
        apply_block(state, last, consensus)
        apply_times.append(time.process_time() - started)
    key = SigningKey(os.urandom(32))
    message = validator_message(DEVNET.network_id, bytes(32))
    signature = key.sign(message)
    started = time.process_time()
    for _ in range(200):
        key.sign(message)
    sign_s = (time.process_time() - started) / 200
    started = time.process_time()
    for _ in range(200):
        verify(key.public, message, signature)
    verify_s = (time.process_time() - started) / 200
    parts = {"sign_s": sign_s, "verify_s": verify_s * needed, "apply_s": statistics.median(apply_times),
             "round_trips_s": 2 * zmq_round_trip_s()}
    parts["floor_s"] = sum(parts.values())
    parts["handshake_s"] = zmq_handshake_s()  # not in the floor: for `protocol_floor`
    return parts


# --- the network --------------------------------------------------------------------------

class Network:
    """The authority and the service-node daemons of one devnet."""

    def __init__(self, workdir: Path, profile: bool = False, perf: bool = False) -> None:
        self.operators = [SigningKey(os.urandom(32)) for _ in range(SERVICE_NODES)]
        authority = SigningKey(os.urandom(32))
        self.genesis = workdir / "genesis.json"
        self.genesis.write_bytes(encode_genesis(GenesisDoc(
            network="devnet", timestamp=int(time.time()) - 4, authorities=[authority.public.hex()],
            outputs=[GenesisOutput(encode_address(DEVNET.address_prefix, op.public),
                                   DEVNET.staking_requirement + COIN) for op in self.operators],
        )))
        common = [f"--genesis={self.genesis}", "--log-level=2"]
        auth_ip = loopback_ip(BLOCKS_NET, 1)
        (workdir / "authority").mkdir()
        (workdir / "authority" / "authority_key").write_text(authority.seed.hex() + "\n")
        (workdir / "authority" / "authority_key").chmod(0o600)
        self.authority = Daemon(auth_ip, workdir / "authority", name="authority", network="devnet",
                                extra=common, log=log)
        self.sns = [
            Daemon(loopback_ip(BLOCKS_NET, 2 + i), workdir / f"node{i + 1}", name=f"node{i + 1}",
                   network="devnet", log=log,
                   extra=[*common, "--service-node", f"--add-priority-node={auth_ip}:38090"])
            for i in range(SERVICE_NODES)
        ]
        self.profile_file = workdir / "node2.prof"
        if profile:  # node2: a validator like the others, which the benchmark does not poll
            self.sns[1].env[PROFILE_ENV] = str(self.profile_file)
        if perf:  # node3: the same, and another than the profiled one
            self.sns[2].env[perf_split.JIT_ENV] = "1"

    @property
    def all(self) -> list[Daemon]:
        return [self.authority, *self.sns]

    def start(self) -> None:
        for daemon in self.all:
            daemon.start()
        for daemon in self.all:
            daemon.wait_for_rpc()

    def register(self) -> None:
        """Each operator pays its node's registration command from its genesis output."""
        wait(lambda: all(d.call("get_info")["target_height"] == 0 and d.call("get_info")["height"] > 0
                         for d in self.sns), 60, "the nodes to sync")
        for daemon, op in zip(self.sns, self.operators):
            address = encode_address(DEVNET.address_prefix, op.public)
            cmd = daemon.call("get_service_node_registration_cmd", {
                "operator_cut": "0", "contributor_addresses": [address],
                "contributor_amounts": [DEVNET.staking_requirement]})["registration_cmd"]
            outputs = self.authority.call("get_outputs", {"address": address})["outputs"]
            coins = [(OutPoint(bytes.fromhex(o["txid"]), o["index"]),
                      UtxoEntry(op.public, o["amount"], o["unlock_height"])) for o in outputs]
            tx = build_spend(coins, op, [], parse_command(cmd, DEVNET), DEVNET)
            self.authority.call("send_raw_transaction", {"tx_hex": encode(tx).hex()})

    def stop(self) -> None:
        for daemon in self.all:
            daemon.stop()


def wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except RpcFailure:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def applied_times(daemon: Daemon) -> dict[tuple[int, str], float]:
    """When the daemon applied each block: (height, hash prefix) -> Unix time, from its log."""
    found = {}
    for line in daemon.stderr.read_text(errors="replace").splitlines():
        match = LOG_LINE.match(line)
        if match:
            stamp = dt.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
            found[(int(match[2]), match[3])] = stamp
    return found


def run(blocks: int = BLOCKS, keep: Path | None = None, profile: bool = False,
        perf_seconds: float | None = None) -> dict[str, Any]:
    """Every figure of this benchmark, as a dict (see `report`); `keep`: a new directory for
    the daemons' data dirs and logs (and perf's data), kept afterwards; `profile`: cProfile
    node2; `perf_seconds`: record node3 with perf for that long from the first measured block
    (perf_split.preflight() must have passed)."""
    with tempfile.TemporaryDirectory(prefix="blocks-bench-") as tmp:
        workdir = keep if keep is not None else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=keep is None)
        net = Network(workdir, profile, perf=perf_seconds is not None)
        recording = perf_split.Recording(workdir, perf_seconds) if perf_seconds is not None else None
        try:
            measured = measure(net, blocks, profile, recording)
            floor = floor_s(measured["chain"], net.genesis, measured["needed"])
            results = figures(measured, floor, blocks)
            if recording is not None:  # node3 has stopped, so its jitdump is complete
                results["perf"] = recording.split(results["block_interval_s"])
        finally:
            if recording is not None:
                recording.clean(keep=keep is not None)
    return results


def measure(net: Network, blocks: int, profile: bool, recording: perf_split.Recording | None) -> dict[str, Any]:
    """Run the network through `blocks` service-node blocks and stop it; what the daemons said.
    `recording`: perf's, of node3, from the first measured block."""
    samples: list[tuple[str, float]] | None = None
    try:
        log(f"starting an authority and {SERVICE_NODES} service-node daemons on devnet")
        net.start()
        net.register()
        watcher = net.sns[0]
        wait(lambda: watcher.call("get_info")["block_production"] == "service_nodes", 180,
             "service-node block production")
        first = watcher.call("get_info")["height"] + 2
        log(f"service nodes produce from height {first - 1}; measuring {blocks} blocks")
        cpu0 = [d.cpu_seconds() for d in net.sns]
        counts0 = [scrape_counts(d) for d in net.sns]
        if recording is not None:
            recording.start(net.sns[2].pid)
            log(f"perf records node3 (pid {net.sns[2].pid}) for {recording.seconds:g} s")

        def measured() -> bool:
            if recording is not None:
                recording.poll()
            return bool(watcher.call("get_info")["height"] >= first + blocks)

        wait(measured, blocks * 4 + 60, f"{blocks} service-node blocks")
        cpu1 = [d.cpu_seconds() for d in net.sns]
        counts1 = [scrape_counts(d) for d in net.sns]
        if recording is not None:
            recording.wait()
        if profile:
            height = net.sns[1].call("get_info")["height"]
            net.sns[1].stop()  # a clean stop writes its profile
            samples = blocks_profile.split(net.profile_file, height)
        records = [watcher.call("get_block", {"height": h}) for h in range(first - 1, first + blocks)]
        return {
            "records": records, "needed": DEVNET.signatures_needed(records[-1]["validator_count"]),
            "chain": chain_blocks(watcher), "times": [applied_times(d) for d in net.sns],
            "cpu": [1000 * (b - a) / blocks for a, b in zip(cpu0, cpu1)], "profile": samples,
            "quorum": quorum_counts(counts0, counts1, blocks), "hub": hub_counts(counts0, counts1, blocks),
        }
    finally:
        if recording is not None:
            recording.stop()
        net.stop()


def figures(measured: dict[str, Any], floor: dict[str, float], blocks: int) -> dict[str, Any]:
    """The benchmark's figures from what `measure` saw and the floor."""
    records, times = measured["records"], measured["times"]
    latencies, rounds, signatures = [], [], []
    for parent, block in zip(records, records[1:]):
        start = parent["timestamp"] + DEVNET.target_block_time + block["round"] * DEVNET.round_time
        key = (block["height"], block["hash"][:16])
        applied = [t[key] for t in times if key in t]
        if len(applied) == len(times):
            latencies.append(max(applied) - start)
        rounds.append(block["round"])
        signatures.append(len(block["validators"]))
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return {
        "block_interval_s": (records[-1]["timestamp"] - records[0]["timestamp"]) / blocks,
        "blocks": blocks, "measured": len(latencies), "p50_s": p50, "p99_s": p99,
        "floor": floor, "ratio": p50 / floor["floor_s"], "ratio_p99": p99 / floor["floor_s"],
        "failed_rounds": sum(rounds), "signatures_mean": statistics.mean(signatures),
        "validators": records[-1]["validator_count"], "needed": measured["needed"],
        "cpu_per_block_ms": measured["cpu"], "profile": measured["profile"], "quorum": measured["quorum"],
        "hub": measured["hub"],
    }


def report(results: dict[str, Any], console: Console | None = None) -> None:
    """Print the figures of `run`, the ratio with its target and verdict."""
    console = console or make_console()
    floor = results["floor"]
    console.print()
    console.print("[bold]blocks: service-node block, round start to applied on all 12 daemons, "
                  "against its floor[/]")
    console.print(
        f"floor {floor['floor_s'] * 1000:.2f} ms = sign {floor['sign_s'] * 1e6:.0f} us + "
        f"{results['needed']} verifications {floor['verify_s'] * 1e6:.0f} us + apply "
        f"{floor['apply_s'] * 1000:.2f} ms + 2 CurveZMQ round trips {floor['round_trips_s'] * 1e6:.0f} us"
    )
    table = figures_table("floor")
    table.add_row("p50 latency", f"{results['p50_s'] * 1000:.1f} ms", f"{floor['floor_s'] * 1000:.2f} ms",
                  f"{results['ratio']:.1f}", f"<= {TARGET:g}", verdict(results["ratio"] <= TARGET))
    table.add_row("p99 latency", f"{results['p99_s'] * 1000:.1f} ms", f"{floor['floor_s'] * 1000:.2f} ms",
                  f"{results['ratio_p99']:.1f}", "-", "")
    console.print(table)
    cpu = results["cpu_per_block_ms"]
    console.print(
        f"{results['measured']} of {results['blocks']} blocks measured on all 12 daemons; "
        f"{results['failed_rounds']} failed rounds; {results['signatures_mean']:.1f} of "
        f"{results['validators']} validator signatures a block on average ({results['needed']} needed); "
        f"CPU per block per SN {statistics.median(cpu):.1f} ms median, {max(cpu):.1f} ms max "
        f"(node1, which the benchmark polls with get_info every 0.2 s: {cpu[0]:.1f} ms)"
    )
    cpu_ratio = statistics.median(cpu) / (floor["floor_s"] * 1000)
    console.print(
        f"CPU per block per SN (median) {statistics.median(cpu):.1f} ms = {cpu_ratio:.1f}x the floor "
        f"{floor['floor_s'] * 1000:.2f} ms, target <= {CPU_TARGET:g}x {verdict(cpu_ratio <= CPU_TARGET)}"
    )
    work = protocol_floor(floor, results)
    console.print(
        f"the protocol's work a block, {work['floor_s'] * 1000:.2f} ms = the floor + "
        f"{work['extra_signatures'] + work['proofs']:.1f} more verifications "
        f"({work['extra_signatures']:.1f} validator signatures beyond the {results['needed']} needed, "
        f"{work['proofs']:.1f} uptime proofs) {work['signatures_s'] * 1000:.2f} ms + "
        f"{work['handshakes']:.1f} reachability handshakes at {work['handshake_s'] * 1000:.2f} ms "
        f"{work['handshakes_s'] * 1000:.2f} ms (a block every {results['block_interval_s']:.2f} s): "
        f"CPU per block per SN is {statistics.median(cpu) / (work['floor_s'] * 1000):.1f}x it; "
        f"the issue's 4x of the floor is {CPU_TARGET * floor['floor_s'] / work['floor_s']:.1f}x it"
    )
    quorum = results["quorum"]
    console.print(
        f"fresh CurveZMQ handshakes a block per SN (counts, median): {quorum['handshakes']:.2f} whole "
        f"(max {quorum['handshakes_max']:.2f}; in {quorum['in']:.2f}, out {quorum['out']:.2f}); "
        f"reachability checks a block: {quorum['held']:.2f} passed by a held connection, "
        f"{quorum['probed']:.2f} by a handshake"
    )
    hub = results["hub"]
    console.print(
        f"event hub a block per SN (counts, median): {hub['events']:.1f} events (max {hub['events_max']:.1f}), "
        f"{hub['deliveries']:.1f} deliveries to subscribers (max {hub['deliveries_max']:.1f})"
    )
    if results.get("profile"):
        blocks_profile.report(results["profile"], console)
    if results.get("perf"):
        perf_split.report(results["perf"], console)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.blocks_bench")
    parser.add_argument("--blocks", type=int, default=BLOCKS, help=f"blocks to measure [{BLOCKS}]")
    parser.add_argument("--keep", type=Path, metavar="DIR", help="keep data dirs and logs in DIR (new)")
    parser.add_argument("--profile", action="store_true", help="profile node2's CPU per block (cProfile)")
    parser.add_argument("--perf", action="store_true",
                        help="where node3's CPU goes per block, by Linux perf (Python 3.13 or newer)")
    parser.add_argument("--perf-seconds", type=perf_split.positive_seconds, default=perf_split.SECONDS, metavar="S",
                        help=f"how long perf records node3 from the first measured block [{perf_split.SECONDS:g}]")
    args = parser.parse_args()
    refused = perf_split.preflight() if args.perf else None
    if refused:
        parser.exit(2, f"{parser.prog}: {refused}\n")
    report(run(args.blocks, args.keep, args.profile, args.perf_seconds if args.perf else None))


if __name__ == "__main__":
    main()
