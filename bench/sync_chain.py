"""The chain the sync benchmark serves: a regtest chain built in-process and written into a data
dir that a real `snoded --regtest` opens.

It starts from the built-in regtest genesis (the published authority and faucet keys), so any
`snoded --regtest` accepts it. The faucet funds 2,000 operator keys and a pool of spender keys;
the operators register one service node each (20 registrations a block); one block of
authority-voted state changes activates all of them, so from then on every block pays one of
them its reward and the obligations quorum is drawn from them, as on a network of 2,000 nodes;
every block carries a few transfers between the spenders (one input, sometimes three, respecting
the 10-block unlock). Blocks are at most two seconds apart and end an hour before the clock.

Blocks are made directly with the core (make_coinbase, make_block, apply_block) rather than
through DevChain's mempool, and the spenders' outputs are tracked here, so building costs
O(transactions) instead of a scan of every output per payment and a mempool revalidation per
block. apply_block runs with a verifier that only records the signature checks: this counts
exactly the signatures the syncing node verifies, and keeps a uniform sample of them for the
verification-rate measurement. Blocks are committed to the store in batches as they are made.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from snode.core.blocks import Block, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.genesis import encode_genesis, genesis_state, regtest_genesis
from snode.core.registration import sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.state import ChainState, UtxoEntry
from snode.core.state_change import sign_votes, state_change_tx
from snode.core.transactions import (
    OutPoint,
    Payload,
    Reservation,
    Transaction,
    Transfer,
    TxOut,
    txid,
)
from snode.core.transition import SigCheck, apply_block, make_coinbase
from snode.core.txbuilder import estimate_fee, payload_spend, sign_spend
from snode.params import (
    COIN,
    REGTEST,
    REGTEST_AUTHORITY_SEED,
    REGTEST_FAUCET_SEED,
)
from snode.store import DATABASE_FILE, ChainStore, Commit

PARAMS: Final = REGTEST
GENESIS_FILE: Final = "genesis.json"
COMMIT_BATCH: Final = 500
"""Blocks per store transaction while writing the chain (as a syncing node commits them)."""
FUND_PER_TX: Final = 1_000
"""Payments per faucet transaction (about 44 bytes each; a transaction holds 100 KB)."""
SPENDER_FUNDS: Final = 100_000 * COIN
OPERATOR_FUNDS: Final = PARAMS.staking_requirement + COIN
"""The stake plus far more than the registration fee."""
REGISTRATIONS_PER_BLOCK: Final = 20
CONSOLIDATE_EVERY: Final = 4
"""About one transfer in this many also spends two small outputs the spender received."""
MAX_STEP_S: Final = 2
"""Seconds between blocks, at most (fewer when the chain would otherwise end in the future)."""
CLOCK_MARGIN_S: Final = 3_600
"""The last block's timestamp stays this far behind the clock of the machine."""


def key(label: str) -> SigningKey:
    """A deterministic key of this benchmark."""
    return SigningKey(hashlib.blake2b(f"snode sync bench {label}".encode(), digest_size=32).digest())


@dataclass
class Wallet:
    """A spender's outputs as this builder knows them: its change and what others paid it."""

    key: SigningKey
    change: tuple[OutPoint, UtxoEntry] | None = None
    received: deque[tuple[OutPoint, UtxoEntry]] = field(default_factory=deque)


@dataclass
class Built:
    """What any benchmark chain built here holds (`tally` fills in the last four)."""

    blocks: int = 0
    transactions: int = 0
    bytes: int = 0
    commit_s: float = 0.0
    build_s: float = 0.0
    utxos: int = 0
    service_nodes: int = 0
    active_service_nodes: int = 0


@dataclass
class ChainStats(Built):
    """What the built chain holds."""

    transfers: int = 0
    registrations: int = 0
    state_changes: int = 0
    signatures: int = 0
    """Every signature apply_block checks in blocks 1..tip (producer, inputs, registrations,
    votes): what the syncing node verifies."""
    producer_signatures: int = 0
    input_signatures: int = 0
    other_signatures: int = 0


S = TypeVar("S", bound=Built)


def tally(stats: S, state: ChainState, started: float) -> S:
    """`stats` with the build's seconds since `started` and what the built `state` holds."""
    stats.build_s = time.perf_counter() - started
    stats.utxos = len(state.utxos)
    stats.service_nodes = len(state.service_nodes)
    stats.active_service_nodes = sum(1 for sn in state.service_nodes.values() if sn.active)
    return stats


def commit_batch(store: ChainStore, batch: list[Commit], stats: Built) -> list[Commit]:
    """Commit `batch` in one store transaction (its seconds added to `stats.commit_s`); the
    empty batch that follows."""
    if batch:
        started = time.perf_counter()
        store.commit_blocks(batch)
        stats.commit_s += time.perf_counter() - started
    return []


class SyncChain:
    """Builds the chain block by block and commits it to a data dir's store."""

    def __init__(
        self, data_dir: Path, *, blocks: int, service_nodes: int, transfers_per_block: float,
        spenders: int, sample_size: int, seed: int = 1, now: float | None = None,
        progress: Callable[[str], None] | None = None, snapshot_at: int | None = None,
        snapshot_dir: Path | None = None,
    ) -> None:
        """Build into `data_dir`. With `snapshot_at` (a multiple of COMMIT_BATCH) the store as
        it is at that height is copied into `snapshot_dir`, and the encoded blocks after it are
        kept in `tail`, so that the last blocks can be replayed in-process."""
        self.target_blocks = blocks
        self.n_service_nodes = service_nodes
        self.transfers_per_block = transfers_per_block
        self.rng = random.Random(seed)
        self.progress = progress or (lambda text: None)
        doc = regtest_genesis()
        self.doc = doc
        self.state, self.genesis_block, self.consensus = genesis_state(doc, PARAMS)
        self.genesis_state = self.state
        self.authority = SigningKey(REGTEST_AUTHORITY_SEED)
        self.faucet = Wallet(SigningKey(REGTEST_FAUCET_SEED))
        cb = self.genesis_block.transactions[0]
        self.faucet.change = (OutPoint(txid(cb), 0), UtxoEntry(cb.outputs[0].owner, cb.outputs[0].amount, 0))
        self.operators = [Wallet(key(f"operator {i}")) for i in range(service_nodes)]
        self.sn_keys = [key(f"node {i}") for i in range(service_nodes)]
        self.spenders = [Wallet(key(f"spender {i}")) for i in range(spenders)]
        self.by_owner = {w.key.public: w for w in (*self.operators, *self.spenders)}
        clock = time.time() if now is None else now
        room = int(clock) - CLOCK_MARGIN_S - doc.timestamp
        self.step = max(0, min(MAX_STEP_S, room // max(blocks, 1)))
        self.timestamp = doc.timestamp
        self.stats = ChainStats()
        self.sample: list[SigCheck] = []
        self.sample_size = sample_size
        self._seen_checks = 0
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        (data_dir / GENESIS_FILE).write_bytes(encode_genesis(doc))
        self.store = ChainStore.open(
            data_dir / DATABASE_FILE, genesis_block=self.genesis_block,
            genesis_state=self.genesis_state,
        )
        self.data_dir = data_dir
        self.snapshot_at = snapshot_at
        self.snapshot_dir = snapshot_dir
        self.tail: list[bytes] = []
        self._batch: list[Commit] = []

    # --- transactions -------------------------------------------------------------------------

    def _spend(
        self, wallet: Wallet, inputs: Sequence[tuple[OutPoint, UtxoEntry]], outputs: list[TxOut],
        payload: Payload,
    ) -> tuple[Transaction, int]:
        """A signed transaction of wallet's `inputs` paying `outputs` (+ change); (tx, fee)."""
        fee = estimate_fee(len(inputs), outputs, payload, PARAMS)
        total = sum(u.amount for _, u in inputs)
        change = total - sum(o.amount for o in outputs) - payload_spend(payload) - fee
        if change < 0:
            raise AssertionError(f"a benchmark wallet ran dry ({total} < spend + {fee})")
        all_outputs = tuple(outputs) + ((TxOut(wallet.key.public, change),) if change else ())
        return sign_spend(wallet.key, inputs, all_outputs, payload, PARAMS), fee

    def _fund(self, wallets: Sequence[Wallet], amount: int) -> tuple[Transaction, int]:
        assert self.faucet.change is not None
        outputs = [TxOut(w.key.public, amount) for w in wallets]
        return self._spend(self.faucet, [self.faucet.change], outputs, Transfer())

    def _register(self, index: int, height: int, timestamp: int) -> tuple[Transaction, int]:
        operator = self.operators[index]
        assert operator.change is not None and operator.change[1].unlock_height <= height
        amount = PARAMS.staking_requirement
        reg = sign_registration(
            self.sn_keys[index], PARAMS, 0, (Reservation(operator.key.public, amount),),
            timestamp + 86_400,
        )
        return self._spend(operator, [operator.change], [], reg)

    def _activate(self, index: int) -> Transaction:
        quorum = self.state.quorums[self.state.height]
        sn = self.sn_keys[index].public
        kind, reason = StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF
        votes = sign_votes([self.authority], PARAMS.network_id, sn, kind, reason, quorum.height)
        return state_change_tx(votes, sn, kind, reason, quorum.height)

    def _transfer(self, payer: Wallet, height: int) -> tuple[Transaction, int]:
        assert payer.change is not None
        inputs = [payer.change]
        if self.rng.randrange(CONSOLIDATE_EVERY) == 0:
            while len(inputs) < 3 and payer.received and payer.received[0][1].unlock_height <= height:
                inputs.append(payer.received.popleft())
        payee = self.rng.choice(self.spenders)
        while payee is payer:
            payee = self.rng.choice(self.spenders)
        amount = self.rng.randint(1, 20) * COIN
        return self._spend(payer, inputs, [TxOut(payee.key.public, amount)], Transfer())

    # --- blocks -------------------------------------------------------------------------------

    def _record(self, checks: Sequence[SigCheck]) -> int:
        """The verifier apply_block runs with here: counts and samples, verifies nothing."""
        stats = self.stats
        stats.signatures += len(checks)
        for check in checks:
            if check.what.startswith("block "):
                stats.producer_signatures += 1
            elif " input " in check.what:
                stats.input_signatures += 1
            else:
                stats.other_signatures += 1
            # Reservoir sampling: a uniform sample of every signature of the chain.
            self._seen_checks += 1
            if len(self.sample) < self.sample_size:
                self.sample.append(check)
            else:
                j = self.rng.randrange(self._seen_checks)
                if j < self.sample_size:
                    self.sample[j] = check
        return -1

    def _mine(self, txs: list[tuple[Transaction, Wallet | None]], fees: int) -> Block:
        """Make, apply and queue for commit the next block holding `txs` (each with its payer)."""
        state = self.state
        self.timestamp += self.step
        coinbase = make_coinbase(state, self.authority.public, fees, self.consensus)
        block = make_block(version=1,
            height=state.height + 1, prev_hash=state.tip_hash, timestamp=self.timestamp,
            transactions=(coinbase, *(tx for tx, _ in txs)), producer_key=self.authority,
            network_id=PARAMS.network_id,
        )
        self.state, undo = apply_block(state, block, self.consensus, verifier=self._record)
        unlock = block.header.height + PARAMS.unlock_confirmations
        for tx, payer in txs:
            tid = txid(tx)
            for i, out in enumerate(tx.outputs):
                wallet = payer if payer is not None and out.owner == payer.key.public else self.by_owner.get(out.owner)
                if wallet is None:
                    continue
                entry = (OutPoint(tid, i), UtxoEntry(out.owner, out.amount, unlock))
                if wallet is payer or wallet.change is None:
                    wallet.change = entry
                else:
                    wallet.received.append(entry)
        stats = self.stats
        stats.blocks += 1
        stats.transactions += len(txs)
        raw = encode(block)
        stats.bytes += len(raw)
        if self.snapshot_at is not None and block.header.height > self.snapshot_at:
            self.tail.append(raw)
        self._batch.append(Commit(block, self.state, undo))
        if len(self._batch) >= COMMIT_BATCH or block.header.height == self.snapshot_at:
            self.flush()
        if block.header.height == self.snapshot_at:
            self._snapshot()
        return block

    def _snapshot(self) -> None:
        """Copy the database as it is now into snapshot_dir (closed first, so the copy is whole)."""
        assert self.snapshot_dir is not None
        self.store.close()
        self.snapshot_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        shutil.copyfile(self.data_dir / DATABASE_FILE, self.snapshot_dir / DATABASE_FILE)
        (self.snapshot_dir / GENESIS_FILE).write_bytes(encode_genesis(self.doc))
        self.store = ChainStore.open(
            self.data_dir / DATABASE_FILE, genesis_block=self.genesis_block,
            genesis_state=self.genesis_state,
        )

    def flush(self) -> None:
        """Commit the blocks made since the last flush, in one store transaction."""
        self._batch = commit_batch(self.store, self._batch, self.stats)

    # --- the whole chain ----------------------------------------------------------------------

    def build(self) -> ChainStats:
        """Make every block, commit them, close the store; the chain's figures."""
        started = time.perf_counter()
        n = self.n_service_nodes
        unlock = PARAMS.unlock_confirmations
        operators_funded = 0
        registered = 0
        activated = False
        spenders_funded = False
        ready: deque[tuple[int, Wallet]] = deque()
        while self.state.height < self.target_blocks:
            height = self.state.height + 1
            txs: list[tuple[Transaction, Wallet | None]] = []
            fees = 0
            faucet_ready = self.faucet.change is not None and self.faucet.change[1].unlock_height <= height
            if faucet_ready and (operators_funded < n or not spenders_funded):
                if operators_funded < n:
                    group = self.operators[operators_funded:operators_funded + FUND_PER_TX]
                    tx, fee = self._fund(group, OPERATOR_FUNDS)
                    operators_funded += len(group)
                else:
                    tx, fee = self._fund(self.spenders, SPENDER_FUNDS)
                    spenders_funded = True
                    ready.extend((height + unlock, w) for w in self.spenders)
                txs.append((tx, self.faucet))
                fees += fee
            if registered < n:
                for _ in range(REGISTRATIONS_PER_BLOCK):
                    op = self.operators[registered] if registered < operators_funded else None
                    if op is None or op.change is None or op.change[1].unlock_height > height:
                        break
                    tx, fee = self._register(registered, height, self.timestamp + self.step)
                    txs.append((tx, op))
                    fees += fee
                    registered += 1
                    self.stats.registrations += 1
            elif not activated and n:
                # One block of activations: every vote cites the tip's quorum, which is the
                # authority's until service nodes are active.
                txs.extend((self._activate(i), None) for i in range(n))
                self.stats.state_changes += n
                activated = True
            count = self._transfer_count()
            while count and ready and ready[0][0] <= height:
                _, payer = ready.popleft()
                tx, fee = self._transfer(payer, height)
                txs.append((tx, payer))
                fees += fee
                ready.append((height + unlock, payer))
                self.stats.transfers += 1
                count -= 1
            self._mine(txs, fees)
            if height % 2_000 == 0:
                self.progress(f"built {height:,} of {self.target_blocks:,} blocks")
        self.flush()
        self.store.close()
        return tally(self.stats, self.state, started)

    def _transfer_count(self) -> int:
        """Transfers for the next block: 0 to twice the mean, uniformly."""
        mean = self.transfers_per_block
        return self.rng.randint(0, round(2 * mean))
