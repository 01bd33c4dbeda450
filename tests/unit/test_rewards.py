"""Block rewards (DESIGN.md section 4): round robin over payable nodes and the exact split of the
reward between the operator fee and the contributors, down to the atomic unit."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.service_nodes import (
    StateChangeKind,
    next_reward_winner,
    reward_order_key,
    reward_split,
)
from snode.core.state import Contribution, ServiceNode
from snode.core.transactions import OutPoint, txid
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST

REWARD = REGTEST.block_reward
GRACE = REGTEST.payable_grace
OPERATOR, ALICE, BOB, CAROL = (key_from_label(x) for x in ("operator", "alice", "bob", "carol"))


def _coinbase(block):
    return [(o.owner, o.amount) for o in block.transactions[0].outputs]


def _node_with(chain, fee_ppm: int, amounts: list[int]):
    """A registry record with these contributions (operator first), from a real registration."""
    node = chain.node(chain.new_node(fee_ppm=fee_ppm))
    owners = [OPERATOR.public, ALICE.public, BOB.public]
    return msgspec.structs.replace(
        node, contributors=tuple(Contribution(o, a, 0) for o, a in zip(owners, amounts)),
    )


def test_block_reward_goes_to_the_authority_while_no_node_is_payable(chain):
    (block,) = chain.mine()
    assert _coinbase(block) == [(chain.authority.public, REWARD)]


def test_fees_go_to_the_producer_not_the_node(chain):
    pubkey = chain.new_node("bob")
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    chain.mine(GRACE)
    tx = chain.transfer_tx(ALICE, CAROL.public, COIN)
    chain.submit(tx)
    (block,) = chain.mine()
    fee = 1_000_000 * COIN - sum(o.amount for o in tx.outputs)
    assert _coinbase(block) == [(BOB.public, REWARD), (chain.authority.public, fee)]


def test_split_with_operator_fee_is_exact_on_chain(chain):
    # 5 % fee of 16.5 coins = 0.825; the other 15.675 split 100k : 60k : 40k of 200k
    # = 7.8375 / 4.7025 / 3.135; the operator gets 0.825 + 7.8375 = 8.6625.
    pubkey = chain.new_node(amount=100_000 * COIN, fee_ppm=50_000)
    chain.submit(chain.stake_tx(ALICE, pubkey, 60_000 * COIN))
    chain.submit(chain.stake_tx(BOB, pubkey, 40_000 * COIN))
    chain.mine()
    activated = chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    chain.mine_to(activated + GRACE + 1)
    outputs = _coinbase(chain.blocks[-1])
    assert outputs == [
        (OPERATOR.public, 8_662_500_000), (ALICE.public, 4_702_500_000), (BOB.public, 3_135_000_000),
    ]
    assert sum(a for _, a in outputs) == REWARD
    # The reward outputs unlock like any other output.
    coinbase_id = txid(chain.blocks[-1].transactions[0])
    share = chain.state.utxos[OutPoint(coinbase_id, 1).key()]
    assert (share.owner, share.amount) == (ALICE.public, 4_702_500_000)
    assert share.unlock_height == chain.state.height + chain.params.unlock_confirmations


def test_split_rounds_down_and_gives_the_dust_to_the_operator(chain):
    # fee 3.3333 %: 16_500_000_000 * 33_333 // 1_000_000 = 549_994_500; rest 15_950_005_500.
    # 70_000.000000001 / 200_000 of the rest = 5_582_501_925.00008 -> 5_582_501_925;
    # 29_999.999999999 / 200_000 of the rest = 2_392_500_824.99992 -> 2_392_500_824;
    # operator: 549_994_500 + 7_975_002_750 + 1 unit of dust = 8_524_997_251.
    node = _node_with(chain, 33_333, [100_000 * COIN, 70_000 * COIN + 1, 30_000 * COIN - 1])
    split = reward_split(node, REWARD)
    assert split == [
        (OPERATOR.public, 8_524_997_251), (ALICE.public, 5_582_501_925), (BOB.public, 2_392_500_824),
    ]
    assert sum(a for _, a in split) == REWARD


@pytest.mark.parametrize("fee_ppm", [0, 1, 33_333, 100_000])
@pytest.mark.parametrize("reward", [1, 7, REWARD, REWARD + 3])
def test_split_always_sums_to_the_reward(chain, fee_ppm, reward):
    node = _node_with(chain, fee_ppm, [100_000 * COIN + 7, 66_666 * COIN + 5, 33_334 * COIN - 12])
    split = reward_split(node, reward)
    assert sum(a for _, a in split) == reward
    assert all(a > 0 for _, a in split)
    assert split[0][0] == OPERATOR.public


def test_solo_node_without_fee_takes_the_whole_reward(chain):
    node = chain.node(chain.new_node())
    assert reward_split(node, REWARD) == [(OPERATOR.public, REWARD)]


def test_two_payable_nodes_alternate(chain):
    # Registered in the same block and activated together: the lower key is paid first.
    sn1, sn2 = key_from_label("sn-1"), key_from_label("sn-2")
    chain.register(OPERATOR, sn1, REGTEST.staking_requirement)
    chain.register(ALICE, sn2, REGTEST.staking_requirement)
    chain.mine()
    chain.state_change(sn1.public, StateChangeKind.ACTIVATE, 1)
    chain.state_change(sn2.public, StateChangeKind.ACTIVATE, 1)
    chain.mine()
    activated = chain.state.height
    chain.mine(GRACE + 6)
    first, second = sorted([(sn1.public, OPERATOR.public), (sn2.public, ALICE.public)])
    paid = [_coinbase(b)[0][0] for b in chain.blocks[activated + GRACE + 1:]]
    assert paid == [first[1], second[1]] * 3
    assert chain.node(first[0]).last_reward_height == chain.state.height - 1
    assert chain.node(second[0]).last_reward_height == chain.state.height


def test_round_robin_least_recently_paid_then_registration_height_then_pubkey(chain):
    base = chain.node(chain.new_node())
    base = msgspec.structs.replace(base, active=True, active_since=0)

    def node(key: int, last_paid: int, registered: int):
        return msgspec.structs.replace(
            base, pubkey=bytes([key]) * 32, last_reward_height=last_paid, registration_height=registered,
        )

    def winner(*nodes: ServiceNode) -> bytes:
        won = next_reward_winner(list(nodes), 100, chain.params)
        assert won is not None
        return won.pubkey

    # Paid longest ago wins, whatever its registration height and key.
    assert winner(node(1, 9, 1), node(9, 8, 5)) == bytes([9]) * 32
    # Equal last payment: registered earlier wins, even with a larger key.
    assert winner(node(1, 9, 5), node(9, 9, 4)) == bytes([9]) * 32
    # Equal both: the smaller key wins.
    assert winner(node(9, 9, 4), node(1, 9, 4)) == bytes([1]) * 32
    assert reward_order_key(node(1, 9, 4)) < reward_order_key(node(9, 9, 4))


def test_round_robin_skips_nodes_that_are_not_payable(chain):
    base = chain.node(chain.new_node())
    waiting = msgspec.structs.replace(base, active=True, active_since=97, last_reward_height=0)
    inactive = msgspec.structs.replace(base, pubkey=bytes(32), active=False, last_reward_height=0)
    payable = msgspec.structs.replace(
        base, pubkey=b"\x01" * 32, active=True, active_since=0, last_reward_height=50
    )
    assert next_reward_winner([waiting, inactive, payable], 101, chain.params) is payable
    assert next_reward_winner([waiting, inactive], 101, chain.params) is None
    assert next_reward_winner([waiting, inactive], 102, chain.params) is waiting
