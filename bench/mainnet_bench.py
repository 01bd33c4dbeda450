"""A node's cost at mainnet's size (`python -m bench mainnet`, issue #37): one real `snoded` on a
chain of 2,000 (then 10,000) registered service nodes, fed their uptime proofs and blocks at
mainnet's cadence, time-compressed; its CPU as a share of one core and its bytes a second in and
out, scaled back to the real cadence.

What mainnet's node receives, and what this feeds it (peer protocol 3 and later):
- the chain: bench/proof_chain.py's regtest chain (DevChain, real registration transactions),
  with SIZES service nodes registered and active; the daemon opens it and is not one of them;
- proofs: each SN signs one a minute (mainnet's proof_interval, 60 s), at its own moment (SN i
  of N at i/N of the minute). A node that is not the signer's direct peer gets it by
  announcement: PEERS fake peers (as many as a node's outbound slots), each on a 127.x source
  address of its own and handshaken over real P2P, announce every proof (`ProofInv`, one message
  a peer each INV_INTERVAL, as a node batches them): ANNOUNCERS of them, the first in the tick the
  proof is due, the next one tick later (announcements cross in a mesh); the daemon asks one of
  them (`GetProofs`), which answers (`Proofs`) with the signed proof; the daemon checks it and
  announces it to the peers not known to have it;
- blocks: one each 120 s (mainnet's block time), the chain's next block (`NewBlock`) from one peer
  in turn; the daemon checks and applies it and relays it to the others. On regtest a block
  carries the authority's signature, not a mainnet block's 7-11 validator signatures: what
  those would add (verifications and bytes) is printed beside as an estimate, not measured;
- compression: everything comes COMPRESSION times faster than mainnet's cadence (the announcement
  batches stay one a second, so each holds COMPRESSION times as many ids as on mainnet, which
  makes a proof cheaper here than there: two compressions at the first size say by how much).

Figures, CPU clocks of the daemon process and its signature workers (/proc/PID/stat), which the
machine's other load moves far less than wall-clock figures (latency is not measured):
- idle: the daemon with its peers connected and nothing fed, IDLE_S seconds: its CPU and bytes a
  real second that compression does not shorten (timers, pings);
- fed: WINDOW_S seconds after one warm-up round of proofs; the part above idle is divided by the
  compression (what a real second of the cadence costs) and idle is added back:
  share = idle + (fed - idle) / COMPRESSION, of one core; bytes the same way;
- bytes: counted at the fake peers' sockets, i.e. what the daemon's P2P connections sent and
  received (frames with their 4-byte headers; TCP/IP headers not counted; RPC not counted, none
  is called while measuring);
- growth: the fed part at the largest size over the first, at the same compression, against the
  ratio of the SN counts (target: no more than linear).
Targets: under 2 % of a core and under 100 kB/s each way at 2,000 SNs; growth no worse than
linear. An SN daemon adds its own proof a minute and its quorum duties, not fed here.

Everything listens on 127.x addresses only (the proof benchmark's range, other last octets); the
daemon is stopped by its own pid.
"""

from __future__ import annotations

import argparse
import math
import selectors
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.table import Table

from bench import daemons
from bench.daemons import P2P_PORT, PROOF_NET, Daemon, loopback_ip, process_tree_cpu_seconds
from bench.proof_bench import QUORUMNET_PORT, FakePeer, proof_daemon, wait_for_peer_count
from bench.proof_chain import PARAMS, BuiltChain, build_chain
from bench.report import verdict
from snode import __version__
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.proofs import UptimeProof, make_proof
from snode.net import protocol as P
from snode.net.proof_gossip import INV_INTERVAL
from snode.tools.tables import make_console

SIZES: Final = (2_000, 10_000)
COMPRESSIONS: Final = (5, 20)
"""At the first size; the other sizes at the first compression (the one nearest mainnet)."""
PROOF_PERIOD: Final = 60
"""Mainnet's proof_interval: seconds between two proofs of one SN."""
BLOCK_PERIOD: Final = 120
"""Mainnet's target_block_time."""
PEERS: Final = 8
ANNOUNCERS: Final = 2
IDLE_S: Final = 15.0
WINDOW_S: Final = 72.0
SETTLE_S: Final = 10.0
"""Seconds after the feed stops for the last asks to be answered and the checks to pass."""
TARGET_CPU: Final = 0.02
TARGET_BYTES: Final = 100_000
VALIDATOR_SIGNATURES: Final = 11
"""A mainnet block's validator signatures at most (validators_size), 64 bytes each."""
PEER_OCTET: Final = 101
"""Last octet of the first fake peer (the proof benchmark uses 1 and 11-18)."""

GET_PROOFS_TAG: Final = P.GetProofs.__struct_config__.tag
PING_TAG: Final = P.Ping.__struct_config__.tag
INV_TAG: Final = P.ProofInv.__struct_config__.tag

log: Final = partial(daemons.log, "mainnet_bench")


@dataclass
class Link:
    """One fake peer's counters and its send lock (the feed and the answers share the socket)."""

    peer: FakePeer
    lock: threading.Lock = field(default_factory=threading.Lock)
    sent: int = 0
    received: int = 0
    asked: int = 0
    served: int = 0
    announced_to: int = 0
    """Proof ids the daemon announced to this peer."""
    closed: bool = False

    def send(self, data: bytes) -> None:
        with self.lock:
            self.peer.sock.sendall(data)
            self.sent += len(data)


class Served(threading.Thread):
    """Reads every peer's socket: counts bytes, answers GetProofs with the proofs asked (from
    `proofs`, which the feed fills) and Ping with Pong, counts the ids announced to it."""

    def __init__(self, links: Sequence[Link], proofs: dict[tuple[bytes, int], UptimeProof]) -> None:
        super().__init__(name="mainnet-bench reader", daemon=True)
        self.links = list(links)
        self.proofs = proofs
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def _handle(self, link: Link) -> None:
        buf = link.peer.buffer
        pos, end = 0, len(buf)
        while end - pos >= P.HEADER_BYTES:
            size = int.from_bytes(buf[pos:pos + P.HEADER_BYTES], "big")
            if end - pos < P.HEADER_BYTES + size:
                break
            body = bytes(buf[pos + P.HEADER_BYTES:pos + P.HEADER_BYTES + size])
            tag = body[1] if size > 1 else -1
            if tag in (GET_PROOFS_TAG, PING_TAG, INV_TAG):
                message = P.parse(body)
                if isinstance(message, P.GetProofs):
                    found = [self.proofs[(k, t)] for k, t in message.ids if (k, t) in self.proofs]
                    link.asked += len(message.ids)
                    link.served += len(found)
                    link.send(P.frame(P.Proofs(found)))
                elif isinstance(message, P.Ping):
                    link.send(P.frame(P.Pong(message.nonce)))
                elif isinstance(message, P.ProofInv):
                    link.announced_to += len(message.ids)
            pos += P.HEADER_BYTES + size
        del buf[:pos]

    def run(self) -> None:
        try:
            with selectors.DefaultSelector() as sel:
                for link in self.links:
                    sel.register(link.peer.sock, selectors.EVENT_READ, link)
                    link.received += len(link.peer.buffer)
                    self._handle(link)
                while not self.stop.is_set():
                    for key, _ in sel.select(timeout=0.1):
                        link = key.data
                        data = link.peer.sock.recv(1 << 20)
                        if not data:
                            sel.unregister(link.peer.sock)
                            link.closed = True
                            continue
                        link.received += len(data)
                        link.peer.buffer += data
                        self._handle(link)
        except BaseException as err:  # reported by the caller
            self.error = err


@dataclass
class Feed:
    """The cadence, compressed: which proofs and blocks are due by a simulated second."""

    keys: Sequence[SigningKey]
    blocks: list[bytes]
    """NewBlock frames of the chain's next blocks, in order."""
    compression: int
    peer_ips: Sequence[str]
    proofs: dict[tuple[bytes, int], UptimeProof]
    next_proof: int = 0
    """Global index of the next proof due: SN index % N, round index // N."""
    next_block: int = 0
    pending: list[list[tuple[bytes, int]]] = field(default_factory=list)
    """Per peer: ids to announce one tick late (the second announcer)."""
    proofs_fed: int = 0
    blocks_fed: int = 0

    def tick(self, links: Sequence[Link], epoch0: float, sim_s: float) -> None:
        """Send what is due by simulated second sim_s: announcements and blocks."""
        n = len(self.keys)
        due = int(sim_s * n / PROOF_PERIOD)
        later: list[list[tuple[bytes, int]]] = [[] for _ in links]
        now_ids = self.pending or [[] for _ in links]
        for g in range(self.next_proof, due):
            i = g % n
            timestamp = int(epoch0 + g * PROOF_PERIOD / n / self.compression)
            first = i % len(links)
            proof = make_proof(self.keys[i], PARAMS, timestamp=timestamp, public_ip=self.peer_ips[first],
                               p2p_port=P2P_PORT, quorumnet_port=QUORUMNET_PORT, version=__version__)
            pid = (proof.pubkey, timestamp)
            self.proofs[pid] = proof
            now_ids[first].append(pid)
            for a in range(1, ANNOUNCERS):  # another peer each round, never the first
                later[(first + 1 + (a - 1 + g // n) % (len(links) - 1)) % len(links)].append(pid)
        self.proofs_fed += max(0, due - self.next_proof)
        self.next_proof = max(self.next_proof, due)
        self.pending = later
        for link, ids in zip(links, now_ids):
            for start in range(0, len(ids), P.MAX_PROOF_IDS):
                link.send(P.frame(P.ProofInv(ids[start:start + P.MAX_PROOF_IDS])))
        while self.next_block < len(self.blocks) and (self.next_block + 1) * BLOCK_PERIOD <= sim_s:
            links[self.next_block % len(links)].send(self.blocks[self.next_block])
            self.next_block += 1
            self.blocks_fed += 1


def snapshot(daemon: Daemon, links: Sequence[Link]) -> tuple[float, float, int, int]:
    """(perf_counter, daemon CPU seconds with its workers, bytes it received, bytes it sent)."""
    assert daemon.proc is not None
    cpu = process_tree_cpu_seconds(daemon.proc.pid)
    if cpu is None:
        raise RuntimeError("no CPU time for snoded")
    return time.perf_counter(), sum(cpu), sum(k.sent for k in links), sum(k.received for k in links)


def rates(a: tuple[float, float, int, int], b: tuple[float, float, int, int]) -> dict[str, float]:
    seconds = b[0] - a[0]
    return {"seconds": seconds, "cpu": (b[1] - a[1]) / seconds, "in": (b[2] - a[2]) / seconds,
            "out": (b[3] - a[3]) / seconds}


def feed_for(feed: Feed, links: Sequence[Link], served: Served, seconds: float, start: float,
             epoch0: float) -> None:
    """Tick every INV_INTERVAL until `seconds` after `start` (perf_counter)."""
    while True:
        now = time.perf_counter()
        feed.tick(links, epoch0, (now - start) * feed.compression)
        if served.error is not None:
            raise RuntimeError(f"reading the daemon's messages failed: {served.error!r}")
        if any(k.closed for k in links):
            raise RuntimeError("the daemon closed a fake peer's connection")
        if now - start >= seconds:
            return
        time.sleep(max(0.0, INV_INTERVAL - (time.perf_counter() - now)))  # the announcer's cadence


def mine_blocks(built: BuiltChain, spare: list[bytes], count: int) -> list[bytes]:
    """NewBlock frames of `count` blocks on top of the daemon's tip: those mined before and not
    fed (`spare`), then new ones on the built chain (authority blocks, regtest)."""
    blocks: list[Block] = built.chain.mine(max(0, count - len(spare)))
    return spare + [P.frame(P.NewBlock(encode(b))) for b in blocks]


def check_after(daemon: Daemon, height: int, links: Sequence[Link], epoch0: float) -> int:
    """Untimed: the daemon took every block (is at `height`) and has a proof of every SN from
    the feed; the proofs it was served."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        info = daemon.call("get_info")
        if info["height"] == height or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # poll
    if info["height"] != height:
        raise RuntimeError(f"snoded is at height {info['height']}, not {height}")
    records = daemon.call("get_service_nodes")["service_node_states"]
    stale = sum(1 for r in records if r["last_uptime_proof"] < int(epoch0))
    if stale:
        raise RuntimeError(f"{stale} of {len(records)} SNs have no proof accepted from the feed")
    return sum(k.served for k in links)


def measure(built: BuiltChain, spare: list[bytes], data_dir: Path, compression: int, window_s: float,
            idle_s: float) -> dict[str, Any]:
    """One daemon on the chain: idle, then fed at `compression`; the figures (see the docstring).
    `spare`: blocks mined and not fed yet, left there for the next run."""
    warm_s = PROOF_PERIOD / compression
    blocks = mine_blocks(built, spare, math.ceil((warm_s + window_s) * compression / BLOCK_PERIOD) + 1)
    daemon_ip = loopback_ip(PROOF_NET, PEER_OCTET - 1)
    peer_ips = [loopback_ip(PROOF_NET, PEER_OCTET + i) for i in range(PEERS)]
    daemon = proof_daemon(daemon_ip, data_dir)
    links: list[Link] = []
    served: Served | None = None
    try:
        daemon.start()
        info = daemon.wait_for_rpc()
        genesis = bytes.fromhex(info["genesis_hash"])
        links = [Link(FakePeer(daemon_ip, ip, genesis)) for ip in peer_ips]
        wait_for_peer_count(daemon, PEERS)
        proofs: dict[tuple[bytes, int], UptimeProof] = {}
        served = Served(links, proofs)
        served.start()
        log(f"{len(built.sn_keys):,} SNs, {compression}x: idle {idle_s:.0f} s")
        idle0 = snapshot(daemon, links)
        time.sleep(idle_s)  # the idle measurement itself
        idle = rates(idle0, snapshot(daemon, links))
        feed = Feed(built.sn_keys, blocks, compression, peer_ips, proofs)
        log(f"{len(built.sn_keys):,} SNs, {compression}x: warm-up {warm_s:.0f} s, then {window_s:.0f} s fed")
        start, epoch0 = time.perf_counter(), time.time()
        feed_for(feed, links, served, warm_s, start, epoch0)
        fed0 = snapshot(daemon, links)
        proofs0, blocks0 = feed.proofs_fed, feed.blocks_fed
        feed_for(feed, links, served, warm_s + window_s, start, epoch0)
        fed1 = snapshot(daemon, links)
        fed = rates(fed0, fed1)
        fed.update(proofs=feed.proofs_fed - proofs0, blocks=feed.blocks_fed - blocks0)
        spare[:] = blocks[feed.blocks_fed:]
        asked = check_after(daemon, info["height"] + feed.blocks_fed, links, epoch0)
        announced_to = sum(k.announced_to for k in links)
    finally:
        if served is not None:
            served.stop.set()
            served.join(5)
        for link in links:
            link.peer.close()
        daemon.stop()
    return scaled(idle, fed, compression, proofs_fed=feed.proofs_fed, asked=asked, announced_to=announced_to,
                  block_bytes=len(blocks[0]))


def scaled(idle: dict[str, float], fed: dict[str, float], compression: int, **more: Any) -> dict[str, Any]:
    """Real-cadence figures: idle + (fed - idle) / compression, per kind."""
    real = {k: idle[k] + (fed[k] - idle[k]) / compression for k in ("cpu", "in", "out")}
    per_sim_s = fed["proofs"] / fed["seconds"] / compression
    return {"compression": compression, "idle": idle, "fed": fed, "real": real,
            "fed_part": {k: (fed[k] - idle[k]) / compression for k in ("cpu", "in", "out")},
            "cpu_us_per_proof": (fed["cpu"] - idle["cpu"]) / (fed["proofs"] / fed["seconds"]) * 1e6,
            "proofs_per_real_s": per_sim_s, **more}


def run(sizes: Sequence[int] = SIZES, compressions: Sequence[int] = COMPRESSIONS, window_s: float = WINDOW_S,
        idle_s: float = IDLE_S) -> dict[str, Any]:
    """Every figure of this benchmark, as a dict (see `report`); the first size at each
    compression, the others at the first."""
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    for n, size in enumerate(sizes):
        with tempfile.TemporaryDirectory(prefix="mainnet-bench-") as tmp:
            log(f"building a regtest chain with {size:,} service nodes")
            data_dir = Path(tmp) / "node"
            built = build_chain(data_dir, size)
            spare: list[bytes] = []
            for compression in compressions if n == 0 else compressions[:1]:
                figures = measure(built, spare, data_dir, compression, window_s, idle_s)
                figures.update(service_nodes=built.service_nodes, chain_build_s=built.build_s)
                runs.append(figures)
                real = figures["real"]
                log(f"{size:,} SNs, {compression}x: {real['cpu'] * 100:.2f} % of a core, in "
                    f"{real['in'] / 1e3:.1f} kB/s, out {real['out'] / 1e3:.1f} kB/s at the real cadence")
    return {"runs": runs, "peers": PEERS, "announcers": ANNOUNCERS, "window_s": window_s, "idle_s": idle_s,
            "wall_s": time.perf_counter() - started}


def growth(results: dict[str, Any]) -> dict[str, float] | None:
    """The fed part at the largest size over the first, at the first compression."""
    runs = [r for r in results["runs"] if r["compression"] == results["runs"][0]["compression"]]
    if len(runs) < 2:
        return None
    a, b = runs[0], runs[-1]
    out = {"sn_ratio": b["service_nodes"] / a["service_nodes"]}
    for k in ("cpu", "in", "out"):
        out[k] = b["fed_part"][k] / a["fed_part"][k] if a["fed_part"][k] > 0 else math.inf
    return out


def report(results: dict[str, Any], console: Console | None = None) -> None:
    """Print the figures of `run`, with the targets and verdicts."""
    console = console or make_console()
    runs = results["runs"]
    console.print()
    console.print("[bold]mainnet: one snoded's cost at mainnet's cadence (a proof per SN a minute, a block "
                  "each 120 s), time-compressed and scaled back[/]")
    console.print(
        f"feed: {results['peers']} fake protocol-{P.PROTOCOL_VERSION} peers over real P2P; each proof announced "
        f"(ProofInv) by {results['announcers']} of them, fetched by the daemon (GetProofs/Proofs); blocks as "
        f"NewBlock from one peer in turn; {results['idle_s']:.0f} s idle, then one warm-up round and "
        f"{results['window_s']:.0f} s fed. CPU: the daemon and its workers' CPU seconds (/proc), which the "
        "shared machine's load moves little; latency not measured. Bytes: at the fake peers' sockets "
        "(the daemon's P2P in and out, frames, no TCP/IP headers)"
    )
    table = Table(show_edge=False, pad_edge=False)
    for name in ("SNs", "compr.", "proofs/s fed", "blocks", "idle CPU %", "fed CPU %", "us CPU/proof",
                 "real CPU %", "real in kB/s", "real out kB/s", "fetched", "verdict"):
        table.add_column(name, justify="right", no_wrap=True)
    for r in runs:
        real = r["real"]
        ok = real["cpu"] < TARGET_CPU and real["in"] < TARGET_BYTES and real["out"] < TARGET_BYTES
        table.add_row(
            f"{r['service_nodes']:,}", f"{r['compression']}x", f"{r['fed']['proofs'] / r['fed']['seconds']:,.0f}",
            str(r["fed"]["blocks"]), f"{r['idle']['cpu'] * 100:.2f}", f"{r['fed']['cpu'] * 100:.1f}",
            f"{r['cpu_us_per_proof']:.0f}", f"{real['cpu'] * 100:.2f}", f"{real['in'] / 1e3:.1f}",
            f"{real['out'] / 1e3:.1f}", f"{r['asked'] / r['proofs_fed']:.0%}",
            verdict(ok) if r["service_nodes"] <= SIZES[0] else "-",
        )
    console.print(table)
    console.print(
        f"target at {SIZES[0]:,} SNs: under {TARGET_CPU * 100:.0f} % of one core and under "
        f"{TARGET_BYTES / 1e3:.0f} kB/s each way (real = idle + (fed - idle) / compression); fetched: "
        "the proofs the daemon asked for and was served, of those announced to it"
    )
    g = growth(results)
    if g is not None:
        worst = max(g["cpu"], g["in"], g["out"])
        console.print(
            f"growth {runs[0]['service_nodes']:,} -> {runs[-1]['service_nodes']:,} SNs "
            f"(x{g['sn_ratio']:.1f}), the fed part at {runs[0]['compression']}x: CPU x{g['cpu']:.2f}, in "
            f"x{g['in']:.2f}, out x{g['out']:.2f} (target: at most linear) " + verdict(worst <= g["sn_ratio"])
        )
    same = [r for r in runs if r["service_nodes"] == runs[0]["service_nodes"]]
    if len(same) > 1:
        console.print(
            f"compression check at {same[0]['service_nodes']:,} SNs: CPU a proof "
            + ", ".join(f"{r['cpu_us_per_proof']:.0f} us at {r['compression']}x" for r in same)
            + " (announcement batches hold compression x as many ids as on mainnet: the lower, the nearer)"
        )
    console.print(
        f"not measured: a mainnet block's {VALIDATOR_SIGNATURES} validator signatures (regtest blocks carry "
        f"the authority's): {VALIDATOR_SIGNATURES} verifications and {VALIDATOR_SIGNATURES * 64 * (PEERS + 1):,} "
        f"bytes (in once, out to {PEERS}) a {BLOCK_PERIOD} s block: about 6 us/s of CPU and "
        f"{VALIDATOR_SIGNATURES * 64 * (PEERS + 1) / BLOCK_PERIOD:.0f} B/s; run's wall time {results['wall_s']:.0f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.mainnet_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="service-node counts")
    parser.add_argument("--compressions", type=int, nargs="+", default=list(COMPRESSIONS),
                        help="time compressions at the first size (the others at the first)")
    parser.add_argument("--window", type=float, default=WINDOW_S, help="seconds fed and measured")
    args = parser.parse_args()
    report(run(args.sizes, args.compressions, args.window), make_console())


if __name__ == "__main__":
    main()
