"""Genesis documents (core/genesis.py): the built-in regtest one, the state they make, and a clear
InvalidGenesis (never a crash, never a block the node cannot read back) for a bad document."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.address import encode_address
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode, encode
from snode.core.errors import InvalidGenesis
from snode.core.genesis import (
    GenesisOutput,
    encode_genesis,
    genesis_state,
    parse_genesis,
    regtest_genesis,
)
from snode.core.transactions import outpoint_key, txid
from snode.params import (
    DEVNET,
    REGTEST,
    REGTEST_AUTHORITY_SEED,
    REGTEST_FAUCET_AMOUNT,
    REGTEST_FAUCET_SEED,
)

DOC = regtest_genesis()
FAUCET = SigningKey(REGTEST_FAUCET_SEED).public


def _with(**changes) -> bytes:
    return encode_genesis(msgspec.structs.replace(DOC, **changes))


def _output(amount: int) -> list[GenesisOutput]:
    return [GenesisOutput(encode_address("snr", FAUCET), amount)]


def test_regtest_genesis_uses_the_published_keys():
    assert DOC.authorities == [SigningKey(REGTEST_AUTHORITY_SEED).public.hex()]
    assert DOC.outputs == _output(REGTEST_FAUCET_AMOUNT)


def test_document_round_trips_through_json():
    assert parse_genesis(encode_genesis(DOC), REGTEST) == DOC


def test_genesis_state_holds_the_initial_outputs_unlocked():
    state, block, consensus = genesis_state(DOC, REGTEST)
    assert state.height == 0 and state.timestamp == DOC.timestamp
    assert state.issued == REGTEST_FAUCET_AMOUNT == state.total_unspent()
    entry = state.utxos[outpoint_key(txid(block.transactions[0]), 0)]
    assert (entry.owner, entry.amount, entry.unlock_height) == (FAUCET, REGTEST_FAUCET_AMOUNT, 0)
    assert consensus.authorities == (SigningKey(REGTEST_AUTHORITY_SEED).public,)
    assert state.quorums[0].members == consensus.authorities
    assert decode(encode(block), Block) == block


def test_genesis_hash_depends_on_the_document():
    _, _, one = genesis_state(DOC, REGTEST)
    _, _, two = genesis_state(msgspec.structs.replace(DOC, timestamp=DOC.timestamp + 1), REGTEST)
    assert one.genesis_hash != two.genesis_hash


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"{not json", "genesis document is not valid"),
        (b'{"network": "regtest"}', "genesis document is not valid"),
        (_with(network="devnet"), "is for network 'devnet', not 'regtest'"),
        (_with(authorities=[]), "names no authority key"),
        (_with(authorities=["abcd"]), "'abcd' is not a 32-byte hex public key"),
        (_with(authorities=["zz" * 32]), "is not a 32-byte hex public key"),
        (_with(outputs=[GenesisOutput(encode_address("snd", FAUCET), 5)]), "output: .*wrong network"),
        (_with(outputs=_output(0)), "amount must be above 0"),
        (_with(outputs=_output(-5)), "genesis document is not valid"),
        (_with(outputs=_output(2**63)), "genesis document is not valid"),
        (_with(outputs=_output(2**64)), "genesis document is not valid"),
        (_with(outputs=_output(2**62) * 2), "more than the largest amount"),
        (_with(timestamp=-1), "genesis document is not valid"),
        (_with(timestamp=2**70), "genesis document is not valid"),
        (encode_genesis(DOC).replace(b'"network"', b'"extra": 1, "network"'), "genesis document is not valid"),
    ],
)
def test_bad_document_is_refused_with_a_reason(data, match):
    with pytest.raises(InvalidGenesis, match=match):
        parse_genesis(data, REGTEST)


def test_document_for_another_network_is_refused():
    with pytest.raises(InvalidGenesis, match="not 'devnet'"):
        parse_genesis(encode_genesis(DOC), DEVNET)
