"""Fast paths of block application and storage equal the reference computations they replace.

- a transaction's signing hash from its one encoding equals `signing_hash`;
- a block's encoding joined from its parts equals `encode(block)`;
- `apply_block_encoded` returns exactly `encode(block)` and the `txid` of each transaction;
- a batch commit given those encodings stores byte for byte what a commit without them stores;
- records declared `gc=False` cannot form reference cycles (frozen, holding no mutable value).
"""

from __future__ import annotations

import sqlite3
import typing
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snode.core import blocks as blocks_module
from snode.core import state as state_module
from snode.core import transactions as tx_module
from snode.core.blocks import Block, encode_block_from_parts
from snode.core.encoding import encode
from snode.core.transactions import Transaction, Transfer, TxOut, signing_hash, signing_hash_of_encoded, txid
from snode.core.transition import apply_block, apply_block_encoded
from snode.devchain import key_from_label
from snode.params import COIN
from snode.store import DATABASE_FILE, ChainStore, Commit, Encoded, state_tables
from tests.unit.helpers import BLOCKS, HEADERS, PAYLOADS, SIGNATURE, VOTES, transactions, tuples

NETWORK_IDS = st.integers(0, 2**32 - 1)


@given(tx=transactions(st.one_of(*PAYLOADS.values())), network_id=NETWORK_IDS)
def test_signing_hash_of_the_encoding_equals_signing_hash(tx: Transaction, network_id: int) -> None:
    spent = [TxOut(op.txid, op.index + 1) for op in tx.inputs]
    assert signing_hash_of_encoded(tx, encode(tx), spent, network_id, 0) == signing_hash(tx, spent, network_id, 0)


def test_signing_hash_of_encoded_refuses_another_transactions_bytes() -> None:
    tx = Transaction(1, (), (), Transfer(), (b"\x01" * 64,))
    other = msgspec.structs.replace(tx, signatures=(b"\x02" * 64,))
    with pytest.raises(ValueError):
        signing_hash_of_encoded(tx, encode(other), (), 7, 0)


@given(block=BLOCKS)
def test_a_block_joined_from_its_parts_is_its_encoding(block: Block) -> None:
    parts = [encode(tx) for tx in block.transactions]
    assert encode_block_from_parts(block, encode(block.header), parts) == encode(block)


@settings(max_examples=10)
@given(
    header=HEADERS, count=st.sampled_from([0, 1, 15, 16, 17, 40]), signature=SIGNATURE,
    votes=tuples(VOTES, max_size=2),
)
def test_array_headers_of_every_width(header, count: int, signature: bytes, votes) -> None:
    """Up to 15 transactions msgpack writes a one-byte array header, from 16 a three-byte one."""
    tx = Transaction(1, (), (), Transfer(), ())
    block = Block(header, (tx,) * count, signature, votes)
    assert encode_block_from_parts(block, encode(header), [encode(tx)] * count) == encode(block)


def _chain_with_blocks(chain):
    """Blocks with transfers between several wallets, so outputs are made and spent in the
    same run of blocks; (genesis state, genesis block, blocks)."""
    genesis_state, genesis_block = chain.state, chain.blocks[0]
    wallets = [key_from_label(f"fast path wallet {i}") for i in range(3)]
    alice = key_from_label("alice")
    chain.pay_many(alice, {wallet.public: (10 + i) * COIN for i, wallet in enumerate(wallets)})
    chain.mine()
    chain.mine(chain.params.unlock_confirmations)
    for wallet, to in zip(wallets, wallets[1:] + wallets[:1]):
        chain.pay_many(wallet, {to.public: COIN})
    chain.mine()
    chain.mine(chain.params.unlock_confirmations)
    chain.pay_many(wallets[0], {wallets[1].public: COIN})
    chain.mine()
    return genesis_state, genesis_block, chain.blocks[1:]


def test_apply_block_encoded_returns_the_encoding_and_ids(chain) -> None:
    genesis_state, _, blocks = _chain_with_blocks(chain)
    state = genesis_state
    for block in blocks:
        applied = apply_block_encoded(state, block, chain.consensus)
        assert applied.encoded == encode(block)
        assert applied.txids == [txid(tx) for tx in block.transactions]
        assert (applied.state, applied.undo) == apply_block(state, block, chain.consensus)
        state = applied.state


def _table_rows(path: Path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
            for table in ("blocks", "main_chain", "txs", "utxos", "service_nodes", "quorums", "meta")
        }
    finally:
        conn.close()


def test_a_commit_with_encodings_stores_what_one_without_stores(chain, tmp_path: Path) -> None:
    genesis_state, genesis_block, blocks = _chain_with_blocks(chain)
    plain: list[Commit] = []
    encoded: list[Commit] = []
    state = genesis_state
    for block in blocks:
        applied = apply_block_encoded(state, block, chain.consensus)
        plain.append(Commit(block, applied.state, applied.undo))
        encoded.append(Commit(block, applied.state, applied.undo, Encoded(applied.encoded, applied.txids)))
        state = applied.state
    absent = state_tables.absent_before([c.undo for c in plain])
    made_and_spent = absent["utxos"] - set(state.utxos.keys())
    assert made_and_spent, "the chain must make and spend an output within the batch"
    for name, commits in (("plain", plain), ("encoded", encoded)):
        (tmp_path / name).mkdir()
        path = tmp_path / name / DATABASE_FILE
        with ChainStore.open(path, genesis_block=genesis_block, genesis_state=genesis_state) as store:
            store.commit_blocks(commits)
        with ChainStore.open(path, genesis_block=genesis_block, genesis_state=genesis_state) as store:
            assert store.load_state() == state
    assert _table_rows(tmp_path / "plain" / DATABASE_FILE) == _table_rows(tmp_path / "encoded" / DATABASE_FILE)


def test_untracked_records_are_frozen_and_hold_no_mutable_value() -> None:
    """A record the cycle collector does not track must never be part of a reference cycle:
    frozen, with fields of bytes, ints, bools, other such records and tuples of them."""
    allowed_leaves = {bytes, int, bool, str, type(None)}
    modules = (state_module, tx_module, blocks_module, state_tables)
    untracked = [
        value for module in modules for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, msgspec.Struct)
        and value.__module__ == module.__name__ and not value.__struct_config__.gc
    ]
    assert Transaction in untracked and Block in untracked

    def acyclic(hint: object) -> bool:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            return acyclic(typing.get_args(hint)[0])
        if origin in (tuple, typing.Union) or str(origin) == "<class 'types.UnionType'>":
            return all(acyclic(arg) for arg in typing.get_args(hint) if arg is not Ellipsis)
        if isinstance(hint, type) and issubclass(hint, msgspec.Struct):
            return hint.__struct_config__.frozen and not hint.__struct_config__.gc
        return hint in allowed_leaves

    for record in untracked:
        assert record.__struct_config__.frozen, record
        hints = typing.get_type_hints(record, include_extras=True)
        for name, hint in hints.items():
            assert acyclic(hint), f"{record.__name__}.{name}: {hint}"
