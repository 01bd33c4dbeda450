"""Lines of the operator tools that carry a count or an amount read right for one and for many
(`snode-cli watch`'s event lines)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from snode.params import COIN
from snode.tools.cli import event_line, watch_line
from snode.tools.devnet import status as devnet_status
from snode.tools.devnet_network import status_table
from snode.tools.devnet_procs import AUTHORITY, SERVICE_NODE, Devnet, NodeEntry


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


def shown(event: dict[str, Any], *, as_json: bool, proofs: bool) -> str:
    """The line `watch` prints for `event`, which must print one."""
    line = watch_line(event, as_json=as_json, proofs=proofs)
    assert line is not None, event
    return line


def test_watch_leaves_accepted_proofs_out_unless_asked_and_shows_their_time():
    proof = {"event": "proof_accepted", "timestamp": 1_790_000_000, "by": "127.0.0.2:38090", "time": 1_790_000_001}
    assert watch_line(proof, as_json=False, proofs=False) is None
    signed = time.strftime("%H:%M:%S", time.localtime(1_790_000_000))
    assert shown(proof, as_json=False, proofs=True).endswith(
        f"uptime proof of {signed} accepted by 127.0.0.2:38090")
    assert json.loads(shown(proof, as_json=True, proofs=False)) == proof  # scripts get every event
    refused = {"event": "proof_refused", "by": "127.0.0.2:38090", "reason": "declared IP", "time": 0}
    assert shown(refused, as_json=False, proofs=False).endswith("refused by 127.0.0.2:38090: declared IP")


def test_devnet_status_help_names_the_columns_its_table_shows(tmp_path):
    devnet = Devnet(tmp_path, [NodeEntry(AUTHORITY, AUTHORITY, "127.9.9.1", 0, str(tmp_path / "a")),
                               NodeEntry("node1", SERVICE_NODE, "127.9.9.2", 0, str(tmp_path / "n"))])
    columns = [str(c.header) for c in status_table(devnet).columns]
    text = " ".join((devnet_status.help or "").split())
    assert text.startswith("The processes: " + ", ".join(columns) + " (--json adds"), (columns, text)
