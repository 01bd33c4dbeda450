"""The honest node's share of service while issue #33's attacks run on a devnet: `snode-devnet up
--nodes NODES --register` on this machine, a quiet span, then an attacked span of the same length
against one service node (the victim), its honest work counted in both.

Attacks, each from loopback addresses of its own, for the attacked span:
- idle connections to the victim's quorumnet port (no ZMTP greeting), IDLE_PER_ROUND a round
  from IDLE_SOURCES addresses, held until the next round;
- slowloris on its admin RPC: SLOW_PER_ROUND half-sent request heads a round;
- a lying height: a P2P peer whose Hello claims height 10^9 and then says nothing;
- dead dial targets: a P2P peer that sends Peers messages of addresses where nothing listens;
- an insider's quorumnet flood: another registered node's key (its data dir's `key`) on a
  CurveZMQ DEALER to the victim's quorumnet, sending undecodable messages as fast as ZeroMQ
  takes them, reconnecting once cut off (its key is then refused by ZAP for 600 s).
- a full mempool (bench/hostile_mempool.py): a stranger's transfers at the minimum fee over P2P
  fill the victim's pool (POOL_ENTRIES on every daemon of this devnet), then an honest user's
  transfer at 100x the minimum fee goes to its admin RPC, ROUNDS times; the funds come from
  `snode-devnet faucet`.

Counts, quiet against attacked (timings on a loaded machine are not figures): blocks the victim
produced and its share of all blocks, its uptime proofs the authority accepted (distinct
timestamps sampled), its admin RPC answering each sample, and whether it was ever seen
decommissioned; and of the mempool rounds, the honest transfers accepted into the full pool at
once and mined within MINED_WITHIN blocks, and the most entries and bytes the victim's pool held.
The target is no loss: never decommissioned, every sample answered, proofs accepted in the
attacked span at least 80% as often as in the quiet one, every honest transfer accepted and mined,
the pool never over its bound.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Final

import zmq

from bench import hostile_mempool
from bench.daemons import NET_WIDTH, SYNC_NET
from bench.hostile_mempool import MempoolAttack
from snode.api.client import RpcFailure, RpcUnavailable, call_once
from snode.common.data_dir import seed_of
from snode.core.crypto import SigningKey, x25519_public
from snode.net import protocol as P
from snode.params import DEVNET
from snode.tools.devnet_procs import devnet_node

NODES: Final = 5
SPAN_S: Final = 60.0
IDLE_SOURCES: Final = 20
IDLE_PER_ROUND: Final = 1_000
SLOW_PER_ROUND: Final = 200
ROUND_S: Final = 2.0
SAMPLE_S: Final = 1.0
PROOF_TARGET: Final = 0.8


def log(text: str) -> None:
    print(f"hostile_service: {text}", file=sys.stderr, flush=True)


def _prefix() -> str:
    """A /24 of this run's benchmark range that the sync phase (third octet pid-derived) leaves."""
    pid = os.getpid()
    return f"127.{SYNC_NET + pid % NET_WIDTH}.{(pid // NET_WIDTH + 1) % 250}."


def devnet(base: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`snode-devnet` on `base`; its daemons get the mempool attack's small pool (`ENV`)."""
    return subprocess.run([sys.executable, "-m", "snode.tools.devnet", "--base-dir", str(base), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, **hostile_mempool.ENV))


def faucet(base: Path, address: str, amount: str) -> None:
    paid = devnet(base, "faucet", address, amount, timeout=120)
    if paid.returncode != 0:
        raise RuntimeError(f"snode-devnet faucet failed: {paid.stderr.strip()}")


class Attacks:
    """The attack threads against one victim; `counts` says what they did."""

    def __init__(self, victim_ip: str, prefix: str, genesis: bytes, *, victim_key: bytes,
                 insider: SigningKey, mempool: MempoolAttack) -> None:
        self.victim, self.prefix, self.genesis = victim_ip, prefix, genesis
        self.victim_key, self.insider = victim_key, insider
        self.stop = threading.Event()
        self.counts = {"quorumnet_idle_opened": 0, "admin_half_sent": 0, "lying_hellos": 0,
                       "dead_addresses_sent": 0, "insider_junk_sent": 0, "refused_or_cut": 0}
        self._threads = [threading.Thread(target=t, daemon=True)
                         for t in (self._idle, self._slowloris, self._liar, self._dead_targets, self._insider_flood,
                                   lambda: mempool.run(self.stop))]

    def __enter__(self) -> Attacks:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(hostile_mempool.MINED_TIMEOUT_S + 30)

    def _open(self, source: str, port: int) -> socket.socket | None:
        try:
            sock = socket.create_connection((self.victim, port), timeout=2, source_address=(source, 0))
            sock.settimeout(0)
            return sock
        except OSError:
            self.counts["refused_or_cut"] += 1
            return None

    def _rounds(self, make: Any) -> None:
        """Open what `make` opens each round, hold it for the round, then close it all."""
        while not self.stop.is_set():
            held = [s for s in make() if s is not None]
            self.stop.wait(ROUND_S)
            for sock in held:
                sock.close()

    def _idle(self) -> None:
        def make() -> list[socket.socket | None]:
            self.counts["quorumnet_idle_opened"] += IDLE_PER_ROUND
            return [self._open(f"{self.prefix}{100 + i % IDLE_SOURCES}", DEVNET.quorumnet_port)
                    for i in range(IDLE_PER_ROUND)]
        self._rounds(make)

    def _slowloris(self) -> None:
        def make() -> list[socket.socket | None]:
            socks = [self._open(f"{self.prefix}150", DEVNET.rpc_port) for _ in range(SLOW_PER_ROUND)]
            for sock in socks:
                if sock is not None:
                    try:
                        sock.send(b"POST /json_rpc HTTP/1.1\r\nHost: x\r\n")
                        self.counts["admin_half_sent"] += 1
                    except OSError:
                        self.counts["refused_or_cut"] += 1
            return socks
        self._rounds(make)

    def _hello(self, height: int) -> bytes:
        return P.frame(P.Hello(network_id=DEVNET.network_id, genesis_hash=self.genesis, version=P.PROTOCOL_VERSION,
                               agent="hostile/1", height=height, top_hash=self.genesis, listen_port=0,
                               nonce=int.from_bytes(os.urandom(7), "big")))

    def _peer(self, source: str, first: bytes, then: bytes = b"") -> list[socket.socket | None]:
        sock = self._open(source, DEVNET.p2p_port)
        if sock is not None:
            try:
                sock.settimeout(2)
                sock.sendall(first + then)
                sock.settimeout(0)
            except OSError:
                self.counts["refused_or_cut"] += 1
        return [sock]

    def _liar(self) -> None:
        def make() -> list[socket.socket | None]:
            self.counts["lying_hellos"] += 1
            return self._peer(f"{self.prefix}160", self._hello(10**9))
        self._rounds(make)

    def _dead_targets(self) -> None:
        dead = [f"{self.prefix}{200 + i % 50}:{DEVNET.p2p_port + 1 + i // 50}" for i in range(P.MAX_PEER_ADDRESSES)]

        def make() -> list[socket.socket | None]:
            self.counts["dead_addresses_sent"] += len(dead)
            return self._peer(f"{self.prefix}170", self._hello(0), P.frame(P.Peers(dead)))
        self._rounds(make)


    def _insider_flood(self) -> None:
        ctx = zmq.Context()
        try:
            while not self.stop.is_set():
                sock = ctx.socket(zmq.DEALER)
                sock.curve_secretkey = self.insider.x25519_secret()
                sock.curve_publickey = x25519_public(self.insider.public)
                sock.curve_serverkey = x25519_public(self.victim_key)
                sock.setsockopt(zmq.LINGER, 0)
                sock.setsockopt(zmq.IMMEDIATE, 1)
                sock.connect(f"tcp://{self.victim}:{DEVNET.quorumnet_port}")
                until = time.monotonic() + ROUND_S
                while time.monotonic() < until and not self.stop.is_set():
                    try:
                        sock.send(b"\xff junk from an insider", zmq.NOBLOCK)
                        self.counts["insider_junk_sent"] += 1
                    except zmq.Again:
                        sock.poll(timeout=10, flags=zmq.POLLOUT)
                sock.close()
        finally:
            ctx.term()


def _record(rpc: str, pubkey: str) -> dict[str, Any] | None:
    found = call_once(rpc, "get_service_nodes", {"service_node_pubkeys": [pubkey]})["service_node_states"]
    return found[0] if found else None


def _span(authority: str, victim: dict[str, Any], seconds: float) -> dict[str, Any]:
    """Sample the victim's service for `seconds`: proofs, answers, active; blocks by producer."""
    first = call_once(authority, "get_height")["height"]
    proofs: set[int] = set()
    samples = answered = inactive = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        samples += 1
        try:
            call_once(victim["rpc"], "get_info", timeout=5)
            answered += 1
        except (RpcUnavailable, RpcFailure, OSError):
            pass
        record = _record(authority, victim["sn_pubkey"])
        if record is None or not record["active"]:
            inactive += 1
        elif record["last_uptime_proof"]:
            proofs.add(record["last_uptime_proof"])
        time.sleep(SAMPLE_S)  # a sampling period, not a wait for a condition
    last = call_once(authority, "get_height")["height"]
    producers = [call_once(authority, "get_block", {"height": h})["producer"] for h in range(first + 1, last + 1)]
    mine = sum(1 for p in producers if p == victim["sn_pubkey"])
    return {"blocks": len(producers), "victim_blocks": mine, "share": mine / len(producers) if producers else 0.0,
            "proofs_accepted": len(proofs), "samples": samples, "answered": answered, "inactive_samples": inactive}


def run(seconds: float = SPAN_S) -> dict[str, Any]:
    """The quiet and the attacked span's counts (see the module)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8_192)), hard))  # the floods' sockets
    with tempfile.TemporaryDirectory(prefix="snode-hostile-service-") as tmp:
        base, prefix = Path(tmp) / "net", _prefix()
        log(f"snode-devnet up --nodes {NODES} --register on {prefix}0/24")
        up = devnet(base, "up", "--nodes", str(NODES), "--register", "--ip-prefix", prefix)
        if up.returncode != 0:
            raise RuntimeError(f"snode-devnet up failed: {up.stderr.strip()[-500:]}")
        try:
            rows, funds = _ready(base)
            authority, victim = rows[0]["rpc"], rows[1]
            victim["ip"] = victim["rpc"].split("//")[1].rsplit(":", 1)[0]
            log(f"quiet span of {seconds:g} s, victim {victim['name']} {victim['ip']}")
            quiet = _span(authority, victim, seconds)
            genesis = bytes.fromhex(call_once(authority, "get_info")["genesis_hash"])
            insider = SigningKey(seed_of((Path(_data_dir(base, rows[2]["name"])) / "key").read_bytes()))
            mempool = MempoolAttack(funds, victim_ip=victim["ip"], victim_rpc=victim["rpc"], authority_rpc=authority,
                                    source=f"{prefix}180", genesis=genesis)
            log(f"attacked span of {seconds:g} s (the insider: {rows[2]['name']}'s key)")
            with Attacks(victim["ip"], prefix, genesis, victim_key=bytes.fromhex(victim["sn_pubkey"]),
                         insider=insider, mempool=mempool) as attacks:
                attacked = _span(authority, victim, seconds)
            return {"nodes": NODES, "span_s": seconds, "quiet": quiet, "attacked": attacked,
                    "attacks": dict(attacks.counts), "mempool": dict(mempool.counts), "not_run": []}
        finally:
            down = devnet(base, "down")
            log(f"snode-devnet down: exit {down.returncode}")


def _ready(base: Path) -> tuple[list[dict[str, Any]], hostile_mempool.Funds]:
    """The devnet's rows once its service nodes produce the blocks, and the mempool attack's
    transfers, signed (funded by the faucet while the devnet gets there)."""
    rows = json.loads(devnet(base, "status", "--json").stdout)
    authority = rows[0]["rpc"]
    log(f"snode-devnet faucet: {hostile_mempool.FLOOD_OUTPUTS:,} outputs for the mempool flood")
    funds = hostile_mempool.fund(lambda address, amount: faucet(base, address, amount), authority)
    deadline = time.monotonic() + 300
    while call_once(authority, "get_info")["block_production"] != "service_nodes":
        if time.monotonic() > deadline:
            raise RuntimeError("no service-node block production within 300 s")
        time.sleep(1)  # polled: the devnet's own pace
    hostile_mempool.prepare(funds, authority)
    return rows, funds


def _data_dir(base: Path, name: str) -> str:
    """A devnet node's data dir, from the devnet's own record of it."""
    entry = devnet_node(base, name)
    assert entry is not None, name
    return entry.data_dir


def passed(results: dict[str, Any]) -> bool:
    quiet, attacked = results["quiet"], results["attacked"]
    return (attacked["inactive_samples"] == 0 and attacked["answered"] == attacked["samples"]
            and attacked["proofs_accepted"] >= PROOF_TARGET * quiet["proofs_accepted"]
            and hostile_mempool.passed(results["mempool"]))


def main() -> None:
    """`python -m bench.hostile_service`: the devnet phase alone (`python -m bench hostile` runs it
    after its sync phase), its table on stdout and, with --json, its counts in a file."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.hostile_service", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=SPAN_S, metavar="S",
                        help=f"each span, quiet and attacked (default {SPAN_S:g})")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the counts to FILE as JSON")
    args = parser.parse_args()
    if args.seconds <= 0:
        parser.error("--seconds must be above 0")
    from bench.hostile_bench import _report_service
    from snode.tools.tables import make_console

    results = run(args.seconds)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    _report_service(results, make_console())


if __name__ == "__main__":
    main()
