"""A node that does not know a fork (issue #34 item 4, `node.upgrade`): what it learns from,
what it keeps as "cannot validate yet" and what it still refuses as invalid, its bounds, what
survives a restart, and what it tells the operator."""

from __future__ import annotations

import logging

import msgspec
import pytest

from snode.core.blocks import Block, BlockHeader, BlockHeaderV2, header_fields, producer_message
from snode.core.crypto import SigningKey, hash32
from snode.core.encoding import encode
from snode.core.errors import InvalidBlock
from snode.devchain import key_from_label
from snode.net.protocol import ProtocolViolation
from snode.net.relay import decode_block, peek_block
from snode.node.node import Node
from snode.node.upgrade import MAX_ADDRESSES, MAX_LEARNT, MAX_PENDING_BLOCKS, CannotValidateYet, UpgradeWatch
from snode.node.verifier import InlineVerifier
from snode.params import REGTEST, TESTNET, V2, Fork
from snode.store.memory import MemoryStore
from tests.unit.conftest import FUNDS, PEOPLE, LabChain

log = logging.getLogger(__name__)

H = 6
"""The height of v2 on the upgraded chain."""


def _chains() -> tuple[LabChain, LabChain]:
    """The network's chain (v2 at H, mined to H + 2) and an old-schedule twin of its genesis."""
    funds = {key_from_label(p).public: FUNDS for p in PEOPLE}
    upgraded = LabChain.create(funds, params=REGTEST.with_test_forks((Fork(V2, H),)))
    upgraded.mine(H + 2)
    return upgraded, LabChain.create(funds, params=REGTEST)


def _old_node(old: LabChain, watch: UpgradeWatch | None = None) -> Node:
    genesis = old.fork(at=0).state
    return Node(params=old.params, consensus=old.consensus, store=MemoryStore(old.blocks[0], genesis),
                state=genesis, identity=None, producer_key=None, verifier=InlineVerifier(), upgrade=watch)


def _announced(watch: UpgradeWatch, height: int, peers: int = 2) -> None:
    for i in range(peers):
        watch.learn_announcement(height, 0, agent="snoded/0.3.0", address=f"127.0.0.{i + 1}")


class _FutureHeader(BlockHeaderV2, frozen=True, array_like=True, gc=False, tag=9):
    """A header of a block version this snoded has never heard of (a later fork's): built in
    process only, since such a header does not decode from a peer's bytes (docs/UPGRADES.md)."""


def _future(header: BlockHeader) -> _FutureHeader:
    return _FutureHeader(**header_fields(header), state_root=bytes(32))


def _resigned(block: Block, key: SigningKey) -> Block:
    """`block` with a header of a version never heard of, signed again by `key`."""
    header = _future(block.header)
    signature = key.sign(producer_message(REGTEST.network_id, hash32(encode(header))))
    return msgspec.structs.replace(block, header=header, producer_signature=signature)


def test_without_a_learnt_fork_a_v2_block_is_invalid_as_before():
    upgraded, old = _chains()
    node = _old_node(old)
    with pytest.raises(InvalidBlock, match=f"block {H} has version 2; this chain is on fork v1"):
        node.accept_blocks(upgraded.blocks[1:], upgraded.now)
    assert node.height == H - 1 and node.upgrade.pending() == []


def test_from_a_learnt_fork_its_blocks_are_kept_and_the_node_stops_before_it():
    upgraded, old = _chains()
    node = _old_node(old)
    _announced(node.upgrade, H, peers=5)
    assert node.upgrade.stop_height is None  # announcements warn: any number of addresses is cheap
    assert node.accept_blocks(upgraded.blocks[1:], upgraded.now) == H - 1
    assert node.upgrade.stop_height == H  # the fork's first block, by a producer that may make it
    assert [h for h, _ in node.upgrade.pending()] == [H, H + 1, H + 2]
    with pytest.raises(CannotValidateYet, match=f"block {H} is on fork v2 from height {H}") as caught:
        node.accept_block(upgraded.blocks[H], upgraded.now)
    assert not isinstance(caught.value, InvalidBlock)  # never invalid: nobody is scored or banned for it
    with pytest.raises(CannotValidateYet):  # nor does it check (and sign) a template there
        node.check_template(upgraded.blocks[H], 0)
    assert node.height == H - 1


def test_a_wrong_version_below_the_announced_fork_is_still_invalid():
    upgraded, old = _chains()
    node = _old_node(old)
    _announced(node.upgrade, H + 10)
    node.accept_blocks(upgraded.blocks[1:H], upgraded.now)
    with pytest.raises(InvalidBlock, match=f"block {H} has version 2"):
        node.accept_block(upgraded.blocks[H], upgraded.now)
    assert node.upgrade.pending() == []


def test_one_peer_warns_and_a_block_of_the_fork_confirms_it():
    upgraded, old = _chains()
    node = _old_node(old)
    _announced(node.upgrade, H, peers=1)
    assert node.upgrade.stop_height is None  # one peer cannot stop the node with a made-up height
    assert "UPGRADE REQUIRED: fork v2 at height 6 (in 5 blocks)" in node.status_line(0)
    node.accept_blocks(upgraded.blocks[1:], upgraded.now)
    assert node.height == H - 1 and node.upgrade.stop_height == H
    assert f"(stopped at {H - 1})" in node.status_line(0)


def test_a_block_version_never_heard_of_at_the_tip_teaches_an_unknown_fork():
    upgraded, old = _chains()
    old.mine(H - 1)
    node = _old_node(old)
    node.accept_blocks(old.blocks[1:], old.now)
    following = old.block_with([])
    with pytest.raises(InvalidBlock):  # a forged signature teaches nothing
        node.accept_block(msgspec.structs.replace(following, header=_future(following.header)), old.now)
    assert node.upgrade.learnt == []
    with pytest.raises(CannotValidateYet, match="fork unknown"):
        node.accept_block(_resigned(following, old.authority), old.now)
    info = node.upgrade.required(node.height, 0)
    assert info is not None and (info["fork"], info["height"], info["stopped"]) == ("unknown", H, True)


def test_announcements_of_own_or_passed_forks_are_not_news():
    watch = UpgradeWatch(REGTEST.with_test_forks((Fork(V2, 20),)))
    watch.learn_announcement(20, 0, agent="snoded/0.2.0", address="a")  # its own v2
    watch.learn_announcement(10, 15, agent="snoded/0.2.0", address="a")  # below the tip
    watch.learn_announcement(12, 0, agent="snoded/0.2.0", address="a")  # below its own schedule's top
    assert watch.learnt == []


def test_peers_never_stop_a_node_and_a_third_of_the_active_sns_proofs_do():
    log.info("two addresses made up a fork (cheap for an attacker): a warning, never a stop of the node")
    watch = UpgradeWatch(REGTEST)
    _announced(watch, H, peers=MAX_ADDRESSES + 4)
    assert watch.stop_height is None and watch.required(0, 0) is not None
    log.info("the proofs of a third of 30 active service nodes confirm it: 9 do not, the tenth does")
    for i in range(10):
        assert watch.stop_height is None
        watch.learn_from_proof("v2", H, 0, version="0.3.0", source=f"sn{i}", needed=10)
    assert watch.stop_height == H


def test_what_was_learnt_and_kept_survives_a_restart_until_the_schedule_knows_it(tmp_path):
    watch = UpgradeWatch(REGTEST, tmp_path)
    for i in range(2):
        watch.learn_from_proof("v2", H, 0, version="0.3.0", source=f"sn{i}", needed=0)
    watch.park([(H, b"\x01" * 32, b"block six"), (H + 1, b"\x02" * 32, b"block seven")])
    again = UpgradeWatch(REGTEST, tmp_path)
    assert again.stop_height == H and again.pending() == [(H, b"block six"), (H + 1, b"block seven")]
    upgraded = UpgradeWatch(REGTEST.with_test_forks((Fork(V2, H),)), tmp_path)
    assert upgraded.learnt == [] and len(upgraded.pending()) == 2  # the kept blocks wait for the tip
    upgraded.forget_pending(H + 1)
    assert UpgradeWatch(REGTEST, tmp_path).pending() == []


@pytest.mark.parametrize("learnt", [b"1e400", b"[" * 100_000, b"[{\"height\": 1e400}]", b"x" * (2 << 20)])
def test_a_damaged_learnt_file_or_a_kept_block_that_is_no_file_is_one_warning_and_the_daemon_starts(
        tmp_path, learnt: bytes, caplog) -> None:
    """Each of these raised out of the watch's constructor on every start (the daemon could not
    start until someone removed the file), or hung it: a kept block that is a link to /dev/zero."""
    (tmp_path / "upgrade.json").write_bytes(learnt)
    pending = tmp_path / "pending-blocks"
    pending.mkdir()
    (pending / f"7-{'ab' * 32}.block").mkdir()
    (pending / f"8-{'cd' * 32}.block").symlink_to("/dev/zero")
    with caplog.at_level(logging.WARNING, logger="snode.node.upgrade"):
        watch = UpgradeWatch(REGTEST, tmp_path)
    assert watch.learnt == [] and watch.pending() == []
    assert "upgrade.json cannot be read" in caplog.text
    assert list(pending.iterdir()) == [], "what is no kept block is removed"


def test_the_pending_store_is_bounded_and_keeps_the_lowest_heights():
    watch = UpgradeWatch(REGTEST)
    watch.park([(h, h.to_bytes(32, "big"), b"x" * 100) for h in range(MAX_PENDING_BLOCKS + 10, 0, -1)])
    assert [h for h, _ in watch.pending()] == list(range(1, MAX_PENDING_BLOCKS + 1))


def test_notices_come_daily_then_hourly_in_the_last_day():
    watch = UpgradeWatch(TESTNET)  # two-minute blocks; v2 known but not scheduled (FAR_AHEAD)
    watch.learn_announcement(10_000, 0, agent="snoded/0.3.0", address="a")
    first = watch.notice_due(0, 1_000)
    assert first is not None and (first["event"], first["state"], first["height"]) == ("upgrade_required", "v2",
                                                                                     10_000)
    assert "upgrade snoded (known by snoded/0.3.0)" in first["reason"]
    assert watch.notice_due(0, 1_000 + 3_600) is None
    assert watch.notice_due(0, 1_000 + 86_400) is not None
    late = 10_000 - 100  # 99 blocks left: under a day
    assert watch.notice_due(late, 1_000 + 86_400 + 3_600) is not None
    info = watch.required(late, 0)
    assert info is not None and (info["blocks_left"], info["eta_seconds"]) == (99, 99 * 120)


def test_a_peers_block_of_a_version_never_heard_of_is_not_its_fault():
    log.info("bytes of a later fork's block: cannot validate yet, not a ProtocolViolation (no ban)")
    _, old = _chains()
    old.mine(H - 1)
    following = old.block_with([])
    future = encode(_resigned(following, old.authority))
    for read in (decode_block, peek_block):
        with pytest.raises(CannotValidateYet, match="a block of version 9, which this snoded does not know"):
            read(future)
        with pytest.raises(ProtocolViolation, match="does not decode"):
            read(future[:-5])
        with pytest.raises(ProtocolViolation, match="does not decode"):
            read(encode([[1], 2]))


def test_forks_only_peers_announced_never_crowd_out_one_that_proofs_name(tmp_path):
    """A stranger's made-up heights take the free places alone: service nodes' proofs of the real
    fork take the place of the highest of them and stop the node; forks the chain passed
    unconfirmed go; an accepted proof that says nothing new writes nothing."""
    watch = UpgradeWatch(REGTEST, tmp_path)
    tip, real = 1_000, 6_000
    for height in range(tip + 10, tip + 10 + MAX_LEARNT + 3):
        watch.learn_announcement(height, tip, agent="snoded/9.9.9", address="198.51.100.7")
    assert [f.height for f in watch.learnt] == list(range(tip + 10, tip + 10 + MAX_LEARNT)), "free places only"
    for i in range(3):
        watch.learn_from_proof("v2", real, tip, version="0.2.0", source=f"sn{i}", needed=2)
    assert watch.stop_height == real, [(f.height, f.confirmed) for f in watch.learnt]
    assert real in [f.height for f in watch.learnt] and tip + 13 not in [f.height for f in watch.learnt]
    written = watch.revision
    for i in range(3, 50):
        watch.learn_from_proof("v2", real, tip, version="0.2.0", source=f"sn{i}", needed=2)
    assert watch.revision == written, "proofs that say nothing new are not a file write each"
    info = watch.required(tip + 100, 0)
    assert info is not None and info["height"] == real, "the chain passed the made-up heights"
    watch.learn_announcement(tip + 200, tip + 100, agent="x", address="198.51.100.8")
    assert [f.height for f in watch.learnt] == [tip + 200, real], "the passed ones went"
    again = UpgradeWatch(REGTEST, tmp_path)
    assert [(f.height, f.confirmed) for f in again.learnt] == [(tip + 200, False), (real, True)]
