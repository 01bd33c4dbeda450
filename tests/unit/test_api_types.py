"""The RPC contract's records (snode.api.types) against the daemon's method table.

Every result record round-trips through JSON; every parameter record refuses unknown fields.
Then a MethodTable over a real in-process node (memory store, a registered pool node with a
reservation and a contribution, a transaction in the mempool) answers every method it can
answer without P2P or service-node mode, and each answer, encoded as the envelope encodes it,
decodes into its record. The cached `get_service_nodes` list must equal the records built one
by one, the `contributor` filter must pick exactly the nodes an address is on, and
`set_mock_time` must move the table's and the node's clock on regtest only.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import pytest

from snode.api import errors as E
from snode.api import types as T
from snode.api.errors import RpcError
from snode.common.clock import MockableClock, SystemClock
from snode.core.address import encode_address
from snode.core.service_nodes import StateChangeKind
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter, store_thread
from snode.params import COIN, REGTEST
from snode.rpc.methods import MethodTable, RpcLimits
from snode.store.memory import MemoryStore
from tests.unit.conftest import POOL_MINIMUM, LabChain

ALICE, BOB, CAROL, DAVE = (key_from_label(n) for n in ("alice", "bob", "carol", "dave"))

SAMPLE_STATE = T.ServiceNodeState(
    service_node_pubkey="ab" * 32, active=True, funded=True, payable=False, registration_height=3,
    total_contributed=200, staking_requirement=200, operator_fee=50_000,
    contributors=[T.Contributor(address="snr1x", amount=150, reserved=0),
                  T.Contributor(address="snr1y", amount=50, reserved=50)],
    last_uptime_proof=0, decommission_count=1, status="Active", operator_address="snr1x",
    funded_height=4, activation_height=None, last_reward_height=0, last_state_change_height=9,
    last_state_change_reason="first_uptime_proof", last_decommission_reason="",
)

SAMPLES: dict[Any, msgspec.Struct] = {
    T.Contributor: SAMPLE_STATE.contributors[0],
    T.ServiceNodeRecord: T.ServiceNodeRecord(**{
        f: getattr(SAMPLE_STATE, f) for f in T.ServiceNodeRecord.__struct_fields__
    }),
    T.ServiceNodeState: SAMPLE_STATE,
    T.ServiceNodesResult[T.ServiceNodeState]: T.ServiceNodesResult(service_node_states=[SAMPLE_STATE], height=9),
    T.ServiceNodeKeyResult: T.ServiceNodeKeyResult(service_node_pubkey="cd" * 32),
    T.RegistrationCmdResult: T.RegistrationCmdResult(registration_cmd="register_service_node 0 a 1 2 b c"),
    T.InfoResult: T.InfoResult(
        height=5, target_height=0, status_line="v0; Height: 5, SN: no", network="regtest",
        version="0", top_block_hash="00" * 32, genesis_hash="11" * 32, mempool_size=1,
        service_node=False, service_node_count=2, peer_count=0, last_uptime_proof_rejection="",
    ),
    T.UpgradeRequired: T.UpgradeRequired(fork="v2", height=20, blocks_left=3, eta_seconds=360,
                                         known_by=["snoded/0.3.0"], confirmed=True, stopped=False,
                                         pending_blocks=0, action="upgrade snoded (known by snoded/0.3.0)"),
    T.NextFork: T.NextFork(fork="v2", height=1_440, blocks_left=100, eta_seconds=12_000, active_sns=12,
                           ready_sns=11, this_node="ready",
                           summary="fork v2 at 1,440 (in 100 blocks, ~3h 20m): 11 of 12 active SNs ready; "
                                   "this node: ready"),
    T.Departure: T.Departure(height=120, kind="deregistered", reason="missed_uptime_proofs",
                             stakes_unlock_height=160, stakes_locked_blocks=38),
    T.HeightResult: T.HeightResult(height=5, hash="00" * 32),
    T.StakingRequirementResult: T.StakingRequirementResult(staking_requirement=200, height=5),
    T.StatusResult: T.StatusResult(status="OK"),
    T.MockTimeResult: T.MockTimeResult(status="OK", timestamp=1_800_000_000),
    T.SendProofResult: T.SendProofResult(status="OK", timestamp=1_800_000_000, accepted=True,
                                         accepted_by="127.0.0.2:38090"),
    T.GenerateBlocksResult: T.GenerateBlocksResult(blocks=["22" * 32], height=6),
    T.BlockResult: T.BlockResult(hash="22" * 32, height=6, timestamp=7, prev_hash="00" * 32,
                                 producer="33" * 32, tx_ids=["44" * 32], block_hex="0102"),
    T.TransactionResult: T.TransactionResult(txid="44" * 32, height=None, in_pool=True,
                                             kind="transfer", tx_hex="03"),
    T.SendTxResult: T.SendTxResult(txid="44" * 32),
    T.OutputEntry: T.OutputEntry(txid="44" * 32, index=1, amount=5, unlock_height=16),
    T.LockedStake: T.LockedStake(service_node_pubkey="33" * 32, amount=5, state="unlocking",
                                 unlock_height=40, leaves_at=41),
    T.LockedStakesResult: T.LockedStakesResult(height=6, stakes=[T.LockedStake(
        service_node_pubkey="33" * 32, amount=5, state="deregistered", unlock_height=46,
        reason="missed_uptime_proofs", output="44" * 32 + ":0")]),
    T.OutputsResult: T.OutputsResult(height=6, outputs=[
        T.OutputEntry(txid="44" * 32, index=1, amount=5, unlock_height=16)]),
    T.MempoolEntry: T.MempoolEntry(txid="44" * 32, size=200, fee=3, kind="stake", spends=["55" * 32 + ":0"]),
    T.MempoolResult: T.MempoolResult(transactions=[
        T.MempoolEntry(txid="44" * 32, size=200, fee=3, kind="stake", spends=[])]),
    T.PeerInfo: T.PeerInfo(address="127.0.0.2:38090", listen_address=None, direction="inbound",
                           height=3, agent="snode/0", connected_since=1_800_000_000),
    T.BanInfo: T.BanInfo(ip="127.0.0.3", seconds_left=60, reason="bad block"),
    T.RewardShare: T.RewardShare(address="snt1x", amount=5),
    T.RewardPaid: T.RewardPaid(height=7, amount=5, shares=[T.RewardShare(address="snt1x", amount=5)]),
    T.ServiceNodeRewardsResult: T.ServiceNodeRewardsResult(
        service_node_pubkey="33" * 32, from_height=0, to_height=9, total=5, complete=True,
        rewards=[T.RewardPaid(height=7, amount=5, shares=[T.RewardShare(address="snt1x", amount=5)])],
        totals=[T.RewardShare(address="snt1x", amount=5)]),
    T.PeersResult: T.PeersResult(peers=[], bans=[T.BanInfo(ip="127.0.0.3", seconds_left=60, reason="x")]),
}


R = TypeVar("R")


def _records(base: type[R]) -> set[type[R]]:
    return {v for v in vars(T).values()
            if inspect.isclass(v) and issubclass(v, base) and v is not base}


def test_every_result_record_has_a_sample_and_round_trips() -> None:
    sampled = {getattr(t, "__origin__", t) for t in SAMPLES}
    assert sampled == _records(T.Result), "add a sample for each new result record"
    for record_type, sample in SAMPLES.items():
        assert msgspec.json.decode(msgspec.json.encode(sample), type=record_type) == sample


def test_result_records_keep_the_specification_fields_first_and_ignore_new_ones() -> None:
    spec = ("service_node_pubkey", "active", "funded", "payable", "registration_height",
            "total_contributed", "staking_requirement", "operator_fee", "contributors",
            "last_uptime_proof", "decommission_count")
    assert T.ServiceNodeRecord.__struct_fields__ == spec
    assert T.ServiceNodeState.__struct_fields__[:len(spec)] == spec
    newer = {**msgspec.to_builtins(SAMPLES[T.HeightResult]), "field_of_a_newer_daemon": 1}
    assert msgspec.convert(newer, T.HeightResult) == SAMPLES[T.HeightResult]


PARAMS_RECORDS = sorted(_records(T.Params), key=lambda t: t.__name__)


@pytest.mark.parametrize("params_type", PARAMS_RECORDS)
def test_every_params_record_names_an_unknown_field(params_type: type[T.Params]) -> None:
    with pytest.raises(msgspec.ValidationError, match="no_such_field"):
        msgspec.convert({"no_such_field": 1}, params_type)


# --- the method table's answers --------------------------------------------------------------

@dataclass
class Served:
    """A method table over a node that holds `chain`'s blocks, and what the test put there."""

    table: MethodTable
    clock: MockableClock
    chain: LabChain
    pool_node: bytes
    """Registered by the operator with a reservation for bob; alice staked on it."""
    solo_node: bytes
    """Carol's solo node."""
    pending: bytes
    """A transfer in the node's mempool."""


def _address(key: Any) -> str:
    return encode_address(REGTEST.address_prefix, key.public)


@contextlib.asynccontextmanager
async def _serving(chain: LabChain) -> AsyncIterator[tuple[Node, MethodTable, MockableClock]]:
    """A method table over a node (in memory) that has accepted every block of `chain`."""
    genesis_block, genesis_state = chain.blocks[0], chain.fork(at=0).state
    clock = MockableClock()
    node = Node(params=chain.params, consensus=chain.consensus,
                store=MemoryStore(genesis_block, genesis_state), state=genesis_state,
                identity=None, producer_key=chain.authority, clock=clock, verifier=InlineVerifier())
    writer = ChainWriter(node, store_thread())
    try:
        for block in chain.blocks[1:]:
            await writer.accept_block(block)
        yield node, MethodTable(node, request_stop=lambda: None, writer=writer, clock=clock), clock
    finally:
        writer.close()


@pytest.fixture
async def served(chain: LabChain) -> AsyncIterator[Served]:
    pool_node = chain.new_node(amount=POOL_MINIMUM, fee_ppm=50_000, reserved=[(BOB, 40_000 * COIN)])
    chain.stake(ALICE, pool_node, 30_000 * COIN)
    chain.mine()
    solo_node = chain.new_node(operator="carol", sn_label="sn-2")
    async with _serving(chain) as (node, table, clock):
        pending = node.submit_transaction(chain.transfer_tx(DAVE, ALICE.public, COIN), node.now())
        yield Served(table, clock, chain, pool_node, solo_node, pending)


async def _answer(served: Served, method: str, params: dict[str, Any], record_type: Any) -> Any:
    """The method's answer as a client decodes it, after the envelope's encoding."""
    result = await served.table.call(method, params)
    return msgspec.json.decode(msgspec.json.encode(result), type=record_type)


async def test_the_servers_answers_decode_into_their_records(served: Served) -> None:
    outputs = await _answer(served, "get_outputs", {"address": _address(DAVE)}, T.OutputsResult)
    tx = await _answer(served, "get_transaction", {"txid": served.pending.hex()}, T.TransactionResult)
    assert (tx.in_pool, tx.height, tx.kind) == (True, None, "transfer")
    mempool = await _answer(served, "get_mempool", {}, T.MempoolResult)
    assert [t.txid for t in mempool.transactions] == [served.pending.hex()]
    assert outputs.height == served.chain.state.height
    block = await _answer(served, "get_block", {"height": 1}, T.BlockResult)
    assert block.hash == (await _answer(served, "get_block", {"hash": block.hash}, T.BlockResult)).hash
    info = await _answer(served, "get_info", {}, T.InfoResult)
    assert (info.network, info.service_node_count, info.mempool_size) == ("regtest", 2, 1)
    tip = await _answer(served, "get_height", {}, T.HeightResult)
    assert (tip.height, tip.hash) == (info.height, info.top_block_hash)
    await _answer(served, "get_staking_requirement", {}, T.StakingRequirementResult)
    assert await _answer(served, "get_peers", {}, T.PeersResult) == T.PeersResult(peers=[], bans=[])
    mined = await _answer(served, "generate_blocks", {"blocks": 2}, T.GenerateBlocksResult)
    assert mined.height == info.height + 2 and len(mined.blocks) == 2
    listed = await _answer(served, "get_service_nodes", {}, T.ServiceNodesResult[T.ServiceNodeState])
    assert {r.service_node_pubkey for r in listed.service_node_states} == {
        served.pool_node.hex(), served.solo_node.hex()}
    assert await _answer(served, "stop_daemon", {}, T.StatusResult) == T.StatusResult(status="OK")


async def test_the_cached_list_equals_the_records_built_one_by_one(served: Served) -> None:
    keys = [served.pool_node.hex(), served.solo_node.hex()]
    for _ in range(2):  # a fresh cache, then the kept encodings after a new block
        cached = await _answer(served, "get_service_nodes", {}, T.ServiceNodesResult[T.ServiceNodeState])
        one_by_one = await _answer(served, "get_service_nodes", {"service_node_pubkeys": keys},
                                   T.ServiceNodesResult[T.ServiceNodeState])
        assert sorted(cached.service_node_states, key=lambda r: r.service_node_pubkey) == sorted(
            one_by_one.service_node_states, key=lambda r: r.service_node_pubkey)
        assert cached.height == one_by_one.height
        await served.table.call("generate_blocks", {"blocks": 1})


async def test_a_key_asked_many_times_is_answered_once(served: Served) -> None:
    """A 1 MiB request naming one key 15,000 times was a 12.8 MB answer (three such drained the
    public port's answer budget for every client)."""
    pool = served.pool_node.hex()
    assert await _on(served, service_node_pubkeys=[pool] * 50 + [served.solo_node.hex(), pool]) == sorted(
        [pool, served.solo_node.hex()])


async def test_the_kept_get_info_answer_follows_every_figure_it_shows(served: Served) -> None:
    node = served.table.node

    async def info() -> T.InfoResult:
        return await _answer(served, "get_info", {}, T.InfoResult)

    first = await info()
    assert await info() == first
    node.submit_transaction(served.chain.transfer_tx(BOB, DAVE.public, COIN), node.now())
    assert (await info()).mempool_size == first.mempool_size + 1
    await served.table.call("generate_blocks", {"blocks": 1})
    mined = await info()
    assert (mined.height, mined.mempool_size) == (first.height + 1, 0)
    assert mined.top_block_hash != first.top_block_hash
    node.note_sync_target(node.height + 3)  # every other kind of change: tests/unit/test_rpc_answers.py
    assert (await info()).target_height == node.height + 3


async def _on(served: Served, **params: Any) -> list[str]:
    answer = await _answer(served, "get_service_nodes", params, T.ServiceNodesResult[T.ServiceNodeState])
    return sorted(r.service_node_pubkey for r in answer.service_node_states)


async def test_the_contributor_filter_picks_the_nodes_an_address_is_on(served: Served) -> None:
    pool, solo = served.pool_node.hex(), served.solo_node.hex()
    operator = _address(key_from_label("operator"))
    assert await _on(served, contributor=operator) == [pool]
    assert await _on(served, contributor=_address(ALICE)) == [pool]  # a stake
    assert await _on(served, contributor=_address(BOB)) == [pool]  # a reservation only
    assert await _on(served, contributor=_address(CAROL)) == [solo]
    assert await _on(served, contributor=_address(DAVE)) == []
    assert await _on(served, contributor=_address(BOB), service_node_pubkeys=[solo, pool]) == [pool]
    assert await _on(served, contributor=_address(CAROL), service_node_pubkeys=[pool]) == []
    for bad in ("", "snr1nothing", _address(ALICE).replace("snr", "snt", 1)):
        with pytest.raises(RpcError) as refused:
            await served.table.call("get_service_nodes", {"contributor": bad})
        assert refused.value.code == E.INVALID_PARAMS
        assert refused.value.message.startswith("Invalid params: contributor: ")


async def test_set_mock_time_moves_the_clock_and_zero_restores_it(served: Served) -> None:
    later = served.chain.state.timestamp + 100_000
    answer = await _answer(served, "set_mock_time", {"timestamp": later}, T.MockTimeResult)
    assert answer == T.MockTimeResult(status="OK", timestamp=later)
    assert served.table.now() == served.table.node.now() == later
    mined = await _answer(served, "generate_blocks", {}, T.GenerateBlocksResult)
    block = await _answer(served, "get_block", {"hash": mined.blocks[0]}, T.BlockResult)
    assert block.timestamp == later
    await served.table.call("set_mock_time", {"timestamp": 0})
    assert not served.clock.mocked
    for bad in ({"timestamp": -1}, {"timestamp": "soon"}, {}, {"timestamp": 1, "when": 2}):
        with pytest.raises(RpcError) as refused:
            await served.table.call("set_mock_time", bad)
        assert refused.value.code == E.INVALID_PARAMS


async def test_set_mock_time_is_refused_without_a_mockable_clock(served: Served) -> None:
    table = MethodTable(served.table.node, request_stop=lambda: None, writer=served.table.writer,
                        clock=SystemClock())
    with pytest.raises(RpcError) as refused:
        await table.call("set_mock_time", {"timestamp": 1_800_000_000})
    assert refused.value.code == E.REGTEST_ONLY
    assert refused.value.message == "set_mock_time is only available on regtest (--regtest)"



async def test_a_nodes_rewards_are_its_coinbase_outputs_over_1000_blocks(chain: LabChain) -> None:
    """A full pool node (5% fee, operator and alice) and carol's solo node share 1,000 blocks'
    rewards: get_service_node_rewards lists, for each, exactly the coinbase outputs its owners got,
    block by block, with the totals; a range and a page say the same."""
    pool = chain.new_node(amount=POOL_MINIMUM, fee_ppm=50_000)
    chain.stake(ALICE, pool, POOL_MINIMUM)
    chain.mine()
    solo = chain.new_node(operator="carol", sn_label="sn-2")
    for sn in (pool, solo):
        chain.change_state(sn, StateChangeKind.ACTIVATE)
    chain.mine(1_000)
    owners = {pool: {key_from_label("operator").public, ALICE.public}, solo: {key_from_label("carol").public}}
    expected: dict[bytes, list[T.RewardPaid]] = {pool: [], solo: []}
    for block in chain.blocks[1:]:
        outputs = block.transactions[0].outputs
        for sn, theirs in owners.items():
            mine = [o for o in outputs if o.owner in theirs]
            if mine and sum(o.amount for o in mine) == chain.params.block_reward:
                expected[sn].append(T.RewardPaid(
                    height=block.header.height, amount=chain.params.block_reward,
                    shares=[T.RewardShare(address=encode_address(REGTEST.address_prefix, o.owner), amount=o.amount)
                            for o in mine]))
    assert len(expected[pool]) > 400 and len(expected[solo]) > 400
    assert len(expected[pool][0].shares) == 2, "the operator's fee and share, then alice's"
    async with _serving(chain) as (_, table, _):
        for sn in (pool, solo):
            answer = await table.call("get_service_node_rewards", {"service_node_pubkey": sn.hex()})
            got = msgspec.json.decode(msgspec.json.encode(answer), type=T.ServiceNodeRewardsResult)
            assert (got.rewards, got.complete, got.to_height) == (expected[sn], True, chain.state.height)
            assert got.total == sum(r.amount for r in expected[sn])
            by_address: dict[str, int] = {}
            for reward in expected[sn]:
                for share in reward.shares:
                    by_address[share.address] = by_address.get(share.address, 0) + share.amount
            assert {t.address: t.amount for t in got.totals} == by_address
            low, high = expected[sn][10].height, expected[sn][20].height
            ranged = await table.call("get_service_node_rewards", {
                "service_node_pubkey": sn.hex(), "from_height": low, "to_height": high})
            assert msgspec.convert(msgspec.to_builtins(ranged), T.ServiceNodeRewardsResult).rewards == \
                expected[sn][10:21]
        with pytest.raises(RpcError, match="is not a registered service node"):
            await table.call("get_service_node_rewards", {"service_node_pubkey": "11" * 32})


async def test_an_answer_past_its_bounds_lists_the_newest_and_says_it_is_not_complete(chain: LabChain) -> None:
    solo = chain.new_node(operator="carol", sn_label="sn-2")
    chain.change_state(solo, StateChangeKind.ACTIVATE)
    chain.mine(30)
    async with _serving(chain) as (node, table, _):
        whole = await table.call("get_service_node_rewards", {"service_node_pubkey": solo.hex()})
        assert whole.complete and len(whole.rewards) > 20

        def bounded(**limits: int) -> MethodTable:
            return MethodTable(node, request_stop=lambda: None, writer=table.writer, limits=RpcLimits(**limits))
        listed = await bounded(max_rewards_listed=5).call("get_service_node_rewards",
                                                          {"service_node_pubkey": solo.hex()})
        assert (listed.rewards, listed.complete) == (whole.rewards[-5:], False)
        read = await bounded(max_rewards_listed=5, max_reward_steps=3).call(
            "get_service_node_rewards", {"service_node_pubkey": solo.hex()})
        assert (read.rewards, read.complete) == (whole.rewards[-3:], False)
