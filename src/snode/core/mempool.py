"""The mempool: admission, eviction, expiry and block-template selection, as pure functions on an
immutable pool.

Admission runs the block rules against the tip and refuses a transaction that spends an output
another pool transaction already spends. Selection replays the pool in fee-rate order on a
working copy of the state and keeps what still applies, so two stakes that together over-fill a
node cannot both enter a block.

Bounds (Bitcoin Core's policy, simplified): the pool holds at most `max_bytes` and `max_entries`
(`PoolLimits`). When an arrival does not fit, the lowest fee rates (fee per byte) go to make room,
provided the arrival pays at least the increment (`incremental_rate`) more per byte than each of
them; the pool's floor then rises to the highest evicted rate plus the increment, and decays
back (half-life `FLOOR_HALFLIFE`, as Bitcoin's rolling minimum fee) once a block has come. An
entry older than `limits.expiry` seconds goes. State changes and unlock requests pay no fee and
keep the network honest: they are never evicted nor refused for room (one per node and kind can
be pooled, so the registry bounds them).

No pool transaction depends on another: admission checks against the tip, and an output
unlocks `unlock_confirmations` blocks after it is mined, so nothing pooled can spend a pooled
transaction's output (Bitcoin's ancestor and descendant packages have no counterpart here), and
evicting or dropping one never strands another.

After a block (`after_block`) the pool drops what the block mined, what spends an output the
block spent (the `spent` index), and what expired; only the entries that name a service node the
block changed (the `by_node` index) and those whose validity ends with time or height (`dated`:
registrations, which expire, and state changes, whose quorum leaves the window) need the rules
again (`recheck`), so a block costs in proportion to what it touched, not to the pool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, TypeVar

import immutables

from snode.core.encoding import encode
from snode.core.errors import InvalidTransaction, MempoolRejection, SnodeError
from snode.core.genesis import Consensus
from snode.core.sigchecks import BatchVerifier, verify_serially
from snode.core.state import ChainState
from snode.core.transactions import (
    Registration,
    Stake,
    StateChange,
    Transaction,
    TxKind,
    UnlockRequest,
    payload_kind,
    txid,
)
from snode.core.tx_rules import apply_transaction, check_signatures

MAX_POOL_BYTES: Final = 32_000_000
"""Encoded bytes the pool holds: 16 full blocks, about 32 minutes of full mainnet blocks."""

MAX_POOL_ENTRIES: Final = 100_000
"""Transactions the pool holds, whatever their size: a pooled 149-byte transfer takes about
1.3 KB of Python objects and indexes (measured: `python -m bench mempool`), so 32 MB of them
(about 215,000) would take some 280 MB; 100,000 keep the pool near 130 MB, and are about 7.5
blocks of such transfers (a 2 MB block holds about 13,000)."""

POOL_EXPIRY: Final = 24 * 3600
"""Seconds an entry may wait for a block (Bitcoin Core: 336 h, 2,016 of its blocks). Ours are
2-minute blocks of 2 MB: a full pool drains in about 32 minutes of full blocks, so a transaction
still waiting after a day pays less than nearly all the traffic of that day and will not be
mined. Nothing can replace a pooled transaction (a double spend is refused), so its sender's
coins are stuck until it leaves: a day is long enough for a burst of congestion to pass and short
enough that a wallet gets its coins back the next day."""

FLOOR_HALFLIFE: Final = 3600
"""Seconds in which the pool's raised floor halves once a block has come (Bitcoin Core: 12 h,
about the time its full 300 MB pool takes to drain). Ours drains its full pool in about 32
minutes of full blocks; an hour lets the floor fall back within a couple of drains. Halved again
below half the limits and quartered below a quarter, as Bitcoin does."""

RATE_STEPS_PER_DOUBLING: Final = 64
"""Fee rates are indexed in steps of 1/64 of a doubling (about 1.1 %): eviction takes the lowest
step first, so it takes the lowest fee rate to within that (a step holds entries of close rates
and is scanned in no particular order; a few hundred steps cover every rate from the minimum to
a million times it)."""

_EXEMPT: Final = frozenset({TxKind.STATE_CHANGE, TxKind.UNLOCK_REQUEST})
"""Kinds that pay no fee: never evicted, never refused for room."""


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """How much the pool holds (a daemon's test hook may make them small)."""

    max_bytes: int = MAX_POOL_BYTES
    max_entries: int = MAX_POOL_ENTRIES
    expiry: int = POOL_EXPIRY


DEFAULT_LIMITS: Final = PoolLimits()


@dataclass(frozen=True, slots=True)
class PoolEntry:
    """A transaction waiting for a block."""

    tx: Transaction
    txid: bytes
    size: int
    fee: int
    arrival: int
    """Admission order, for stable selection and for expiry."""
    time: int = 0
    """When it was admitted (seconds, the node's clock): it expires `limits.expiry` later."""
    node: bytes | None = None
    """The service node it names (`by_node`), if any."""
    step: int = -1
    """Its fee-rate step in `by_rate`; -1: not evictable (a state change, an unlock request)."""

    @property
    def rate(self) -> float:
        """Fee per byte."""
        return self.fee / self.size

    @property
    def evictable(self) -> bool:
        return self.step >= 0


@dataclass(frozen=True, slots=True)
class FeeFloor:
    """The pool's raised minimum fee rate, beyond the chain's own (Bitcoin's rolling minimum)."""

    rate: float = 0.0
    """Fee per byte an arrival must pay, as of `updated`; 0: none beyond the chain's."""
    updated: int = 0
    """When `rate` was last set or decayed."""
    block_since: bool = False
    """A block came since the floor last rose: only then does it decay."""


_Ids = immutables.Map[bytes, None]
K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Mempool:
    """Transactions waiting for a block, by id, with the indexes that find them."""

    entries: immutables.Map[bytes, PoolEntry] = field(default_factory=immutables.Map)
    spent: immutables.Map[bytes, bytes] = field(default_factory=immutables.Map)
    """Output key -> id of the pool transaction spending it."""
    by_node: immutables.Map[bytes, _Ids] = field(default_factory=immutables.Map)
    """Service-node key -> ids of the pool transactions that name it (registrations, stakes,
    unlock requests, state changes): what a change of that node's record may invalidate."""
    dated: _Ids = field(default_factory=immutables.Map)
    """Ids whose validity ends with time or height (registrations, state changes)."""
    by_rate: immutables.Map[int, _Ids] = field(default_factory=immutables.Map)
    """Fee-rate step (`_step`) -> ids of the evictable entries in it."""
    steps: tuple[int, ...] = ()
    """The non-empty steps of `by_rate`, lowest first."""
    by_arrival: immutables.Map[int, bytes] = field(default_factory=immutables.Map)
    """Arrival -> id, for expiry oldest first."""
    oldest: int = 0
    """No entry arrived before this (expiry scans from it)."""
    total_bytes: int = 0
    counter: int = 0
    limits: PoolLimits = DEFAULT_LIMITS
    floor: FeeFloor = FeeFloor()

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, tx_id: object) -> bool:
        return tx_id in self.entries


def incremental_rate(consensus: Consensus) -> float:
    """Fee per byte an arrival must pay beyond each entry it evicts (Bitcoin Core's incremental
    relay fee, which equals its minimum relay fee): the chain's minimum fee rate."""
    return float(max(1, consensus.params.fee_per_byte))


def _step(rate: float) -> int:
    return int(math.log2(1.0 + rate) * RATE_STEPS_PER_DOUBLING)


def _named_node(tx: Transaction) -> bytes | None:
    p = tx.payload
    if isinstance(p, (Registration, Stake, StateChange, UnlockRequest)):
        return p.sn_pubkey
    return None


def floor_rate(pool: Mempool, consensus: Consensus, now: int) -> float:
    """The fee per byte the pool asks of an arrival now beyond the chain's minimum (0: none)."""
    floor = pool.floor
    if floor.rate == 0.0 or not floor.block_since or now <= floor.updated:
        return floor.rate
    limits = pool.limits
    fullness = max(pool.total_bytes / limits.max_bytes, len(pool.entries) / limits.max_entries)
    halflife = FLOOR_HALFLIFE / (4 if fullness < 0.25 else 2 if fullness < 0.5 else 1)
    rate = floor.rate * 0.5 ** ((now - floor.updated) / halflife)
    return 0.0 if rate < incremental_rate(consensus) / 2 else rate


def _decayed(pool: Mempool, consensus: Consensus, now: int) -> Mempool:
    rate = floor_rate(pool, consensus, now)
    if rate == pool.floor.rate:
        return pool
    return replace(pool, floor=replace(pool.floor, rate=rate, updated=now))


def _refuse_conflicts(pool: Mempool, tx: Transaction, tx_id: bytes) -> None:
    """MempoolRejection if tx is pooled already or competes with a pooled transaction."""
    if tx_id in pool.entries:
        raise MempoolRejection(f"transaction {tx_id.hex()[:16]} is already in the mempool")
    for op in tx.inputs:
        other = pool.spent.get(op.key())
        if other is not None:
            raise MempoolRejection(
                f"transaction spends output {op.txid.hex()[:16]}:{op.index}, which mempool "
                f"transaction {other.hex()[:16]} already spends"
            )
    p = tx.payload
    if not isinstance(p, (StateChange, UnlockRequest)):
        return
    for other_id in pool.by_node.get(p.sn_pubkey, ()):
        q = pool.entries[other_id].tx.payload
        if isinstance(p, StateChange) and isinstance(q, StateChange) and q.kind == p.kind:
            raise MempoolRejection("a state change for this node is already in the mempool")
        if isinstance(p, UnlockRequest) and isinstance(q, UnlockRequest):  # a second would vanish unmined
            raise MempoolRejection(
                f"an unlock request for this service node is already in the mempool (transaction "
                f"{other_id.hex()[:16]}); once it is mined every stake on the node comes back"
            )


def admit(
    pool: Mempool, tx: Transaction, state: ChainState, consensus: Consensus, *, now: int,
    verifier: BatchVerifier = verify_serially,
) -> tuple[Mempool, PoolEntry]:
    """Add tx to the pool, evicting lower fee rates if it does not fit; InvalidTransaction or
    MempoolRejection says why not. `now`: the node's clock (block time of the check, admission
    time of the entry, the floor's decay and expiry)."""
    tx_id = txid(tx)
    kind = payload_kind(tx.payload)
    if kind is TxKind.COINBASE:
        raise InvalidTransaction("a coinbase cannot be sent on its own")
    pool = _decayed(expire(pool, now), consensus, now)
    _refuse_conflicts(pool, tx, tx_id)
    _, fee, checks = apply_transaction(state, tx, consensus, block_time=now, tx_id=tx_id)
    size = len(encode(tx))
    entry = PoolEntry(tx=tx, txid=tx_id, size=size, fee=fee, arrival=pool.counter, time=now, node=_named_node(tx),
                      step=-1 if kind in _EXEMPT else _step(fee / size))
    victims: list[PoolEntry] = []
    if entry.evictable:  # judged before the signatures: a refusal costs no signature check
        _check_floor(pool, entry)
        victims = _victims(pool, entry, consensus)
    check_signatures(state, tx, consensus, checks, block_time=now, verifier=verifier)
    if victims:
        pool = _evict(pool, victims, consensus, now)
    return _insert(pool, entry), entry


def _check_floor(pool: Mempool, entry: PoolEntry) -> None:
    floor = pool.floor.rate
    if floor > 0 and entry.rate < floor:
        raise MempoolRejection(
            f"mempool is full: the transaction pays {entry.rate:.0f} atomic units a byte; it needs at "
            f"least {math.ceil(floor)} (the pool's minimum since it evicted; it falls back over time)"
        )


def _victims(pool: Mempool, entry: PoolEntry, consensus: Consensus) -> list[PoolEntry]:
    """The lowest-rate entries that must go for `entry` to fit; MempoolRejection if they cannot
    (it does not beat one of them by the increment, or too few can go)."""
    limits = pool.limits
    over_bytes = pool.total_bytes + entry.size - limits.max_bytes
    over_count = len(pool.entries) + 1 - limits.max_entries
    victims: list[PoolEntry] = []
    increment = incremental_rate(consensus)
    for step in pool.steps:
        if over_bytes <= 0 and over_count <= 0:
            break
        for victim_id in pool.by_rate[step]:
            if over_bytes <= 0 and over_count <= 0:
                break
            victim = pool.entries[victim_id]
            if victim.rate + increment > entry.rate:
                raise MempoolRejection(
                    f"mempool is full: the transaction pays {entry.rate:.0f} atomic units a byte; to "
                    f"take the place of pooled ones it needs at least "
                    f"{math.ceil(victim.rate + increment)}"
                )
            victims.append(victim)
            over_bytes -= victim.size
            over_count -= 1
    if over_bytes > 0 or over_count > 0:
        raise MempoolRejection("mempool is full of transactions that cannot be evicted")
    return victims


def _evict(pool: Mempool, victims: list[PoolEntry], consensus: Consensus, now: int) -> Mempool:
    """The pool without `victims`, its floor raised above the highest of their rates."""
    top = max(v.rate for v in victims) + incremental_rate(consensus)
    pool = remove(pool, [v.txid for v in victims])
    if top > pool.floor.rate:
        pool = replace(pool, floor=FeeFloor(rate=top, updated=now, block_since=False))
    return pool


def _added(index: immutables.Map[K, _Ids], key: K, tx_id: bytes) -> _Ids:
    ids = index.get(key)
    return (ids if ids is not None else immutables.Map()).set(tx_id, None)


def _insert(pool: Mempool, entry: PoolEntry) -> Mempool:
    tx, tx_id = entry.tx, entry.txid
    spent = pool.spent.mutate()
    for op in tx.inputs:
        spent[op.key()] = tx_id
    by_node, dated = pool.by_node, pool.dated
    node = entry.node
    if node is not None:
        by_node = by_node.set(node, _added(by_node, node, tx_id))
    if isinstance(tx.payload, (Registration, StateChange)):
        dated = dated.set(tx_id, None)
    by_rate, steps = pool.by_rate, pool.steps
    if entry.evictable:
        step = entry.step
        if step not in by_rate:
            steps = tuple(sorted((*steps, step)))
        by_rate = by_rate.set(step, _added(by_rate, step, tx_id))
    return replace(
        pool, entries=pool.entries.set(tx_id, entry), spent=spent.finish(), by_node=by_node,
        dated=dated, by_rate=by_rate, steps=steps, by_arrival=pool.by_arrival.set(entry.arrival, tx_id),
        total_bytes=pool.total_bytes + entry.size, counter=pool.counter + 1,
    )


def _without(index: immutables.Map[K, _Ids], gone: dict[K, list[bytes]]) -> tuple[immutables.Map[K, _Ids], set[K]]:
    """`index` without the ids of `gone` (key -> ids under it), each key's set changed once;
    and the keys left with none."""
    if not gone:
        return index, set()
    emptied: set[K] = set()
    out = index.mutate()
    for key, ids in gone.items():
        held = out.get(key)
        if held is None:
            continue
        mutation = held.mutate()
        for tx_id in ids:
            mutation.pop(tx_id, None)
        if len(mutation):
            out[key] = mutation.finish()
        else:
            del out[key]
            emptied.add(key)
    return out.finish(), emptied


def remove(pool: Mempool, tx_ids: Iterable[bytes]) -> Mempool:
    """The pool without the given transactions (mined, evicted, expired or no longer valid)."""
    entries = pool.entries.mutate()
    spent = pool.spent.mutate()
    dated = pool.dated.mutate()
    by_arrival = pool.by_arrival.mutate()
    by_node: dict[bytes, list[bytes]] = {}
    by_rate: dict[int, list[bytes]] = {}
    total = pool.total_bytes
    for tx_id in tx_ids:
        entry = entries.get(tx_id)
        if entry is None:
            continue
        del entries[tx_id]
        del by_arrival[entry.arrival]
        total -= entry.size
        for op in entry.tx.inputs:
            spent.pop(op.key(), None)
        if entry.node is not None:
            by_node.setdefault(entry.node, []).append(tx_id)
            dated.pop(tx_id, None)
        if entry.step >= 0:
            by_rate.setdefault(entry.step, []).append(tx_id)
    if total == pool.total_bytes and len(entries) == len(pool.entries):
        return pool
    nodes, _ = _without(pool.by_node, by_node)
    rates, emptied = _without(pool.by_rate, by_rate)
    return replace(
        pool, entries=entries.finish(), spent=spent.finish(), by_node=nodes, dated=dated.finish(),
        by_rate=rates, steps=tuple(s for s in pool.steps if s not in emptied) if emptied else pool.steps,
        by_arrival=by_arrival.finish(), total_bytes=total,
    )


def expire(pool: Mempool, now: int) -> Mempool:
    """The pool without the entries admitted more than `limits.expiry` seconds before `now`
    (oldest first; amortised: each arrival number is passed once)."""
    cutoff = now - pool.limits.expiry
    oldest, expired = pool.oldest, []
    while oldest < pool.counter:
        tx_id = pool.by_arrival.get(oldest)
        if tx_id is not None:
            if pool.entries[tx_id].time >= cutoff:
                break
            expired.append(tx_id)
        oldest += 1
    if oldest == pool.oldest:
        return pool
    return replace(remove(pool, expired), oldest=oldest)


def after_block(
    pool: Mempool, *, mined: Iterable[bytes], spent: Iterable[bytes], nodes: Iterable[bytes], now: int,
) -> tuple[Mempool, list[bytes]]:
    """The pool once blocks are adopted, and the ids to `recheck` on the new tip.

    `mined`: the blocks' transaction ids (they leave); `spent`: the output keys they spent (a
    pooled spender of one is a double spend now, and leaves); `nodes`: the service nodes whose
    records they changed (the pooled transactions naming one are rechecked, as are the dated
    ones). Expired entries leave; the floor may decay from here on (a block came)."""
    pool = remove(pool, mined)
    doubles = [other for key in spent if (other := pool.spent.get(key)) is not None]
    pool = expire(remove(pool, doubles), now)
    if pool.floor.rate and not pool.floor.block_since:
        pool = replace(pool, floor=replace(pool.floor, block_since=True, updated=now))
    recheck = dict.fromkeys(pool.dated)
    for node in nodes:
        recheck.update(dict.fromkeys(pool.by_node.get(node, ())))
    return pool, list(recheck)


def recheck(
    pool: Mempool, tx_ids: Sequence[bytes], state: ChainState, consensus: Consensus, *, now: int,
) -> Mempool:
    """The pool without those of `tx_ids` that no longer apply on `state` on their own.

    Signatures are not checked again: what each signs (the spent outputs' owners and amounts, a
    node's key, a quorum's votes) is fixed by the transaction itself."""
    stale = []
    for tx_id in tx_ids:
        entry = pool.entries.get(tx_id)
        if entry is None:
            continue
        try:
            apply_transaction(state, entry.tx, consensus, block_time=now, tx_id=tx_id)
        except InvalidTransaction:
            stale.append(tx_id)
    return remove(pool, stale) if stale else pool


def _priority(entry: PoolEntry) -> tuple[int, float, int]:
    # State changes first: they keep the network honest and pay no fee.
    is_state_change = payload_kind(entry.tx.payload) is TxKind.STATE_CHANGE
    return (0 if is_state_change else 1, -entry.fee / entry.size, entry.arrival)


def select(
    pool: Mempool, state: ChainState, consensus: Consensus, *, block_time: int, max_bytes: int,
) -> tuple[list[Transaction], int, list[bytes]]:
    """Transactions for the next block: (transactions, total fees, ids that no longer apply).

    Signatures were checked at admission and are not checked again here.
    """
    working = state
    chosen: list[Transaction] = []
    stale: list[bytes] = []
    fees = used = 0
    for entry in sorted(pool.entries.values(), key=_priority):
        if used + entry.size > max_bytes:
            continue
        try:
            working, fee, _ = apply_transaction(
                working, entry.tx, consensus, block_time=block_time, tx_id=entry.txid
            )
        except InvalidTransaction:
            stale.append(entry.txid)
            continue
        chosen.append(entry.tx)
        fees += fee
        used += entry.size
    return chosen, fees, stale


def readmit(
    pool: Mempool, state: ChainState, consensus: Consensus, *, now: int,
    verifier: BatchVerifier = verify_serially,
) -> tuple[Mempool, dict[TxKind, list[str]]]:
    """Every pool transaction admitted again on `state`, signatures included (`recheck` skips
    them): at a fork's activation, where the new rules and branch id refuse what the old ones
    took. The new pool (with the old one's limits), and the refusals' reasons by kind."""
    fresh = Mempool(limits=pool.limits)
    refused: dict[TxKind, list[str]] = {}
    for entry in sorted(pool.entries.values(), key=lambda e: e.arrival):
        try:
            fresh, _ = admit(fresh, entry.tx, state, consensus, now=now, verifier=verifier)
        except SnodeError as err:
            refused.setdefault(payload_kind(entry.tx.payload), []).append(err.reason)
    return fresh, refused
