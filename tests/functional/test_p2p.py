"""P2P between real daemons: a line of nodes converges, a late node syncs 300 blocks, a
transaction relays to the producer, a split network heals onto the longer chain, hostile peers
are banned without disturbing honest sync, and a node killed mid-sync finishes after restart.

Honest peers are real daemons joined with `connect_nodes`; hostile ones are `FakePeer`s (p2p.py)
that speak the framing but send what a test scripts, each from its own loopback address so that
a ban is seen on exactly that address.
"""

from __future__ import annotations

import pytest

from snode.core.blocks import Block, BlockHeader
from snode.core.encoding import decode, encode
from snode.core.transactions import Transaction
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.params import COIN
from tests.functional.framework import (
    assert_equal,
    connect_nodes,
    faucet_key,
    fund,
    narrator,
    next_loopback_ip,
    process_gone,
    scaled,
    spendable_outputs,
    sync_blocks,
    sync_mempools,
    wait_until,
)
from tests.functional.p2p import FakePeer, cut_off_after

log = narrator(__name__)


def ban_reasons(node):
    """The node's current bans: banned address -> logged reason."""
    return {b["ip"]: b["reason"] for b in node.get_peers()["bans"]}


def line(nodes, count):
    """count new nodes, each connected to the next."""
    started = [nodes.add() for _ in range(count)]
    for a, b in zip(started, started[1:]):
        connect_nodes(a, b)
    return started


def test_line_converges_and_late_node_syncs(nodes):
    log.info("Start 4 nodes in a line; mine 5 blocks at one end: all converge")
    n = line(nodes, 4)
    n[0].generate_blocks(blocks=5)
    sync_blocks(n)
    log.info("Mine 295 more: all converge on 300")
    n[0].generate_blocks(blocks=295)
    sync_blocks(n, timeout=120)
    log.info("Connect a fifth node at the far end: it syncs all 300 and leaves sync mode")
    late = nodes.add()
    connect_nodes(late, n[3])
    wait_until(lambda: late.get_info()["height"] == 300 and late.get_info()["target_height"] == 0,
               timeout=120, what="late node synced to 300")
    assert_equal(late.get_height()["hash"], n[0].get_height()["hash"])


def test_transaction_relays_to_producer(nodes):
    log.info("Send a transaction to the last of 4 nodes in a line: every mempool gets it")
    n = line(nodes, 4)
    txid = fund(n[3], {key_from_label("relay").public: 5 * COIN})
    sync_mempools(n)
    log.info("The first node mines it; the block reaches the last, whose mempool empties")
    block_hash = n[0].generate_blocks(blocks=1)["blocks"][0]
    assert txid in n[0].get_block(hash=block_hash)["tx_ids"]
    sync_blocks(n)
    wait_until(lambda: n[3].get_mempool()["transactions"] == [], what="mempool emptied on node3")
    assert_equal(n[3].get_transaction(txid=txid)["height"], 1)


def test_split_network_heals_on_longer_chain(nodes):
    log.info("Start 4 nodes as two pairs that do not see each other")
    n = [nodes.add() for _ in range(4)]
    connect_nodes(n[0], n[1])
    connect_nodes(n[2], n[3])
    log.info("Mine 5 blocks on one side, with a transaction in them, and 8 on the other")
    n[0].generate_blocks(blocks=3)
    # A transaction that only the short side mines: after the heal it is back in the mempool.
    txid = fund(n[0], {key_from_label("short side").public: COIN})
    n[0].generate_blocks(blocks=2)
    n[2].generate_blocks(blocks=8)
    sync_blocks(n[:2])
    sync_blocks(n[2:])
    long_tip = n[2].get_height()
    log.info("Join the halves: all reorganise onto the longer chain, the undone transaction "
             "back in the mempool")
    connect_nodes(n[1], n[2])
    sync_blocks(n)
    assert_equal(n[0].get_height(), long_tip)
    wait_until(lambda: txid in [t["txid"] for t in n[0].get_mempool()["transactions"]],
               what="undone transaction back in the mempool")


def hostile_inputs(node):
    """(name, bytes to send after the handshake) for each hostile behaviour of the issue."""
    garbage_block = encode(Block(
        header=BlockHeader(height=1, prev_hash=bytes.fromhex(node.get_info()["genesis_hash"]),
                           timestamp=2_000_000_000, tx_root=bytes(32), producer=bytes(32), round=0),
        transactions=(), producer_signature=bytes(64)))
    tx = decode(bytes.fromhex(fund_tx_hex(node)), Transaction)
    forged = encode(Transaction(tx.version, tx.inputs, tx.outputs, tx.payload, (bytes(64),) * len(tx.inputs)))
    return [
        ("oversized frame", (P.MAX_FRAME + 1).to_bytes(4, "big") + b"x" * 100, "exceeds"),
        ("undecodable bytes", (5).to_bytes(4, "big") + b"\xc1\xc1\xc1\xc1\xc1", "undecodable"),
        ("unknown message", P.frame(P.Ping(1))[:4] + b"\x92\x63\x01", "undecodable"),
        ("invalid block", P.frame(P.NewBlock(garbage_block)), "invalid block"),
        ("invalid transaction", P.frame(P.NewTransaction(forged)), "bad signature"),
        ("flood", b"".join(P.frame(P.Ping(i)) for i in range(3000)), "flooding"),
    ]


def fund_tx_hex(node):
    """A valid signed transfer (not sent), to forge from."""
    from snode.core.transactions import Transfer, TxOut
    from snode.core.txbuilder import build_spend
    from snode.params import REGTEST

    key = faucet_key()
    tx = build_spend(spendable_outputs(node, key), key, [TxOut(key_from_label("x").public, COIN)], Transfer(), REGTEST)
    return encode(tx).hex()


def test_hostile_peers_are_banned(nodes):
    log.info("Start a victim with 20 blocks and an honest node")
    victim, honest = nodes.add(), nodes.add()
    victim.generate_blocks(blocks=20)
    for name, data, reason in hostile_inputs(victim):
        log.info("Fake peer sends %s: cut off, its address banned for %r and refused at once", name, reason)
        source = cut_off_after(victim, data, name)
        bans = ban_reasons(victim)
        assert source in bans, f"{name}: {source} not banned ({bans})"
        assert reason in bans[source], f"{name}: ban reason {bans[source]!r}"
        with pytest.raises(OSError):  # a banned address is refused at once
            again = FakePeer(victim, source_ip=source)
            try:
                again.handshake()
            finally:
                again.close()
        assert_equal(victim.get_info()["height"], 20)
    log.info("The honest node still syncs from the victim")
    connect_nodes(honest, victim)
    sync_blocks([victim, honest])


def test_other_network_is_dropped(nodes):
    log.info("Fake peer says Hello with another genesis: dropped, logged, not banned")
    node = nodes.add()
    peer = FakePeer(node, source_ip=next_loopback_ip())
    try:
        peer.send(peer.hello(genesis_hash=bytes(32)))
        peer.receive()  # the node's own Hello
        assert peer.closed_by_node()
    finally:
        peer.close()
    wait_until(lambda: "its genesis" in node.stderr_text(), what="log line naming the genesis")
    assert_equal(node.get_peers()["bans"], [])


def test_kill_mid_sync_then_resume(nodes):
    log.info("Mine 5,000 blocks on a source node")
    source = nodes.add()
    for _ in range(5):  # five store batches of 1,000 blocks
        source.generate_blocks(blocks=1_000)
    log.info("Connect a new node and SIGKILL it as soon as it has some blocks")
    syncing = nodes.add()
    connect_nodes(syncing, source)
    seen = wait_until(lambda: syncing.get_info()["height"], what="sync under way")
    workers = syncing.child_pids()
    assert workers, "a sync batch is verified in worker processes"
    syncing.kill()
    assert seen < 5_000, "killed mid-sync"
    log.info("Its signature workers end on their own when the daemon's pipe to them closes")
    wait_until(lambda: all(process_gone(pid) for pid in workers), what="verify workers gone")
    log.info("Restart it: it keeps every block it reported and says the stop was not clean")
    syncing.start()
    # Every block the node reported before the kill was committed, so none is lost; the state
    # of blocks whose state rows were still deferred is rebuilt from them at start-up.
    assert seen <= syncing.get_info()["height"] <= 5_000
    assert "the last stop was not clean" in syncing.stderr_text()
    log.info("Reconnect: it finishes the sync")
    connect_nodes(syncing, source)
    sync_blocks([source, syncing], timeout=120)
    assert_equal(syncing.get_info()["target_height"], 0)
    log.info("Stop both cleanly: the workers go with them")
    workers = syncing.child_pids() + source.child_pids()
    assert_equal(syncing.stop(), 0)
    assert_equal(source.stop(), 0)
    assert all(process_gone(pid) for pid in workers)


def test_known_peers_survive_restart(nodes):
    log.info("Connect two nodes, then restart one without add_peer: it reconnects from its data dir")
    a, b = nodes.add(), nodes.add()
    connect_nodes(a, b)
    assert_equal(a.stop(), 0)
    a.start()  # no add_peer this time: the address comes from the data dir
    wait_until(lambda: any(p["address"].startswith(b.ip + ":") for p in a.get_peers()["peers"]),
               timeout=30, what="reconnection to the saved peer")


def signed_block_with_bad_transfer(node):
    """A block on node's tip, correctly signed by the (public) regtest authority, whose only
    transfer spends an output that does not exist."""
    from snode.core.blocks import make_block
    from snode.core.crypto import SigningKey
    from snode.core.transactions import TX_VERSION, Coinbase, OutPoint, Transfer, TxOut
    from snode.params import REGTEST, REGTEST_AUTHORITY_SEED

    authority = SigningKey(REGTEST_AUTHORITY_SEED)
    info = node.get_info()
    tip = node.get_block(height=info["height"])
    coinbase = Transaction(TX_VERSION, (), (TxOut(authority.public, REGTEST.block_reward),),
                           Coinbase(info["height"] + 1), ())
    bogus = Transaction(TX_VERSION, (OutPoint(bytes(32), 0),), (TxOut(authority.public, COIN),), Transfer(),
                        (bytes(64),))
    return make_block(version=1, height=info["height"] + 1, prev_hash=bytes.fromhex(tip["hash"]),
                      timestamp=tip["timestamp"] + 1, transactions=(coinbase, bogus), producer_key=authority,
                      network_id=REGTEST.network_id)


def test_signed_block_with_invalid_transaction_is_banned(nodes):
    log.info("Fake peer sends a block signed by the authority that spends a missing output")
    victim, honest = nodes.add(), nodes.add()
    honest.generate_blocks(blocks=5)
    source = next_loopback_ip()
    peer = FakePeer(victim, source_ip=source)
    try:
        peer.handshake()
        peer.send(P.NewBlock(encode(signed_block_with_bad_transfer(victim))))
        assert peer.closed_by_node()
    finally:
        peer.close()
    log.info("It is banned with the transaction's reason; the victim then syncs from an honest node")
    bans = ban_reasons(victim)
    assert "does not exist or is already spent" in bans[source], bans
    assert "Traceback" not in victim.stderr_text()
    connect_nodes(victim, honest)
    sync_blocks([victim, honest])


def test_peer_lying_about_height_is_banned_and_sync_goes_on(nodes):
    log.info("Fake peer claims height 2**62, then answers the node's GetBlocks with no blocks")
    victim, honest = nodes.add(), nodes.add()
    honest.generate_blocks(blocks=5)
    source = next_loopback_ip()
    liar = FakePeer(victim, source_ip=source)
    try:
        liar.send(liar.hello(height=2**62))
        liar.receive()  # the node's Hello
        request = None
        while not isinstance(request, P.GetBlocks):
            request = liar.receive()
        liar.send(P.Blocks(blocks=[], height=2**62))
        assert liar.closed_by_node()
    finally:
        liar.close()
    log.info("It is banned for its claim; the victim syncs from an honest node and leaves sync mode")
    bans = ban_reasons(victim)
    assert "claims height" in bans[source], bans
    connect_nodes(victim, honest)
    sync_blocks([victim, honest])
    assert_equal(victim.get_info()["target_height"], 0)


def test_limits_before_the_handshake(nodes):
    import socket

    node = nodes.add()
    source = next_loopback_ip()
    log.info("Fake peer sends a frame larger than a Hello before the handshake: cut off and banned")
    peer = FakePeer(node, source_ip=source)
    try:
        peer.send_raw((5_000).to_bytes(4, "big") + b"x" * 100)
        assert peer.closed_by_node()
    finally:
        peer.close()
    assert "exceeds the 4096-byte limit" in ban_reasons(node)[source]
    log.info("Open 9 connections from one address: the ninth is closed, the first gets a Hello")
    crowd_ip = next_loopback_ip()
    crowd = [socket.create_connection((node.ip, node.p2p_port), timeout=scaled(10), source_address=(crowd_ip, 0))
             for _ in range(9)]
    try:
        crowd[-1].settimeout(scaled(10))
        data = crowd[-1].recv(4096)
        assert data == b"", "the ninth connection from one address should be closed at once"
        crowd[0].settimeout(scaled(2))
        assert crowd[0].recv(4096) != b""  # the first got the node's Hello
    finally:
        for s in crowd:
            s.close()
    assert_equal(node.get_info()["height"], 0)


def test_a_block_is_not_sent_back_to_the_peer_that_sent_it(nodes):
    log.info("A node at genesis; another makes block 1; a fake peer hands it to the first")
    node, maker = nodes.add(), nodes.add()
    maker.generate_blocks(blocks=1)
    block = bytes.fromhex(maker.get_block(height=1)["block_hex"])
    sender = FakePeer(node, source_ip=next_loopback_ip())
    listener = FakePeer(node, source_ip=next_loopback_ip())
    try:
        sender.handshake()
        listener.handshake()
        sender.send(P.NewBlock(block))
        log.info("The node adopts it and relays it to the other peer, not back to the sender")
        relayed = listener.receive_until(lambda m: isinstance(m, P.NewBlock), timeout=10)
        assert isinstance(relayed, P.NewBlock)
        assert_equal(relayed.block, block)
        sender.send(P.Ping(9))  # answered after the block was handled: what was sent before it is read
        seen = [sender.receive()]
        while not isinstance(seen[-1], P.Pong):
            seen.append(sender.receive())
        assert not [m for m in seen if isinstance(m, P.NewBlock)], seen
    finally:
        sender.close()
        listener.close()
    assert_equal(node.get_info()["height"], 1)
