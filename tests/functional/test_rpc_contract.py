"""The typed RPC contract against real daemons: answers decode into snode.api.types' records,
`get_service_nodes` filters by contributor, and regtest's `set_mock_time` moves the clock.

- Every method a client uses answers in the shape of its record (`RpcClient.call_typed`), on a
  regtest service node with a peer, a block, a mempool transaction and a registration command.
- Two service nodes on one regtest chain: a pool node (an operator's wallet, alice's stake) and
  a solo node (bob's wallet). `{"contributor": address}` lists exactly the nodes an address is
  on, combines with `service_node_pubkeys`, and refuses a bad address naming the parameter; the
  wallets' `stakes` and `balance` (which ask with that filter) show each wallet only its nodes.
- `set_mock_time {"timestamp": t}` stamps the next generated block with t and moves the expiry
  of a registration command; 0 restores the real clock; devnet refuses it with -7.
"""

from __future__ import annotations

import time

from snode.api import errors as E
from snode.api.types import (
    BlockResult,
    GenerateBlocksResult,
    HeightResult,
    InfoResult,
    MempoolResult,
    MockTimeResult,
    OutputsResult,
    PeersResult,
    RegistrationCmdParams,
    RegistrationCmdResult,
    SendTxResult,
    ServiceNodeKeyResult,
    ServiceNodesResult,
    ServiceNodeState,
    StakingRequirementResult,
    StatusResult,
    TransactionResult,
)
from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.encoding import encode
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
from snode.core.registration import parse_command
from snode.core.transactions import Transfer, TxOut
from snode.core.txbuilder import build_spend
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, MAX_FUTURE_BLOCK_TIME, REGTEST
from tests.functional.framework import (
    TestNode,
    address_of,
    assert_equal,
    assert_raises_rpc_error,
    connect_nodes,
    faucet_key,
    narrator,
    spendable_outputs,
)
from tests.functional.sn_helpers import POOL_MIN, SOLO
from tests.functional.wallet_helpers import Wallet, funded, mine, registration_cmd

CLOCK_MARGIN = 600
"""How far under the registration validity the daemon sets a command's expiry (rpc.methods)."""

log = narrator(__name__)


def test_every_answer_decodes_into_its_record(nodes, sn):
    rpc = sn.rpc  # typed calls, as the wallet and the tools make them
    log.info("Pay a key from the faucet through send_raw_transaction: its id, then the pool entry")
    payee = key_from_label("contract payee")
    tx = build_spend(spendable_outputs(sn, faucet_key()), faucet_key(), [TxOut(payee.public, 5 * COIN)],
                     Transfer(), REGTEST)
    sent = rpc.call_typed("send_raw_transaction", {"tx_hex": encode(tx).hex()}, SendTxResult)
    pooled = rpc.call_typed("get_transaction", {"txid": sent.txid}, TransactionResult)
    assert_equal((pooled.in_pool, pooled.height, pooled.kind), (True, None, "transfer"))
    assert_equal([t.txid for t in rpc.call_typed("get_mempool", None, MempoolResult).transactions], [sent.txid])
    log.info("Mine it: generate_blocks, get_block, get_height, get_outputs agree")
    mined = rpc.call_typed("generate_blocks", {"blocks": 1}, GenerateBlocksResult)
    block = rpc.call_typed("get_block", {"hash": mined.blocks[0]}, BlockResult)
    assert sent.txid in block.tx_ids
    assert_equal(rpc.call_typed("get_height", None, HeightResult), HeightResult(height=1, hash=block.hash))
    outputs = rpc.call_typed("get_outputs", {"address": address_of(sn, payee)}, OutputsResult)
    assert_equal([(o.txid, o.amount) for o in outputs.outputs], [(sent.txid, 5 * COIN)])
    log.info("Service-node methods: key, registration command (typed params), staking requirement")
    key = rpc.call_typed("get_service_node_key", None, ServiceNodeKeyResult).service_node_pubkey
    params = RegistrationCmdParams(contributor_addresses=[address_of(sn, payee)], contributor_amounts=[SOLO])
    cmd = rpc.call_typed("get_service_node_registration_cmd", params, RegistrationCmdResult).registration_cmd
    assert_equal(parse_command(cmd, REGTEST).sn_pubkey.hex(), key)
    assert_equal(rpc.call_typed("get_staking_requirement", None, StakingRequirementResult).staking_requirement,
                 SOLO)
    log.info("A peer: add_peer answers a status, get_peers lists it")
    plain = nodes.add()
    connect_nodes(plain, sn)
    peers = rpc.call_typed("get_peers", None, PeersResult)
    assert_equal([p.address.rpartition(":")[0] for p in peers.peers], [plain.ip])
    info = rpc.call_typed("get_info", None, InfoResult)
    assert_equal((info.height, info.peer_count, info.service_node), (1, 1, True))
    log.info("stop_daemon on the peer answers a status and the process exits")
    assert_equal(plain.rpc.call_typed("stop_daemon", None, StatusResult), StatusResult(status="OK"))
    assert_equal(plain.process.wait(timeout=30), 0)


def _on(node: TestNode, **filters: object) -> list[str]:
    """The pubkeys get_service_nodes lists with these filters."""
    found = node.rpc.call_typed("get_service_nodes", filters, ServiceNodesResult[ServiceNodeState])
    return sorted(r.service_node_pubkey for r in found.service_node_states)


def test_contributor_filter_and_two_wallets_stakes(nodes, sn, tmp_path):
    log.info("Fund an operator, alice and bob; a second service-node daemon gives a second key")
    wallets = funded(sn, tmp_path, {"operator": 100_010 * COIN, "alice": 60_010 * COIN,
                                    "bob": 200_010 * COIN})
    operator, alice, bob = wallets["operator"], wallets["alice"], wallets["bob"]
    other = nodes.add(extra_args=["--service-node"])
    pool = sn.get_service_node_key()["service_node_pubkey"]
    solo = other.get_service_node_key()["service_node_pubkey"]
    log.info("The operator registers a pool node, bob a solo node, alice stakes 60,000 on the pool")
    operator.ok(registration_cmd(sn, operator.address, POOL_MIN, cut="5"), yes=True)
    bob.ok(registration_cmd(other, bob.address, SOLO), yes=True)
    mine(sn)
    alice.ok(f"stake {pool} 60000", yes=True)
    mine(sn)

    log.info("The contributor filter lists exactly the nodes each address is on")
    nobody = Wallet(sn, tmp_path, "nobody")
    assert_equal(_on(sn), sorted([pool, solo]))
    assert_equal(_on(sn, contributor=operator.address), [pool])
    assert_equal(_on(sn, contributor=alice.address), [pool])
    assert_equal(_on(sn, contributor=bob.address), [solo])
    assert_equal(_on(sn, contributor=nobody.address), [])
    log.info("With service_node_pubkeys too, both filters apply")
    assert_equal(_on(sn, contributor=bob.address, service_node_pubkeys=[pool, solo]), [solo])
    assert_equal(_on(sn, contributor=alice.address, service_node_pubkeys=[solo]), [])
    log.info("A bad address is -32602 naming the parameter")
    for bad in ("nonsense", encode_address(DEVNET.address_prefix, key_from_label("x").public)):
        assert_raises_rpc_error(E.INVALID_PARAMS, "Invalid params: contributor: ", sn.get_service_nodes,
                                contributor=bad)
    assert_raises_rpc_error(E.INVALID_PARAMS, "contributor", sn.get_service_nodes, contributor=7)

    log.info("Each wallet's stakes and balance show its own nodes only")
    alice_stakes, bob_stakes = alice.ok("stakes").out, bob.ok("stakes").out
    assert pool in alice_stakes and solo not in alice_stakes and "mine: 60000" in alice_stakes
    assert solo in bob_stakes and pool not in bob_stakes and "mine: 200000" in bob_stakes
    assert pool in operator.ok("stakes").out
    assert solo not in nobody.ok("stakes").out and pool not in nobody.ok("stakes").out
    assert "Staked: 60000 coins on 1 service node" in alice.ok("balance").lines
    assert "Staked: 200000 coins on 1 service node" in bob.ok("balance").lines


def _expiry(node: TestNode) -> int:
    """The expiry of a registration command the daemon makes now."""
    cmd = node.get_service_node_registration_cmd(
        contributor_addresses=[address_of(node, key_from_label("clock operator"))],
        contributor_amounts=[SOLO])["registration_cmd"]
    return parse_command(cmd, REGTEST).expiry


def test_set_mock_time_moves_the_clock_and_zero_restores_it(sn):
    lead = REGTEST.registration_validity - CLOCK_MARGIN
    later = max(int(time.time()), sn.get_block(height=0)["timestamp"]) + 100_000
    log.info("set_mock_time to a day ahead: the answer echoes it")
    answer = sn.rpc.call_typed("set_mock_time", {"timestamp": later}, MockTimeResult)
    assert_equal(answer, MockTimeResult(status="OK", timestamp=later))
    log.info("A generated block carries the mock time, and so does a registration command's expiry")
    block_hash = sn.generate_blocks(blocks=1)["blocks"][0]
    assert_equal(sn.get_block(hash=block_hash)["timestamp"], later)
    assert_equal(_expiry(sn), later + lead)
    log.info("Move it 65 s on: the next block follows")
    sn.set_mock_time(timestamp=later + 65)
    block_hash = sn.generate_blocks(blocks=1)["blocks"][0]
    assert_equal(sn.get_block(hash=block_hash)["timestamp"], later + 65)
    log.info("0 restores the real clock: a registration command expires from real time again")
    assert_equal(sn.set_mock_time(timestamp=0), {"status": "OK", "timestamp": 0})
    before = int(time.time())
    expiry = _expiry(sn)
    assert before + lead <= expiry <= int(time.time()) + lead, (before, expiry)
    log.info("The tip is a day ahead of the real clock now: generate_blocks says how to go on")
    assert_raises_rpc_error(E.MISC_ERROR, f"set_mock_time to {later + 65 - MAX_FUTURE_BLOCK_TIME} or later to go on",
                            sn.generate_blocks, blocks=1)
    height = sn.get_height()["height"]
    sn.set_mock_time(timestamp=later + 65 - MAX_FUTURE_BLOCK_TIME)
    assert_equal(sn.generate_blocks(blocks=1)["height"], height + 1)
    log.info("A negative or non-integer time, or an unknown parameter: -32602 naming it")
    assert_raises_rpc_error(E.INVALID_PARAMS, "timestamp", sn.set_mock_time, timestamp=-1)
    assert_raises_rpc_error(E.INVALID_PARAMS, "timestamp", sn.set_mock_time, timestamp="tomorrow")
    assert_raises_rpc_error(E.INVALID_PARAMS, "when", sn.set_mock_time, timestamp=1, when=2)


def test_set_mock_time_is_refused_on_devnet(nodes, tmp_path):
    log.info("Start a devnet daemon (its own genesis): set_mock_time is regtest only")
    genesis = tmp_path / "genesis.json"
    genesis.write_bytes(encode_genesis(GenesisDoc(
        network="devnet", timestamp=1_767_225_600, authorities=[key_from_label("devnet authority").public.hex()],
        outputs=[GenesisOutput(encode_address(DEVNET.address_prefix, SigningKey(bytes(32)).public), COIN)],
    )))
    node = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}"])
    assert_raises_rpc_error(E.REGTEST_ONLY, "set_mock_time is only available on regtest (--regtest)",
                            node.set_mock_time, timestamp=1_800_000_000)
