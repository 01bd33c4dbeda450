"""Assume-valid (issue #36 item 5): a staged batch skips the input signatures of the blocks it
proves are ancestors of the assume-valid block (those before it in the batch) and nothing else;
`--assume-valid` takes a block hash or 0, and a malformed value is one line."""

from __future__ import annotations

import msgspec
import pytest

from snode.app.config import parse_assume_valid, parse_trusted_checkpoint
from snode.common.endpoints import ConfigError
from snode.core.blocks import block_hash, sign_block
from snode.core.errors import SnodeError
from snode.devchain import key_from_label
from snode.params import MAINNET, REGTEST, TESTNET
from tests.unit.forged_chain import forged_chain as _forged_chain
from tests.unit.forged_chain import node_on as _node


def test_the_ancestors_of_the_assume_valid_block_skip_their_input_signatures(chain_factory):
    genesis, chain = _forged_chain(chain_factory)
    blocks = chain.blocks[1:]
    with pytest.raises(SnodeError, match="input 0 has a bad signature"):
        _node(chain, genesis, None).accept_blocks(blocks, chain.now)
    node = _node(chain, genesis, block_hash(blocks[-1].header))
    assert node.accept_blocks(blocks, chain.now) == 3 and node.height == 3


def test_without_the_assume_valid_block_in_the_batch_nothing_is_skipped(chain_factory):
    genesis, chain = _forged_chain(chain_factory)
    node = _node(chain, genesis, block_hash(chain.blocks[-1].header))
    with pytest.raises(SnodeError, match="input 0 has a bad signature"):
        node.accept_blocks(chain.blocks[1:3], chain.now)


def test_every_other_signature_is_still_checked_below_it(chain_factory):
    genesis, chain = _forged_chain(chain_factory)
    first = chain.blocks[1]
    other = key_from_label("not the authority")
    unsigned = msgspec.structs.replace(sign_block(first.header, first.transactions, other, chain.params.network_id),
                                       validator_bitset=first.validator_bitset)
    blocks = [unsigned, *chain.blocks[2:]]
    node = _node(chain, genesis, block_hash(blocks[-1].header))
    with pytest.raises(SnodeError, match="block 1 has a bad signature"):
        node.accept_blocks(blocks, chain.now)


def test_the_flag_takes_a_hash_or_0_and_the_release_names_no_block_yet():
    hash_hex = "ab" * 32
    assert parse_assume_valid(hash_hex, REGTEST) == bytes.fromhex(hash_hex)
    assert parse_assume_valid(hash_hex.upper(), REGTEST) == bytes.fromhex(hash_hex)
    assert parse_assume_valid("0", MAINNET) is None
    assert parse_assume_valid(None, MAINNET) is None and parse_assume_valid(None, TESTNET) is None
    for bad in ("", "00", "xy" * 32, "ab" * 31, "ab" * 33):
        with pytest.raises(ConfigError) as refused:
            parse_assume_valid(bad, REGTEST)
        assert str(refused.value) == f"--assume-valid: '{bad}' is not a block hash (64 hex digits) or 0 (off)"


# --- --trusted-checkpoint (issue #36 item 3, its check against the chain the node has) -------------

def test_the_trusted_checkpoint_is_height_colon_hash_and_a_malformed_one_is_one_line():
    assert parse_trusted_checkpoint(f"12:{'ab' * 32}") == (12, bytes.fromhex("ab" * 32))
    assert parse_trusted_checkpoint(None) is None
    for bad in ("12", f"x:{'ab' * 32}", "12:abc", f"-1:{'ab' * 32}", f":{'ab' * 32}"):
        with pytest.raises(ConfigError) as refused:
            parse_trusted_checkpoint(bad)
        assert str(refused.value) == (f"--trusted-checkpoint: '{bad}' is not HEIGHT:HASH (a height, a colon and "
                                      "the block's hash in 64 hex digits)")
    with pytest.raises(ConfigError, match="height 0 must be from 1 to 9999999999"):
        parse_trusted_checkpoint(f"0:{'ab' * 32}")


def test_a_block_at_the_trusted_height_with_another_hash_is_refused(chain_factory):
    genesis, chain = _forged_chain(chain_factory)
    good = chain.blocks[2]
    node = _node(chain, genesis, None)
    node.trusted_checkpoint = (2, bytes(32))
    with pytest.raises(SnodeError, match=f"block 2 is {block_hash(good.header).hex()}, not the trusted checkpoint "
                       f"{'00' * 32}"):
        node.stage_batch(chain.blocks[1:], chain.now)
    node.trusted_checkpoint = (2, block_hash(good.header))
    node.assume_valid = block_hash(chain.blocks[-1].header)
    assert node.accept_blocks(chain.blocks[1:], chain.now) == 3
