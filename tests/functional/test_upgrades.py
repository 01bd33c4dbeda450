"""Network upgrades on regtest with real daemons (issue #34, docs/UPGRADES.md): a daemon started
with `--test-fork v2@H` produces block H as version 2 and a second one accepts it; a
transaction signed for v2 is refused before H and one signed for v1 after it, each with its
reason; a node on the old schedule stays connected before the fork and is refused after it, in
one line and not banned; mainnet refuses the flag and a malformed value is one line."""

from __future__ import annotations

from snode.core.address import encode_address
from snode.core.blocks import Block
from snode.core.encoding import decode, encode
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_spend
from snode.devchain import key_from_label
from snode.params import COIN, REGTEST, REGTEST_FAUCET_WORDS, V1, V2, ForkRules
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    faucet_key,
    narrator,
    run_snoded,
    spendable_outputs,
    sync_blocks,
    wait_until,
)
from tests.functional.wallet_helpers import Wallet

log = narrator(__name__)
H = 4
"""The height v2 is scheduled at."""


def _version(node, height: int) -> int:
    return decode(bytes.fromhex(node.get_block(height=height)["block_hex"]), Block).header.version


def _transfer(node, signed_for: ForkRules) -> str:
    """A faucet transfer signed for `signed_for` (hex)."""
    to = key_from_label(f"upgrades payee {signed_for.name}").public
    tx = build_spend(spendable_outputs(node, faucet_key()), faucet_key(), [TxOut(to, COIN)], Transfer(), REGTEST,
                     signed_for=signed_for)
    return encode(tx).hex()


def test_a_test_fork_switches_block_version_and_branch_id_at_its_height(nodes):
    log.info("Two regtest daemons with --test-fork v2@%d", H)
    producer = nodes.add(extra_args=[f"--test-fork=v2@{H}"])
    follower = nodes.add(extra_args=[f"--test-fork=v2@{H}"])
    connect_nodes(follower, producer)
    producer.generate_blocks(blocks=H - 2)
    log.info("Before the fork: a transaction signed for v2 is refused with its reason")
    assert_raises_rpc_error(None, f"is signed for fork v2, which starts at height {H}; this chain is on v1",
                            producer.send_raw_transaction, tx_hex=_transfer(producer, V2))
    producer.generate_blocks(blocks=1)
    assert_equal(_version(producer, H - 1), 1, "block H-1's version")
    log.info("The next block is v2's: a transaction signed for v1 is refused, one signed for v2 taken")
    assert_raises_rpc_error(None, f"is signed for fork v1; this chain is on v2 from height {H}: sign it again",
                            producer.send_raw_transaction, tx_hex=_transfer(producer, V1))
    producer.send_raw_transaction(tx_hex=_transfer(producer, V2))
    producer.generate_blocks(blocks=1)
    block = decode(bytes.fromhex(producer.get_block(height=H)["block_hex"]), Block)
    assert_equal((block.header.version, len(block.transactions)), (2, 2), "block H's version and transactions")
    log.info("The follower accepts block H as version 2")
    sync_blocks([producer, follower])
    assert_equal(_version(follower, H), 2, "block H on the follower")
    log.info("Its data dir past v2, restarted without the schedule, the daemon refuses to start in one line")
    follower.stop()
    without = [a for a in follower.args() if not a.startswith("--test-fork")]
    done = run_snoded(without[3:])
    assert_equal(done.returncode, 1, "exit code without --test-fork")
    assert_equal(done.stderr.strip().splitlines(), [
        f"snoded: --data-dir: its chain's block {H} is version 2, but this daemon's fork schedule puts that height on "
        "fork v1 (version 1): start it with the schedule the chain was made with (the same --test-fork), or a "
        "snoded that knows that fork"], "the refusal")
    follower.start()
    assert_equal(follower.get_info()["height"], H, "the follower's height, restarted with its schedule")


def test_a_peer_on_the_old_schedule_is_kept_before_the_fork_and_refused_after_it(nodes):
    upgraded = nodes.add(extra_args=[f"--test-fork=v2@{H}"])
    old = nodes.add()
    log.info("Before v2's height the two schedules connect")
    connect_nodes(old, upgraded)
    upgraded.generate_blocks(blocks=H - 1)
    sync_blocks([upgraded, old])
    log.info("Past it, a new connection from the old node is refused in one line naming both forks")
    old.stop()
    upgraded.generate_blocks(blocks=1)
    old.start()
    old.add_peer(address=f"{upgraded.ip}:{upgraded.p2p_port}")
    line = (f"peer is on fork v1 with no fork scheduled; this node is on fork v2 from height {H}: the peer "
            "does not know v2 (an older snoded)")
    wait_until(lambda: line in upgraded.stderr_text(), timeout=30, what="the refusal on the upgraded node")
    assert "banned" not in upgraded.stderr_text().split(line, 1)[1], upgraded.log_tail()
    assert_equal(upgraded.get_peers()["peers"], [], "the upgraded node's peers")


def test_the_wallet_signs_for_the_daemons_fork_when_it_has_the_schedule(nodes, tmp_path):
    node = nodes.add(extra_args=[f"--test-fork=v2@{H}"])
    node.generate_blocks(blocks=H - 1)  # the next block is v2's
    payee = key_from_label("upgrades wallet payee")
    address = encode_address(REGTEST.address_prefix, payee.public)
    log.info("Without the daemon's schedule the wallet signs for v1: refused with the reason")
    plain = Wallet(node, tmp_path, "plain", words=REGTEST_FAUCET_WORDS)
    plain.refused(f"transfer {address} 1", f"is signed for fork v1; this chain is on v2 from height {H}")
    log.info("With --test-fork it signs for v2, and the transfer is mined in block H")
    sent = plain.run(f"transfer {address} 1", yes=True, extra=[f"--test-fork=v2@{H}"])
    assert sent.rc == 0, sent.out + sent.err
    node.generate_blocks(blocks=1)
    assert_equal(len(decode(bytes.fromhex(node.get_block(height=H)["block_hex"]), Block).transactions), 2,
                 "block H's transactions")


def test_mainnet_refuses_the_flag_and_a_malformed_value_is_one_line(tmp_path):
    for args, line in (
        (["--test-fork", "v2@10"], "--test-fork: mainnet's fork schedule is in the release; the flag is for "
                                   "devnet and regtest"),
        (["--regtest", "--test-fork", "v2-10"], "--test-fork: 'v2-10' is not NAME@HEIGHT (example: v2@20)"),
        (["--regtest", "--test-fork", "v2@9", "--test-fork", "v2@12"], "--test-fork: fork v2 cannot follow fork v2"),
    ):
        done = run_snoded([*args, "--data-dir", str(tmp_path / "d"), "--non-interactive"])
        assert_equal(done.returncode, 1, f"exit code of {args}")
        assert_equal(done.stderr.strip().count("\n"), 0, f"one line for {args}")
        assert line in done.stderr, done.stderr
