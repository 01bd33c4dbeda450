"""The state root with real daemons (issue #36 item 1, DESIGN.md section 13): three regtest
daemons with `--test-fork v2@H` make and take v2 blocks whose headers carry the root of the state
after them; every node computes the same root at every tip across H (get_info's `state_root`),
and again after a restart, which reads the stored checksum instead of summing the state; a block
whose root is wrong, made with the published regtest keys, is refused with the one line naming
both roots (the sender banned for it)."""

from __future__ import annotations

import re
import time

from snode.core.blocks import Block, header_state_root, make_block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode, encode
from snode.core.transactions import Coinbase, Transaction, Transfer, TxOut
from snode.core.txbuilder import build_spend
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.params import COIN, REGTEST, REGTEST_AUTHORITY_SEED, V2
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    faucet_key,
    narrator,
    run_snoded,
    spendable_outputs,
    sync_blocks,
    wait_until,
)
from tests.functional.hostile import ban_reasons
from tests.functional.p2p import cut_off_after

log = narrator(__name__)
H = 4
"""The height v2 is scheduled at."""


def _header(node, height: int):
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block).header


def _roots(nodes) -> list[str]:
    return [n.get_info()["state_root"] for n in nodes]


def _pay(node, label: str) -> None:
    to = key_from_label(label).public
    tx = build_spend(spendable_outputs(node, faucet_key()), faucet_key(), [TxOut(to, COIN)], Transfer(), REGTEST,
                     signed_for=V2)
    node.send_raw_transaction(tx_hex=encode(tx).hex())


def _agree(nodes, height: int) -> str:
    """Every node at `height` shows one root, the one its tip's header carries."""
    sync_blocks(nodes)
    roots = _roots(nodes)
    carried = header_state_root(_header(nodes[0], height))
    assert_equal(len(set(roots)), 1, f"the nodes' roots at height {height}: {roots}")
    assert_equal(roots[0], carried.hex() if carried else "", f"the root block {height} carries")
    return roots[0]


def test_nodes_agree_on_every_root_across_the_fork_and_a_restart_and_refuse_a_wrong_one(nodes):
    log.info("Three regtest daemons with --test-fork v2@%d", H)
    producer, *followers = [nodes.add(extra_args=[f"--test-fork=v2@{H}"]) for _ in range(3)]
    for follower in followers:
        connect_nodes(follower, producer)
    producer.generate_blocks(blocks=H - 1)
    log.info("Before the fork no header carries a root, and get_info shows none")
    assert_equal(_agree([producer, *followers], H - 1), "", "the root before v2")
    log.info("Across H: blocks %d to %d, one with a transfer, each with the root all three compute", H, H + 2)
    seen = set()
    for height in range(H, H + 3):
        if height == H + 1:
            _pay(producer, "state root payee")
        producer.generate_blocks(blocks=1)
        seen.add(_agree([producer, *followers], height))
    assert_equal(len(seen), 3, "three blocks, three roots")
    log.info("A follower restarted reads its stored checksum and goes on agreeing")
    restarted = followers[0]
    restarted.stop()
    restarted.start()
    connect_nodes(restarted, producer)
    assert_equal(restarted.get_info()["state_root"], producer.get_info()["state_root"], "the root after a restart")
    producer.generate_blocks(blocks=2)
    _agree([producer, *followers], H + 4)
    _refuse_a_wrong_root(followers[1])


def _refuse_a_wrong_root(node) -> None:
    """A block on the node's tip that is right in every way but its root (all zeros)."""
    tip = node.get_info()
    height = tip["height"] + 1
    authority = SigningKey(REGTEST_AUTHORITY_SEED)
    coinbase = Transaction(V2.tx_version, (), (TxOut(authority.public, REGTEST.block_reward),), Coinbase(height), ())
    block = make_block(version=V2.block_version, height=height, prev_hash=bytes.fromhex(tip["top_block_hash"]),
                       timestamp=max(int(time.time()), _header(node, height - 1).timestamp),
                       transactions=(coinbase,), producer_key=authority, network_id=REGTEST.network_id,
                       state_root=bytes(32))
    log.info("A peer sends block %d with the published authority key and a state root of zeros", height)
    source = cut_off_after(node, P.frame(P.NewBlock(encode(block))), "a block with a wrong root")
    wait_until(lambda: source in ban_reasons(node), what="the sender's ban")
    line = (f"block {height} has state root {'00' * 32}; this node computes [0-9a-f]{{64}} for the state after it")
    assert re.search(line, ban_reasons(node)[source]), ban_reasons(node)[source]
    matches = [text for text in node.log_tail(200).splitlines() if re.search(line, text)]
    assert matches, f"no log line: {line}"
    log.info("Refused in one line: %s", matches[0].split(" WARNING ")[-1])
    assert_equal(node.get_info()["height"], height - 1, "the node's height after the refusal")


def test_a_malformed_assume_valid_is_one_line_and_a_hash_or_0_starts(nodes, tmp_path):
    for value in ("123", "g" * 64):
        done = run_snoded(["--regtest", f"--assume-valid={value}", "--data-dir", str(tmp_path / "d"),
                           "--non-interactive"])
        assert_equal(done.returncode, 1, f"exit code of --assume-valid={value}")
        assert_equal(done.stderr.strip().splitlines(), [
            f"snoded: --assume-valid: '{value}' is not a block hash (64 hex digits) or 0 (off)"], "the refusal")
    log.info("--assume-valid=0 and a hash start a daemon")
    for value in ("0", "ab" * 32):
        node = nodes.add(extra_args=[f"--assume-valid={value}"])
        assert_equal(node.get_info()["height"], 0, f"a daemon with --assume-valid={value}")


def test_a_trusted_checkpoint_that_contradicts_the_chain_refuses_the_start_in_one_line(nodes):
    node = nodes.add()
    node.generate_blocks(blocks=3)
    real = node.get_block(height=2)["hash"]
    other = "ab" * 32
    node.stop()
    log.info("Restarted with --trusted-checkpoint=2:%s... (its block 2 is %s...)", other[:16], real[:16])
    done = run_snoded([*node.args()[3:], f"--trusted-checkpoint=2:{other}"])
    assert_equal(done.returncode, 1, "exit code with a contradicting checkpoint")
    assert_equal(done.stderr.strip().splitlines(), [
        f"snoded: --trusted-checkpoint: this data dir's chain has block {real} at height 2, not {other}: the "
        "checkpoint contradicts the chain this node has; check the checkpoint, or start with a new data dir to "
        "sync the chain that passes through it"], "the refusal")
    done = run_snoded([*node.args()[3:], "--trusted-checkpoint=2:xyz"])
    assert_equal((done.returncode, done.stderr.strip().count("\n")), (1, 0), "a malformed checkpoint: one line")
    log.info("With its own block 2 as the checkpoint it starts")
    node.start([f"--trusted-checkpoint=2:{real}"])
    assert_equal(node.get_info()["height"], 3, "the height with a checkpoint on its chain")
