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


@pytest.mark.parametrize("args, line", [
    (["blocks", "--count", "²"], "snode-cli: --count: '²' is not a number of blocks from 1 to 1,000"),
    (["blocks", "--count", "9" * 5000], "is not a number of blocks from 1 to 1,000"),
    (["register-cmd", "--address", "x", "--amount", "²"], "snode-cli: --amount: amount '²' is not a decimal number"),
    (["register-cmd", "--address", "x", "--amount", "1" * 5000], "is too large (5000 digits)"),
])
def test_numbers_int_cannot_take_are_one_line_before_any_call(args, line):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "snode.tools.cli", "--rpc", "127.0.0.1:1", *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert line in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
