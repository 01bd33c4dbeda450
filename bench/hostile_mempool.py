"""The mempool attack of `python -m bench hostile`'s devnet phase (issue #33 item 4): a stranger
fills the victim's pool with transfers at the minimum fee over P2P, then an honest user sends
the victim, over its admin RPC, one transfer paying 100 times the minimum fee.

The devnet runs with a pool of POOL_ENTRIES transactions (`SNODE_MEMPOOL_MAX_ENTRIES`, devnet and
regtest only, on every daemon: the flood is relayed and fills every pool): a devnet block (2 MB,
every 2 s) holds every transaction the default pool would take before Python could fill it, so
the bound is what is small, not the attack. The funds come as an operator of a devnet gets them:
`snode-devnet faucet` pays the flooder's key, which splits the coins into one output per
transfer of the flood (no pooled transaction can spend another's output) and a few for the
honest user.

Each round (at most ATTEMPTS, until ROUNDS counted ones): after a fresh block, the flooder
sends CHUNK transfers at a time from a loopback address of its own until the victim's
`get_info` shows the pool full (at most POOL_ENTRIES + EXTRA a round), then a further CHUNK that
the full pool must refuse; the honest transfer follows at once. A round counts when no block
came between the pool's full reading and the answer (a block empties the devnet's pool).
Counted: whether the honest transfer was accepted into the pool at once, whether it was mined
within MINED_WITHIN blocks of the authority's chain, and the most entries and bytes the victim's
pool held when read. The target: every counted transfer accepted and mined, the pool never over
its bound.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from bench.hostile_peer import Connection
from snode.api.client import RpcFailure, RpcUnavailable, call_once
from snode.app.config import MEMPOOL_ENTRIES_VARIABLE
from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.state import UtxoEntry
from snode.core.transactions import OutPoint, Transfer, TxOut, txid
from snode.core.txbuilder import Spendable, build_spend, transfer_at_rate
from snode.net import protocol as P
from snode.params import COIN, DEVNET

POOL_ENTRIES: Final = 200
ROUNDS: Final = 1
ATTEMPTS: Final = 4
EXTRA: Final = 100
CHUNK: Final = 25
RICH_TIMES: Final = 100
MINED_WITHIN: Final = 3
FLOOD_OUTPUTS: Final = ATTEMPTS * (POOL_ENTRIES + EXTRA)
EACH: Final = COIN
ENV: Final = {MEMPOOL_ENTRIES_VARIABLE: str(POOL_ENTRIES)}
"""What every daemon of the devnet runs with (`snode-devnet up`'s environment)."""
UNLOCK_TIMEOUT_S: Final = 120.0
MINED_TIMEOUT_S: Final = 30.0
"""How long a round waits for its honest transfer in the authority's chain (MINED_WITHIN blocks
take 6 s on an idle devnet)."""
POLL_S: Final = 0.2


def address(key: SigningKey) -> str:
    return encode_address(DEVNET.address_prefix, key.public)


def unlocked(rpc: str, key: SigningKey) -> list[Spendable]:
    """`key`'s outputs that the next block may spend."""
    found = call_once(rpc, "get_outputs", {"address": address(key)})
    return [(OutPoint(bytes.fromhex(o["txid"]), o["index"]), UtxoEntry(key.public, o["amount"], o["unlock_height"]))
            for o in found["outputs"] if o["unlock_height"] <= found["height"] + 1]


def wait_unlocked(rpc: str, key: SigningKey, count: int) -> list[Spendable]:
    """Poll until `key` has `count` spendable outputs (the devnet's pace: 10 blocks of 2 s)."""
    deadline = time.monotonic() + UNLOCK_TIMEOUT_S
    while len(coins := unlocked(rpc, key)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{address(key)[:16]}... has {len(coins)} of {count} outputs unlocked "
                               f"after {UNLOCK_TIMEOUT_S:g} s")
        time.sleep(POLL_S)
    return coins


@dataclass
class Funds:
    """The flooder's and the honest user's keys, and the transfers they will send."""

    flooder: SigningKey
    honest: SigningKey
    flood: list[bytes]
    """Each a NewTransaction frame of a transfer at the minimum fee rate."""
    rich: list[tuple[str, bytes]]
    """Each an encoded transfer at RICH_TIMES x the minimum fee rate, with its id."""


def fund(faucet: Callable[[str, str], None], rpc: str) -> Funds:
    """Ask the devnet's faucet for the flood's coins and split them (the split then waits for its
    unlock: `prepare`)."""
    flooder, honest = SigningKey(os.urandom(32)), SigningKey(os.urandom(32))
    faucet(address(flooder), str(FLOOD_OUTPUTS + ATTEMPTS + 10))
    (coin,) = wait_unlocked(rpc, flooder, 1)
    outputs = [TxOut(flooder.public, EACH)] * FLOOD_OUTPUTS + [TxOut(honest.public, EACH)] * ATTEMPTS
    split = build_spend([coin], flooder, outputs, Transfer(), DEVNET)
    call_once(rpc, "send_raw_transaction", {"tx_hex": encode(split).hex()})
    return Funds(flooder, honest, [], [])


def prepare(funds: Funds, rpc: str) -> None:
    """Sign every transfer of the attack once the split's outputs unlock."""
    minimum, rich = DEVNET.fee_per_byte, RICH_TIMES * DEVNET.fee_per_byte
    flood = [c for c in wait_unlocked(rpc, funds.flooder, FLOOD_OUTPUTS) if c[1].amount == EACH]
    funds.flood = [P.frame(P.NewTransaction(encode(transfer_at_rate(c, funds.flooder, funds.flooder.public,
                                                                     minimum, DEVNET))))
                   for c in flood[:FLOOD_OUTPUTS]]
    honest = [transfer_at_rate(c, funds.honest, funds.honest.public, rich, DEVNET)
              for c in wait_unlocked(rpc, funds.honest, ATTEMPTS)]
    funds.rich = [(txid(tx).hex(), encode(tx)) for tx in honest]


class MempoolAttack:
    """The rounds against one victim, in a thread of `Attacks`; `counts` says what happened."""

    def __init__(self, funds: Funds, *, victim_ip: str, victim_rpc: str, authority_rpc: str, source: str,
                 genesis: bytes) -> None:
        self.funds, self.victim_ip, self.victim, self.authority = funds, victim_ip, victim_rpc, authority_rpc
        self.source, self.genesis = source, genesis
        self.counts = {"mempool_flood_sent": 0, "mempool_rounds": 0, "mempool_void_rounds": 0,
                       "honest_accepted": 0, "honest_mined": 0, "mined_blocks_max": 0,
                       "pool_entries_max": 0, "pool_bytes_max": 0, "pool_entries_bound": POOL_ENTRIES}

    def run(self, stop: threading.Event) -> None:
        for attempt in range(ATTEMPTS):
            if stop.is_set() or self.counts["mempool_rounds"] >= ROUNDS:
                return
            try:
                self._round(attempt, stop)
            except (RpcUnavailable, RpcFailure, OSError, ConnectionError) as err:
                self.counts["mempool_void_rounds"] += 1
                print(f"hostile_mempool: round {attempt + 1} cut short: {err}", flush=True)

    def _info(self) -> dict[str, Any]:
        info = call_once(self.victim, "get_info", timeout=5)
        self.counts["pool_entries_max"] = max(self.counts["pool_entries_max"], info["mempool_size"])
        return info

    def _fresh_block(self, stop: threading.Event) -> None:
        first = self._info()["height"]
        deadline = time.monotonic() + 20
        while self._info()["height"] == first and time.monotonic() < deadline and not stop.is_set():
            time.sleep(POLL_S / 4)

    def _round(self, attempt: int, stop: threading.Event) -> None:
        flood = self.funds.flood[attempt * (POOL_ENTRIES + EXTRA):(attempt + 1) * (POOL_ENTRIES + EXTRA)]
        self._fresh_block(stop)
        peer = Connection(self.victim_ip, DEVNET.p2p_port, self.source, self.genesis, network_id=DEVNET.network_id)
        try:
            full = self._fill(peer, flood)
            if full is None:
                self.counts["mempool_void_rounds"] += 1
                return
            rich_id, rich = self.funds.rich[attempt]
            try:
                call_once(self.victim, "send_raw_transaction", {"tx_hex": rich.hex()}, timeout=10)
                accepted = True
            except RpcFailure:
                accepted = False
            after = self._info()
            self._measure_pool()
        finally:
            peer.close()
        if after["height"] != full:  # a block came in between: the pool was not full when it was sent
            self.counts["mempool_void_rounds"] += 1
            return
        self.counts["mempool_rounds"] += 1
        self.counts["honest_accepted"] += accepted
        if accepted:
            self._mined(rich_id, full)

    def _fill(self, peer: Connection, flood: list[bytes]) -> int | None:
        """Send `flood` in chunks until the pool reads full, then one chunk more; the height at
        which it read full, or None if it never did."""
        full_at = None
        for start in range(0, len(flood), CHUNK):
            peer.send_raw(b"".join(flood[start:start + CHUNK]))
            self.counts["mempool_flood_sent"] += len(flood[start:start + CHUNK])
            if full_at is not None:
                break
            deadline = time.monotonic() + 2
            while (info := self._info())["mempool_size"] < POOL_ENTRIES and time.monotonic() < deadline:
                if info["mempool_size"] >= min(start + CHUNK, POOL_ENTRIES) - 2:
                    break  # taken what it was sent; send more
                time.sleep(POLL_S / 10)
            if info["mempool_size"] >= POOL_ENTRIES:
                full_at = info["height"]
        if full_at is None or self._info()["height"] != full_at:
            return None
        return full_at

    def _measure_pool(self) -> None:
        pooled = call_once(self.victim, "get_mempool", timeout=10)["transactions"]
        self.counts["pool_entries_max"] = max(self.counts["pool_entries_max"], len(pooled))
        self.counts["pool_bytes_max"] = max(self.counts["pool_bytes_max"], sum(t["size"] for t in pooled))

    def _mined(self, tx_id: str, sent_at: int) -> None:
        deadline = time.monotonic() + MINED_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                found = call_once(self.authority, "get_transaction", {"txid": tx_id}, timeout=5)
            except RpcFailure:  # not relayed to the authority yet
                found = {"height": None}
            if found["height"] is not None:
                blocks = found["height"] - sent_at
                self.counts["mined_blocks_max"] = max(self.counts["mined_blocks_max"], blocks)
                self.counts["honest_mined"] += blocks <= MINED_WITHIN
                return
            time.sleep(POLL_S)


def passed(counts: dict[str, int]) -> bool:
    """Every counted honest transfer accepted at once and mined in time; the pool within its bound."""
    rounds = counts["mempool_rounds"]
    return (rounds > 0 and counts["honest_accepted"] == rounds and counts["honest_mined"] == rounds
            and counts["pool_entries_max"] <= POOL_ENTRIES)
