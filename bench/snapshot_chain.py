"""The chain the snapshot benchmark serves: a regtest chain in the v2 era (fork v2 from block 1,
every header carrying its state root) whose state holds `outputs` unspent outputs and
`service_nodes` registered and active service nodes, built in-process and written into a data dir
that a real `snoded --regtest --test-fork=v2@1` opens.

It starts from the built-in regtest genesis (the published authority and faucet keys), as
bench/sync_chain.py does, and makes its blocks with the core (make_coinbase, make_block,
production.with_state_root, apply_block):

- block 1: the faucet pays the first 1,000 operators (a transaction holds 100 KB, about 1,000
  payments), block 11 the next 1,000 and so on, each once the faucet's change has unlocked;
  then one payment to each funder (one per `OUTPUTS_PER_TX` outputs);
- from the block each operator's payment unlocks, REGISTRATIONS_PER_BLOCK registrations a block
  (each signed by its service node's key), then one block of authority-voted activations;
- once the funders' payments unlock, each funder sends one transaction of OUTPUTS_PER_TX
  payments to `owners` distinct keys, packed into blocks of at most MAX_BLOCK_BYTES less the
  coinbase's allowance: the unspent outputs;
- then TAIL_BLOCKS blocks of a few transfers, so that a snapshot height (a multiple of regtest's
  `snapshot_interval`, `snapshot_depth` below the tip) lies just below the tip.

Each block is applied twice (once to find its state root, once signed with it), as a producer
does; its signatures are not checked here (the daemons check them). Blocks are committed to the
store in batches. `build_cached` keeps the built data dir under a cache dir keyed by the
parameters, so that a second run reuses it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from bench.sync_chain import Built, commit_batch, tally
from snode.core.blocks import Block, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.genesis import encode_genesis, genesis_state, regtest_genesis
from snode.core.production import COINBASE_ALLOWANCE, with_state_root
from snode.core.registration import sign_registration
from snode.core.service_nodes import Reason, StateChangeKind
from snode.core.sigchecks import SigCheck
from snode.core.state import UtxoEntry
from snode.core.state_change import sign_votes, state_change_tx
from snode.core.transactions import OutPoint, Payload, Reservation, Transaction, Transfer, TxOut, txid
from snode.core.transition import apply_block, make_coinbase
from snode.core.txbuilder import estimate_fee, payload_spend, sign_spend
from snode.params import (
    COIN,
    MAX_BLOCK_BYTES,
    REGTEST,
    REGTEST_AUTHORITY_SEED,
    REGTEST_FAUCET_SEED,
    V2,
    Fork,
    NetworkParams,
)
from snode.store import DATABASE_FILE, ChainStore, Commit

V2_AT: Final = 1
"""Fork v2 from the first block: the whole chain carries state roots (the daemons are started
with `--test-fork=v2@1`)."""
PARAMS: Final = REGTEST.with_test_forks((Fork(V2, V2_AT),))
TEST_FORK_FLAG: Final = f"--test-fork=v2@{V2_AT}"
GENESIS_FILE: Final = "genesis.json"
CHAIN_FILE: Final = "chain.json"
"""What the cached data dir holds (its `ChainStats`), written last: a dir without it is unfinished."""
COMMIT_BATCH: Final = 50
FUND_PER_TX: Final = 1_000
OUTPUTS_PER_TX: Final = 1_000
"""Payments per output-making transaction: about 44 bytes each, within the 100 KB a transaction holds."""
OUTPUT_AMOUNT: Final = COIN // 100
OPERATOR_FUNDS: Final = PARAMS.staking_requirement + COIN
OUTPUT_BYTES: Final = 48
TX_OVERHEAD: Final = 400
"""Bytes an output-making transaction takes at most: a payment each, and its input, change and
signature (what a block's budget is checked with before the transaction is signed)."""
REGISTRATIONS_PER_BLOCK: Final = 250
TAIL_BLOCKS: Final = 12
"""Blocks of a few transfers after the last output-making one."""
TAIL_TRANSFERS: Final = 4
BLOCK_BUDGET: Final = MAX_BLOCK_BYTES - COINBASE_ALLOWANCE
MAX_STEP_S: Final = 2
CLOCK_MARGIN_S: Final = 3_600


def key(label: str) -> SigningKey:
    """A deterministic key of this benchmark."""
    return SigningKey(hashlib.blake2b(f"snode snapshot bench {label}".encode(), digest_size=32).digest())


def sn_key(index: int) -> SigningKey:
    """The key of service node `index` (what a daemon running it has in its `key` file)."""
    return key(f"node {index}")


def owner(index: int) -> bytes:
    """The 32-byte owner of the outputs of `index` (nobody spends them: no key is needed)."""
    return hashlib.blake2b(f"snode snapshot bench owner {index}".encode(), digest_size=32).digest()


@dataclass
class ChainStats(Built):
    """What the built chain holds."""

    owners: int = 0
    tip_hash: str = ""
    output_blocks: tuple[int, int] = (0, 0)
    """The first and last block holding the output-making transactions."""


class Spender:
    """A key and its one spendable output (its change), as this builder knows them."""

    def __init__(self, signing: SigningKey) -> None:
        self.key = signing
        self.coin: tuple[OutPoint, UtxoEntry] | None = None

    def ready(self, height: int) -> bool:
        return self.coin is not None and self.coin[1].unlock_height <= height


def _no_checks(checks: Sequence[SigCheck]) -> int:
    return -1


class SnapshotChain:
    """Builds the chain block by block and commits it to a data dir's store."""

    def __init__(self, data_dir: Path, *, outputs: int, service_nodes: int, owners: int,
                 now: float | None = None, progress: Callable[[str], None] | None = None) -> None:
        self.params: NetworkParams = PARAMS
        self.n_outputs = outputs
        self.n_service_nodes = service_nodes
        self.n_owners = max(1, min(owners, outputs))
        self.owners = [owner(i) for i in range(self.n_owners)]
        self.progress = progress or (lambda text: None)
        doc = regtest_genesis()
        self.doc = doc
        self.state, self.genesis_block, self.consensus = genesis_state(doc, self.params)
        self.authority = SigningKey(REGTEST_AUTHORITY_SEED)
        self.faucet = Spender(SigningKey(REGTEST_FAUCET_SEED))
        cb = self.genesis_block.transactions[0]
        self.faucet.coin = (OutPoint(txid(cb), 0), UtxoEntry(cb.outputs[0].owner, cb.outputs[0].amount, 0))
        self.operators = [Spender(key(f"operator {i}")) for i in range(service_nodes)]
        self.funders = [Spender(key(f"funder {i}")) for i in range(-(-outputs // OUTPUTS_PER_TX))]
        self.spenders = [Spender(key(f"spender {i}")) for i in range(TAIL_TRANSFERS * 2)]
        clock = time.time() if now is None else now
        expected = 40 + 10 * (-(-service_nodes // FUND_PER_TX)) + outputs // 40_000 + TAIL_BLOCKS
        room = int(clock) - CLOCK_MARGIN_S - doc.timestamp
        self.step = max(0, min(MAX_STEP_S, room // expected))
        self.timestamp = doc.timestamp
        self.stats = ChainStats(owners=self.n_owners)
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        (data_dir / GENESIS_FILE).write_bytes(encode_genesis(doc))
        self.store = ChainStore.open(data_dir / DATABASE_FILE, genesis_block=self.genesis_block,
                                     genesis_state=self.state)
        self.data_dir = data_dir
        self._batch: list[Commit] = []

    # --- transactions -------------------------------------------------------------------------

    def _spend(self, spender: Spender, outputs: list[TxOut], payload: Payload, height: int) -> tuple[Transaction, int]:
        assert spender.coin is not None
        inputs = [spender.coin]
        fee = estimate_fee(1, outputs, payload, self.params)
        change = spender.coin[1].amount - sum(o.amount for o in outputs) - payload_spend(payload) - fee
        if change < 0:
            raise AssertionError(f"a benchmark wallet ran dry ({spender.coin[1].amount} < spend + {fee})")
        all_outputs = tuple(outputs) + ((TxOut(spender.key.public, change),) if change else ())
        tx = sign_spend(spender.key, inputs, all_outputs, payload, self.params,
                        signed_for=self.params.rules_at(height))
        spender.coin = (OutPoint(txid(tx), len(all_outputs) - 1),
                        UtxoEntry(spender.key.public, change, height + self.params.unlock_confirmations)) \
            if change else None
        return tx, fee

    def _register(self, index: int, height: int) -> tuple[Transaction, int]:
        operator = self.operators[index]
        reg = sign_registration(sn_key(index), self.params, 0,
                                (Reservation(operator.key.public, self.params.staking_requirement),),
                                self.timestamp + self.step + 86_400)
        return self._spend(operator, [], reg, height)

    def _activate(self, index: int) -> Transaction:
        quorum = self.state.quorums[self.state.height]
        sn = sn_key(index).public
        kind, reason = StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF
        votes = sign_votes([self.authority], self.params.network_id, sn, kind, reason, quorum.height)
        return state_change_tx(votes, sn, kind, reason, quorum.height)

    # --- blocks -------------------------------------------------------------------------------

    def _mine(self, txs: list[Transaction], fees: int) -> Block:
        state = self.state
        self.timestamp += self.step
        height = state.height + 1
        rules = self.params.rules_at(height)
        coinbase = make_coinbase(state, self.authority.public, fees, self.consensus)
        block = make_block(version=rules.block_version, height=height, prev_hash=state.tip_hash,
                           timestamp=self.timestamp, transactions=(coinbase, *txs), producer_key=self.authority,
                           network_id=self.params.network_id, state_root=bytes(32) if rules.state_root else None)
        block = with_state_root(state, block, self.consensus, self.authority)
        self.state, undo = apply_block(state, block, self.consensus, verifier=_no_checks)
        raw = encode(block)
        if len(raw) > MAX_BLOCK_BYTES:
            raise AssertionError(f"block {height} is {len(raw):,} bytes, over {MAX_BLOCK_BYTES:,}")
        self.stats.blocks += 1
        self.stats.transactions += len(txs)
        self.stats.bytes += len(raw)
        self._batch.append(Commit(block, self.state, undo))
        if len(self._batch) >= COMMIT_BATCH:
            self.flush()
        return block

    def flush(self) -> None:
        self._batch = commit_batch(self.store, self._batch, self.stats)

    def _fund(self, wallets: Sequence[Spender], amount: int, height: int) -> tuple[Transaction, int]:
        tx, fee = self._spend(self.faucet, [TxOut(w.key.public, amount) for w in wallets], Transfer(), height)
        unlock = height + self.params.unlock_confirmations
        tid = txid(tx)
        for i, wallet in enumerate(wallets):
            wallet.coin = (OutPoint(tid, i), UtxoEntry(wallet.key.public, amount, unlock))
        return tx, fee

    def build(self) -> ChainStats:
        """Make every block, commit them, close the store; the chain's figures."""
        started = time.perf_counter()
        funding: list[tuple[Sequence[Spender], int]] = []
        for start in range(0, len(self.operators), FUND_PER_TX):
            funding.append((self.operators[start:start + FUND_PER_TX], OPERATOR_FUNDS))
        funder_amount = OUTPUTS_PER_TX * OUTPUT_AMOUNT + COIN
        for start in range(0, len(self.funders), FUND_PER_TX):
            funding.append((self.funders[start:start + FUND_PER_TX], funder_amount))
        funding.append((self.spenders, 1_000 * COIN))
        registered = 0
        activated = not self.operators
        funded = 0
        made = 0
        tail = 0
        while tail < TAIL_BLOCKS:
            height = self.state.height + 1
            txs: list[Transaction] = []
            fees = 0
            size = 0
            if funding and self.faucet.ready(height):
                tx, fee = self._fund(*funding.pop(0), height)
                txs.append(tx)
                fees += fee
                size += len(encode(tx))
            if registered < len(self.operators):
                while registered < len(self.operators) and len(txs) < REGISTRATIONS_PER_BLOCK \
                        and self.operators[registered].ready(height):
                    tx, fee = self._register(registered, height)
                    txs.append(tx)
                    fees += fee
                    size += len(encode(tx))
                    registered += 1
            elif not activated:
                for i in range(len(self.operators)):
                    tx = self._activate(i)
                    txs.append(tx)
                    size += len(encode(tx))
                activated = True
            while funded < len(self.funders) and self.funders[funded].ready(height):
                first = funded * OUTPUTS_PER_TX
                count = min(OUTPUTS_PER_TX, self.n_outputs - first)
                if size + count * OUTPUT_BYTES + TX_OVERHEAD > BLOCK_BUDGET:
                    break
                outputs = [TxOut(self.owners[(first + i) % self.n_owners], OUTPUT_AMOUNT + (first + i) % 997)
                           for i in range(count)]
                tx, fee = self._spend(self.funders[funded], outputs, Transfer(), height)
                txs.append(tx)
                fees += fee
                size += len(encode(tx))
                funded += 1
                made += count
                self.stats.output_blocks = (self.stats.output_blocks[0] or height, height)
            if made >= self.n_outputs and activated and not funding:
                ready = [s for s in self.spenders if s.ready(height)]
                for payer, payee in zip(ready[0::2], ready[1::2]):
                    tx, fee = self._spend(payer, [TxOut(payee.key.public, COIN)], Transfer(), height)
                    txs.append(tx)
                    fees += fee
                tail += 1
            self._mine(txs, fees)
            if height % 10 == 0:
                self.progress(f"built block {height:,}: {len(self.state.utxos):,} unspent outputs")
        self.flush()
        self.store.close()
        stats = tally(self.stats, self.state, started)
        stats.tip_hash = self.state.tip_hash.hex()
        return stats


CHAIN_VERSION: Final = 1
"""Raised whenever a change to this builder changes the chain it makes: a cached one of another
version is not used."""


def cache_key(outputs: int, service_nodes: int, owners: int) -> str:
    """The cached chain's directory name: its parameters and CHAIN_VERSION."""
    return f"snapshot-chain-v{CHAIN_VERSION}-{outputs}-{service_nodes}-{owners}"


def build_cached(cache_dir: Path, *, outputs: int, service_nodes: int, owners: int,
                 progress: Callable[[str], None] | None = None) -> tuple[Path, ChainStats, bool]:
    """The data dir of the chain of these parameters under `cache_dir` (built there if it is not
    yet), its figures, and whether it was built now (False: the cached one)."""
    path = cache_dir / cache_key(outputs, service_nodes, owners)
    stats_file = path / CHAIN_FILE
    if stats_file.exists():
        raw = json.loads(stats_file.read_text())
        raw["output_blocks"] = tuple(raw["output_blocks"])
        return path, ChainStats(**raw), False
    shutil.rmtree(path, ignore_errors=True)
    stats = SnapshotChain(path, outputs=outputs, service_nodes=service_nodes, owners=owners,
                          progress=progress).build()
    stats_file.write_text(json.dumps(asdict(stats)))
    return path, stats, True
