"""Genesis documents: the network's first block and initial state.

A genesis document is JSON: network name, timestamp, authority public keys (hex) and initial
outputs (address, atomic amount). The authority produces blocks and stands in for quorums while
the network has fewer active service nodes than its minimum.
"""

from __future__ import annotations

from dataclasses import dataclass

import immutables
import msgspec

from snode.common import decode_reasons
from snode.common.text import fixed_hex
from snode.core.address import decode_address, encode_address
from snode.core.blocks import ZERO_HASH, ZERO_SIGNATURE, Block, BlockHeader, block_hash, tx_root
from snode.core.crypto import SigningKey
from snode.core.errors import GenesisOfAnotherNetwork, InvalidAddress, InvalidGenesis
from snode.core.quorums import authority_quorum
from snode.core.state import ChainState, new_utxo
from snode.core.transactions import REFUSED_TX_VERSION, Coinbase, Transaction, TxOut, outpoint_key, txid
from snode.core.types import PUBKEY_BYTES, Amount, Timestamp
from snode.core.utxo_set import UtxoSet
from snode.params import (
    REGTEST,
    REGTEST_AUTHORITY_SEED,
    REGTEST_FAUCET_AMOUNT,
    REGTEST_FAUCET_SEED,
    REGTEST_GENESIS_TIMESTAMP,
    NetworkParams,
)


class GenesisOutput(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One initial allocation."""

    address: str
    amount: Amount


class GenesisDoc(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The JSON genesis document."""

    network: str
    timestamp: Timestamp
    authorities: list[str]
    """Hex Ed25519 public keys of the bootstrap authority."""
    outputs: list[GenesisOutput]


@dataclass(frozen=True, slots=True)
class Consensus:
    """What validating a block needs besides the state: the network and its genesis."""

    params: NetworkParams
    authorities: tuple[bytes, ...]
    genesis_hash: bytes


def parse_genesis(data: bytes, params: NetworkParams) -> GenesisDoc:
    """Decode a genesis JSON document for `params`'s network; InvalidGenesis says what is wrong."""
    try:
        doc = msgspec.json.decode(data, type=GenesisDoc)
    except decode_reasons.DECODE_FAILURES as err:
        raise InvalidGenesis(f"genesis document is not valid: {decode_reasons.reason(err)}") from None
    if doc.network != params.name:
        raise GenesisOfAnotherNetwork(
            f"genesis document is for network '{doc.network}', not '{params.name}'", doc.network
        )
    if not doc.authorities:
        raise InvalidGenesis("genesis document names no authority key")
    for key in doc.authorities:
        if fixed_hex(key, PUBKEY_BYTES) is None:
            raise InvalidGenesis(f"genesis authority '{key}' is not a 32-byte hex public key")
    for out in doc.outputs:
        try:
            decode_address(params.address_prefix, out.address)
        except InvalidAddress as err:
            raise InvalidGenesis(f"genesis output: {err}") from None
        if out.amount <= 0:
            raise InvalidGenesis("genesis output amount must be above 0")
    # Coins issued are an Amount in every undo record: a larger total could not be stored.
    if sum(out.amount for out in doc.outputs) > 2**63 - 1:
        raise InvalidGenesis(
            "genesis outputs total more than the largest amount, 2**63 - 1 atomic units"
        )
    return doc


def encode_genesis(doc: GenesisDoc) -> bytes:
    """The JSON bytes of a genesis document (stable, so its file hash is stable)."""
    return msgspec.json.format(msgspec.json.encode(doc), indent=2) + b"\n"


def genesis_block(doc: GenesisDoc, params: NetworkParams) -> Block:
    """Block 0: one coinbase carrying the initial outputs. It is valid by definition, unsigned.

    Its coinbase is transaction version 1: a coinbase spends nothing, so version 2's commitment
    to spent outputs would change only its bytes, and block 0 keeps the hash that every data dir
    of an existing network holds."""
    outputs = tuple(
        TxOut(decode_address(params.address_prefix, o.address), o.amount) for o in doc.outputs
    )
    coinbase = Transaction(REFUSED_TX_VERSION, (), outputs, Coinbase(0), ())
    header = BlockHeader(
        height=0, prev_hash=ZERO_HASH, timestamp=doc.timestamp,
        tx_root=tx_root([txid(coinbase)]), producer=bytes(PUBKEY_BYTES), round=0,
    )
    return Block(header=header, transactions=(coinbase,), producer_signature=ZERO_SIGNATURE)


def genesis_state(doc: GenesisDoc, params: NetworkParams) -> tuple[ChainState, Block, Consensus]:
    """The state after block 0, block 0 itself, and the network's consensus context."""
    block = genesis_block(doc, params)
    coinbase = block.transactions[0]
    cb_id = txid(coinbase)
    utxos = UtxoSet(
        {outpoint_key(cb_id, i): new_utxo(o.owner, o.amount, 0) for i, o in enumerate(coinbase.outputs)}
    )
    authorities = tuple(bytes.fromhex(k) for k in doc.authorities)
    h = block_hash(block.header)
    state = ChainState(
        height=0, tip_hash=h, timestamp=doc.timestamp,
        issued=sum(o.amount for o in coinbase.outputs), utxos=utxos,
        quorums=immutables.Map({0: authority_quorum(0, authorities)}),
    )
    return state, block, Consensus(params=params, authorities=authorities, genesis_hash=h)


def regtest_genesis() -> GenesisDoc:
    """The built-in regtest genesis: the published authority key and faucet wallet."""
    authority = SigningKey(REGTEST_AUTHORITY_SEED).public
    faucet = SigningKey(REGTEST_FAUCET_SEED).public
    return GenesisDoc(
        network=REGTEST.name, timestamp=REGTEST_GENESIS_TIMESTAMP,
        authorities=[authority.hex()],
        outputs=[GenesisOutput(encode_address(REGTEST.address_prefix, faucet), REGTEST_FAUCET_AMOUNT)],
    )
