"""The service-node network on regtest with real daemons: uptime proofs over P2P, activation,
payable after 4 blocks, the exact reward split of a pool with a fee, decommission after missed
proofs and recommission after a restart, refused proofs from a node that lies about its IP, and
quorumnet refusing keys that are not registered service nodes.

A plain `hub` node mines (every regtest node holds the authority key) while service nodes
connect to it over P2P; state changes need blocks, so waits for them mine a block per poll
(`sn_helpers.mine_until`). Decommission time-outs are reached by moving the nodes' mock clocks
(`set_mock_time`), not by waiting 30 s.
"""

from __future__ import annotations

import json
import os
import signal
import time

from snode.core.address import encode_address
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.encoding import decode
from snode.core.proofs import make_proof
from snode.core.transactions import StateChange
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.params import COIN, REGTEST
from snode.services.saving import MIN_SAVE_INTERVAL
from tests.functional.framework import (
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    narrator,
    next_loopback_ip,
    scaled,
    send_spend,
    snode_cli,
    sync_blocks,
    wait_until,
)
from tests.functional.p2p import FakePeer
from tests.functional.sn_helpers import (
    POOL_MIN,
    SOLO,
    fund_and_unlock,
    mine_until,
    move_clocks,
    record,
    register,
    registered_solo,
    registered_solos,
    stake,
)

log = narrator(__name__)


def mine(node, blocks: int) -> None:
    node.generate_blocks(blocks=blocks)

V = "v0.2.0"


def test_lifecycle_solo_and_pool(nodes):
    log.info("Start a hub and two service nodes connected to it; fund two operators and two contributors")
    hub = nodes.add()
    solo = nodes.add(extra_args=["--service-node"])
    pool = nodes.add(extra_args=["--service-node"])
    connect_nodes(solo, hub)
    connect_nodes(pool, hub)
    op_solo, op_pool, c1, c2 = (key_from_label(label) for label in ("op solo", "op pool", "c1", "c2"))
    fund_and_unlock(hub, {op_solo.public: SOLO + COIN, op_pool.public: POOL_MIN + COIN,
                          c1.public: 60_001 * COIN, c2.public: 40_001 * COIN})
    sync_blocks([hub, solo, pool])
    solo_pk = solo.get_service_node_key()["service_node_pubkey"]
    pool_pk = pool.get_service_node_key()["service_node_pubkey"]
    assert_equal(solo.get_info()["status_line"],
                 f"{V}; Height: {solo.get_info()['height']}, SN: not registered, proof: never")

    log.info("Register a solo node and a pool node with a 5 % cut: the pool awaits contributions")
    register(solo, hub, op_solo, SOLO)
    register(pool, hub, op_pool, POOL_MIN, cut="5")
    reg_height = hub.generate_blocks(blocks=1)["height"]
    sync_blocks([hub, solo, pool])
    rec = record(hub, pool_pk)
    assert_equal((rec["funded"], rec["active"], rec["payable"], rec["status"]), (False, False, False, "Await"))
    assert_equal((rec["registration_height"], rec["operator_fee"], rec["total_contributed"]),
                 (reg_height, 50_000, POOL_MIN))
    assert pool.get_info()["status_line"].startswith(f"{V}; Height: {reg_height}, SN: Await, proof: ")

    log.info("Two contributors stake 60,000 and 40,000: the pool is funded with 3 contributors")
    stake(hub, c1, pool_pk, 60_000 * COIN)
    stake(hub, c2, pool_pk, 40_000 * COIN)
    hub.generate_blocks(blocks=1)
    rec = record(hub, pool_pk)
    assert_equal((rec["funded"], rec["total_contributed"], len(rec["contributors"])), (True, SOLO, 3))

    log.info("Mine until an uptime proof over P2P has the solo node activated")
    # The authority (every regtest node holds it) votes the activations. One node at a time: a
    # wait for both would mine past the solo node's grace period when the pool's proof is late.
    assert mine_until(hub, lambda: record(hub, solo_pk)["active"], timeout=60, what="the solo node active")
    rec = record(hub, solo_pk)
    assert rec["last_uptime_proof"] > 0 and rec["last_state_change_reason"] == "first_uptime_proof"
    log.info("send_uptime_proof twice in a row: each is a fresh proof the hub accepts and says so; "
             "the node's own record shows what the hub accepted")
    for _ in range(2):
        sent = solo.send_uptime_proof()
        assert sent["accepted"] and sent["accepted_by"].split(":")[0] in (hub.ip, pool.ip), sent
        assert record(solo, solo_pk)["last_uptime_proof"] >= sent["timestamp"]
        stamp = sent["timestamp"]
        wait_until(lambda: record(hub, solo_pk)["last_uptime_proof"] >= stamp,  # noqa: B023 (used at once)
                   timeout=10, what="the hub holding the proof")
    log.info("GET /readyz on the active node, once it has the block that activated it: 200, nothing unmet")
    sync_blocks([hub, solo])
    status, _, data = solo.rpc.raw("", method="GET", path="/readyz")
    assert_equal((status, json.loads(data)["unmet"]), (200, []))
    assert_equal((rec["payable"], rec["decommission_count"]), (False, 0))
    activation = rec["activation_height"]
    log.info("Mine to activation + 4: the solo node becomes payable exactly then")
    while hub.get_info()["height"] < activation + 3:
        hub.generate_blocks(blocks=1)
    assert_equal(record(hub, solo_pk)["payable"], False)
    hub.generate_blocks(blocks=1)
    assert_equal(record(hub, solo_pk)["payable"], True)
    sync_blocks([hub, solo])
    line = solo.get_info()["status_line"]
    assert line.startswith(f"{V}; Height: {activation + 4}, SN: Active, proof: "), line
    assert mine_until(hub, lambda: record(hub, pool_pk)["payable"], timeout=60,
                      what="the pool node active and past its grace period")

    log.info("Mine until a block pays the pool node: the split is exact to the atomic unit")
    reward = REGTEST.block_reward
    fee = reward * 50_000 // 1_000_000
    rest = reward - fee
    expected = {
        encode_address("snr", op_pool.public): fee + rest * POOL_MIN // SOLO + (
            rest - rest * POOL_MIN // SOLO - rest * 60_000 * COIN // SOLO - rest * 40_000 * COIN // SOLO),
        encode_address("snr", c1.public): rest * 60_000 * COIN // SOLO,
        encode_address("snr", c2.public): rest * 40_000 * COIN // SOLO,
    }
    assert_equal(sum(expected.values()), reward)
    found = None
    for _ in range(4):
        h = hub.generate_blocks(blocks=1)["height"]
        block = decode(bytes.fromhex(hub.get_block(height=h)["block_hex"]), Block)
        paid = {encode_address("snr", o.owner): o.amount for o in block.transactions[0].outputs}
        if set(expected) <= set(paid):
            found = paid
            break
    assert found is not None, "no block paid the pool node within 4 blocks"
    for address, amount in expected.items():
        assert_equal(found[address], amount, f"reward of {address[:12]}")

    log.info("Stop the solo node and move every clock 40 s on: the quorum decommissions it")
    solo.stop()
    later = int(time.time()) + 40
    move_clocks([hub, pool], later, proving=[pool], judges=[hub])
    mine_until(hub, lambda: not record(hub, solo_pk)["active"], timeout=30, what="solo decommissioned")
    rec = record(hub, solo_pk)
    assert_equal((rec["active"], rec["payable"], rec["funded"], rec["decommission_count"], rec["status"]),
                 (False, False, True, 1, "Decomm"))
    assert_equal(rec["last_decommission_reason"], "missed_uptime_proofs")
    log.info("snode-cli nodes shows the decommission reason")
    table = snode_cli(hub, "nodes").stdout
    assert any(solo_pk[:12] in line and "missed_uptime_proofs" in line for line in table.splitlines()), table

    log.info("Restart the solo node with its data dir: before it has a peer, it shows the proof "
             "the network accepted before it stopped (not 'never'), as the hub does")
    last_accepted = record(hub, solo_pk)["last_uptime_proof"]
    assert last_accepted > 0
    solo.start(["--log-level=3"])  # debug: the proof book's saves are logged (below)
    own = record(solo, solo_pk)["last_uptime_proof"]
    assert 0 < own <= last_accepted, (own, last_accepted)  # the last ack it got before it stopped
    line = solo.get_info()["status_line"]
    assert ", proof: " in line and "proof: never" not in line, line
    log.info("Proofs resume and it is recommissioned")
    connect_nodes(solo, hub)
    move_clocks([hub, pool, solo], later + 10, proving=[pool, solo], judges=[hub])
    mine_until(hub, lambda: record(hub, solo_pk)["active"], timeout=30, what="solo recommissioned")
    rec = record(hub, solo_pk)
    assert_equal((rec["decommission_count"], rec["last_state_change_reason"]), (1, "uptime_proofs_resumed"))
    sync_blocks([hub, solo])
    assert ", SN: Active, proof: " in solo.get_info()["status_line"]

    log.info("The daemon saves its proof book while it runs: SIGKILL after a save, and the "
             "restarted node still has the network's word on its proof")
    saves = solo.stderr_text().count("saved the proof book")
    last = record(solo, solo_pk)["last_uptime_proof"]
    assert last > 0
    wait_until(lambda: solo.stderr_text().count("saved the proof book") > saves, timeout=3 * MIN_SAVE_INTERVAL,
               what="a save of the proof book after its last proof")
    solo.kill()
    solo.start()
    restored = record(solo, solo_pk)["last_uptime_proof"]
    assert restored >= last, (restored, last)  # that save, or a later one (proofs go on every 2 s)


def test_wrong_public_ip_is_refused(nodes):
    log.info("Start a service node that declares another public IP than the one it connects from")
    hub = nodes.add()
    liar = nodes.add(extra_args=["--service-node", f"--service-node-public-ip={next_loopback_ip()}"])
    connect_nodes(liar, hub)
    op = key_from_label("liar op")
    log.info("Register it: its proofs are refused and the refusal reaches it")
    fund_and_unlock(hub, {op.public: SOLO + COIN})
    register(liar, hub, op, SOLO)
    hub.generate_blocks(blocks=1)
    sync_blocks([hub, liar])
    reason = wait_until(lambda: liar.get_info()["last_uptime_proof_rejection"], timeout=30,
                        what="the proof rejection reaching the liar")
    declared = liar.args()[-1].split("=")[1]
    words = (f"declared IP {declared} is not the address peers see this node connect from ({liar.ip}): "
             "check --service-node-public-ip")
    assert words in reason, reason
    assert "uptime proof rejected by" in liar.stderr_text()
    log.info("Mine 3 blocks: it is neither active nor credited with a proof, on the hub and in "
             "its own view (the network's truth, not the proofs it sent)")
    pk = liar.get_service_node_key()["service_node_pubkey"]
    hub.generate_blocks(blocks=3)
    sync_blocks([hub, liar])
    rec = record(hub, pk)
    assert_equal((rec["active"], rec["last_uptime_proof"]), (False, 0))
    assert_equal(record(liar, pk)["last_uptime_proof"], 0)
    line = liar.get_info()["status_line"]
    assert line.endswith(f", proof: never, refused: {words}"), line
    status, _, data = liar.rpc.raw("", method="GET", path="/readyz")
    unmet = json.loads(data)["unmet"]
    assert status == 503 and f"peers refuse this node's uptime proofs: declared IP {declared}" in " ".join(unmet), unmet
    log.info("send_uptime_proof, the recovery step, sends a fresh proof and says it was refused")
    sent = liar.send_uptime_proof()
    assert_equal((sent["status"], sent["accepted"]), ("OK", False))
    assert_equal(sent["refused"], words)


def test_quorumnet_refuses_unregistered_keys(nodes):
    import zmq
    from zmq.utils import z85
    from zmq.utils.monitor import recv_monitor_message

    from snode.core.crypto import x25519_public

    sn = nodes.add(extra_args=["--service-node"])
    server = x25519_public(bytes.fromhex(sn.get_service_node_key()["service_node_pubkey"]))

    def handshake(client_key: SigningKey) -> int:
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        try:
            sock.curve_secretkey = z85.encode(client_key.x25519_secret())
            sock.curve_publickey = z85.encode(x25519_public(client_key.public))
            sock.curve_serverkey = z85.encode(server)
            monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
            sock.connect(f"tcp://{sn.ip}:{REGTEST.quorumnet_port}")
            monitor.setsockopt(zmq.RCVTIMEO, int(scaled(10) * 1000))
            event = recv_monitor_message(monitor)["event"]
            sock.disable_monitor()
            monitor.close(linger=0)
            return event
        finally:
            sock.close(linger=0)
            ctx.term()

    log.info("A CurveZMQ handshake with a key that is no service node fails authentication")
    stranger = key_from_label("not a service node")
    assert_equal(handshake(stranger), zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    wait_until(lambda: "not a registered service node" in sn.stderr_text(), what="refusal logged")
    log.info("Register that key as a service node: the same handshake succeeds")
    hub = nodes.add()
    connect_nodes(sn, hub)
    op = key_from_label("quorumnet op")
    fund_and_unlock(hub, {op.public: SOLO + COIN})
    import time

    from snode.core.registration import sign_registration
    from snode.core.transactions import Reservation
    reg = sign_registration(stranger, REGTEST, 0, (Reservation(op.public, SOLO),), int(time.time()) + 3600)
    send_spend(hub, op, [], reg)
    hub.generate_blocks(blocks=1)
    sync_blocks([hub, sn])
    assert_equal(handshake(stranger), zmq.EVENT_HANDSHAKE_SUCCEEDED)


def test_forged_state_changes_are_rejected(nodes):
    from snode.core.crypto import SigningKey
    from snode.core.encoding import encode
    from snode.core.service_nodes import Reason, StateChangeKind
    from snode.core.state_change import state_change_tx
    from snode.core.transactions import Vote, state_change_hash
    from snode.params import REGTEST_AUTHORITY_SEED

    log.info("Register a service node, not yet activated")
    hub = nodes.add()
    sn = nodes.add(extra_args=["--service-node"])
    connect_nodes(sn, hub)
    op = key_from_label("forge op")
    fund_and_unlock(hub, {op.public: SOLO + COIN})
    register(sn, hub, op, SOLO)
    height = hub.generate_blocks(blocks=1)["height"]
    pk = bytes.fromhex(sn.get_service_node_key()["service_node_pubkey"])

    def change(voter: SigningKey, *, sign_with: SigningKey | None = None) -> str:
        kind, reason = StateChangeKind.ACTIVATE, Reason.FIRST_UPTIME_PROOF
        message = state_change_hash(REGTEST.network_id, pk, kind, reason, height)
        vote = Vote(voter.public, (sign_with or voter).sign(message))
        return encode(state_change_tx([vote], pk, kind, reason, height)).hex()

    log.info("Send activations voted by an outsider, and by the authority with a forged "
             "signature: both refused, the node stays inactive")
    outsider = key_from_label("outsider")
    authority = SigningKey(REGTEST_AUTHORITY_SEED)
    assert_raises_rpc_error(-10, "not a member of the quorum", hub.send_raw_transaction, tx_hex=change(outsider))
    assert_raises_rpc_error(-10, "bad signature", hub.send_raw_transaction,
                            tx_hex=change(authority, sign_with=outsider))
    assert_equal(record(hub, pk.hex())["active"], False)


def test_service_node_quorum_decommissions_over_quorumnet(nodes):
    """With 4 active SNs the quorum is made of SNs (not the authority): the 3 live members vote
    over quorumnet to decommission the 4th after it stops; with 3 active the authority stands in
    again and recommissions it when it is back."""
    log.info("Register %d service nodes on a hub and mine until all are active", REGTEST.min_active_sns)
    hub = nodes.add()
    sns = [nodes.add(extra_args=["--service-node"]) for _ in range(REGTEST.min_active_sns)]
    for sn in sns:
        connect_nodes(sn, hub)
    pks = registered_solos(hub, sns, [f"quorum op {i}" for i in range(len(sns))])
    hub.generate_blocks(blocks=1)
    sync_blocks([hub, *sns])
    log.info("Wait until every SN has every SN's proof (and so its quorumnet address)")
    wait_until(lambda: all(record(sn, pk)["last_uptime_proof"] for sn in sns for pk in pks),
               timeout=30, what="every SN seeing every SN's proofs")

    log.info("Stop one SN and move every clock 40 s on: the other three vote it out over quorumnet")
    victim, victim_pk = sns[-1], pks[-1]
    victim.stop()
    later = int(time.time()) + 40
    move_clocks([hub, *sns[:-1]], later, proving=sns[:-1], judges=sns[:-1])
    rec = mine_until(hub, lambda: (r := record(hub, victim_pk)) and not r["active"] and r,
                     timeout=30, what="the SN quorum decommissioning the stopped node")
    assert_equal((rec["decommission_count"], rec["last_decommission_reason"]), (1, "missed_uptime_proofs"))
    log.info("Find the decommission's block: its voters are the live service nodes, not the authority")
    block = None
    for h in range(hub.get_info()["height"], 0, -1):
        block = decode(bytes.fromhex(hub.get_block(height=h)["block_hex"]), Block)
        changes = [tx.payload for tx in block.transactions if isinstance(tx.payload, StateChange)]
        if any(c.sn_pubkey.hex() == victim_pk and c.kind == 2 for c in changes):
            voters = {v.voter.hex() for c in changes for v in c.votes}
            assert voters <= set(pks[:-1]) and len(voters) >= 3, voters
            break
    else:
        raise AssertionError("no block holds the decommission")

    log.info("Restart it: recommissioned")
    victim.start()
    connect_nodes(victim, hub)
    move_clocks([hub, *sns], later + 10, proving=[victim], judges=[hub])
    mine_until(hub, lambda: record(hub, victim_pk)["active"], timeout=30, what="recommission")


def test_a_second_daemon_with_the_same_key_refuses_to_go_on(nodes):
    log.info("An active service node on a hub")
    hub = nodes.add()
    first = nodes.add(extra_args=["--service-node"])
    connect_nodes(first, hub)
    pk = registered_solo(hub, first, "doppel op")
    log.info("Start a second daemon on a copy of its key: it listens two proof intervals, sees the "
             "first one's proofs and exits 1 with one line naming where they come from")
    second = nodes.add(extra_args=["--service-node"], start=False)
    second.data_dir.mkdir(parents=True)
    key_file = first.data_dir / "key"
    assert key_file.exists(), sorted(p.name for p in first.data_dir.iterdir())
    (second.data_dir / "key").write_bytes(key_file.read_bytes())
    (second.data_dir / "key").chmod(0o600)
    second.start()
    connect_nodes(second, hub)
    assert second.process is not None
    code = second.process.wait(timeout=scaled(30))
    assert_equal(code, 1)
    last = second.stderr_text().strip().splitlines()[-1]
    assert last.startswith("snoded: another daemon runs this service node's key"), last
    assert f"declares IP {first.ip}" in last, last
    log.info("With --skip-doppelganger-check it runs (the operator's explicit choice)")
    second.start(["--skip-doppelganger-check"])
    connect_nodes(second, hub)
    wait_until(lambda: record(second, pk)["active"], timeout=30, what="the second daemon serving")
    assert second.running


def test_a_node_that_cannot_be_reached_where_it_says_is_decommissioned_unreachable(nodes):
    """Proofs only declare an address (and a peer can pass one off as relayed, skipping the IP
    check); quorum members test it with a CurveZMQ handshake on quorumnet."""
    log.info("A hub and %d service nodes, all active: their quorum is made of service nodes", 5)
    hub = nodes.add()
    sns = [nodes.add(extra_args=["--service-node"]) for _ in range(5)]
    for sn in sns:
        connect_nodes(sn, hub)
    pks = registered_solos(hub, sns, [f"reach op {i}" for i in range(len(sns))])
    wait_until(lambda: all(record(sn, pk)["last_uptime_proof"] for sn in sns for pk in pks),
               timeout=30, what="every SN seeing every SN's proofs")
    victim, victim_pk, live = sns[-1], pks[-1], sns[:-1]
    victim_key = SigningKey(bytes.fromhex((victim.data_dir / "key").read_text().strip()))
    assert victim_key.public.hex() == victim_pk
    log.info("Freeze the victim (SIGSTOP): it cannot answer a handshake; a fake peer keeps its "
             "proofs fresh, passed off as relayed so no IP check applies")
    fake = FakePeer(hub, source_ip=next_loopback_ip())
    fake.handshake()

    def prove(timestamp: int) -> None:
        proof = make_proof(victim_key, REGTEST, timestamp=timestamp, public_ip=victim.ip,
                           p2p_port=victim.p2p_port, quorumnet_port=REGTEST.quorumnet_port, version="0.1.0")
        fake.send(P.Proof(proof=proof, relayed=True))

    assert victim.process is not None
    os.kill(victim.process.pid, signal.SIGSTOP)
    try:
        prove(int(time.time()) + 1)
        # Members test the nodes they judge as blocks come (each node once per interval).
        # Wait for every member: one whose first failed test came after the clock moved would
        # need another 30 s of real time before its vote (a slow CI machine ran out of time).
        mine_until(hub, lambda: all(f"no quorumnet handshake with {victim_pk[:16]}" in sn.stderr_text()
                                    for sn in live),
                   timeout=30, what="every quorum member's failed reachability test")
        log.info("Move every live clock 40 s on (past the 30 s decommission age), the victim's "
                 "proof still fresh: the quorum decommissions it as unreachable")
        later = int(time.time()) + 40
        move_clocks([hub, *live], later, proving=live, judges=live)
        prove(later)
        wait_until(lambda: all(record(sn, victim_pk)["last_uptime_proof"] >= later for sn in live),
                   timeout=30, what="the fake proof reaching every judge")
        rec = mine_until(hub, lambda: (r := record(hub, victim_pk)) and not r["active"] and r,
                         timeout=60, what="the quorum decommissioning the unreachable node")
        assert_equal((rec["last_decommission_reason"], rec["status"]), ("unreachable", "Decomm"))
        log.info("The live nodes, which answer their handshakes, stay active")
        assert all(record(hub, pk)["active"] for pk in pks[:-1])
        assert not any("no quorumnet handshake with " + pk[:16] in sn.stderr_text() for sn in live for pk in pks[:-1])
        log.info("A member stops promptly (exit 0) while its tests of the frozen node are under way")
        mine(hub, 2)
        assert_equal(live[0].stop(), 0)
    finally:
        os.kill(victim.process.pid, signal.SIGCONT)
        fake.sock.close()
