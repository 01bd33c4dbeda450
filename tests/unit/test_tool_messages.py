"""Lines of the operator tools that carry a count or an amount read right for one and for many
(`snode-cli watch`'s event lines)."""

from __future__ import annotations

import pytest

from snode.params import COIN
from snode.tools.cli import event_line


@pytest.mark.parametrize("amount, words", [
    (COIN, "paid this node 1 coin"), (2 * COIN, "paid this node 2 coins"),
    (COIN // 2, "paid this node 0.5 coins"), (COIN + 1, "paid this node 1.000000001 coins"),
])
def test_reward_line_says_coin_for_one_and_coins_otherwise(amount, words):
    line = event_line({"event": "reward", "height": 7, "amount": amount, "time": 0})
    assert line.endswith(f"reward: block 7 {words}"), line


@pytest.mark.parametrize("count, words", [(1, "(1 transaction)"), (0, "(0 transactions)"), (3, "(3 transactions)")])
def test_block_line_counts_transactions(count, words):
    line = event_line({"event": "block", "height": 7, "round": 0, "transactions": count, "hash": "ab" * 32, "time": 0})
    assert words in line, line
