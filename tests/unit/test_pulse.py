"""Who may produce the next block, and when (`core.pulse`, issue #12): the parameters of each
network, the production mode, the round windows and the backstop, each round's leader and
validators, and the guard clauses on a block's producer and its validators' signatures.

States are hand-made registries of active nodes (pure data, built in microseconds), plus one real
chain that registers and activates four nodes through the authority until the service nodes
take over.
"""

from __future__ import annotations

import immutables
import pytest

from snode.core.blocks import ZERO_HASH, BlockHeader, producer_message
from snode.core.crypto import SigningKey, hash32
from snode.core.errors import InvalidBlock
from snode.core.genesis import Consensus
from snode.core.mempool import Mempool
from snode.core.production import build_block
from snode.core.pulse import (
    MAX_ROUND,
    Mode,
    RoundQuorum,
    authority_reason,
    backstop_time,
    check_block_producer,
    production_mode,
    round_at,
    round_quorum,
    round_window,
    signer_indexes,
    signer_set,
    validator_checks,
    validator_message,
)
from snode.core.quorums import block_leader_from_queue, block_validators_from_active
from snode.core.rounds import (
    Broadcast,
    BuildTemplate,
    CheckTemplate,
    RoundMachine,
    SendTemplate,
    SignTemplate,
    ValidatorSignature,
)
from snode.core.state import ChainState, Contribution, ServiceNode, registry_index
from snode.core.transition import verify_serially
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, MAINNET, REGTEST, TESTNET, NetworkParams
from tests.unit.conftest import LabChain
from tests.unit.sn_chain import new_sn_chain

AUTHORITY = key_from_label("pulse authority")
PARENT_TIME = 1_800_000_000
HEIGHT = 100
"""The parent's height in hand-made states."""


def sn_key(i: int) -> SigningKey:
    return key_from_label(f"pulse sn {i}")


def node(i: int, *, active_since: int = 1) -> ServiceNode:
    """An active, solo-staked node registered at height i + 1 and never paid."""
    key = sn_key(i).public
    requirement = 200_000 * COIN
    return ServiceNode(
        pubkey=key, fee_ppm=0, registration_height=i + 1, staking_requirement=requirement,
        contributors=(Contribution(key, requirement, requirement),), funded_height=i + 1,
        active=True, active_since=active_since, decommission_count=0,
        last_reward_height=i + 1, last_state_change_height=active_since,
        last_state_change_reason=0, last_decommission_reason=0,
    )


def state_with(count: int, *, active_since: int = 1) -> ChainState:
    """A parent at HEIGHT whose registry holds `count` active nodes."""
    nodes = {sn.pubkey: sn for sn in (node(i, active_since=active_since) for i in range(count))}
    return ChainState(
        height=HEIGHT, tip_hash=hash32(b"pulse parent"), timestamp=PARENT_TIME, issued=0,
        service_nodes=immutables.Map(nodes),
    )


def consensus(params: NetworkParams) -> Consensus:
    return Consensus(params=params, authorities=(AUTHORITY.public,), genesis_hash=ZERO_HASH)


def header(state: ChainState, producer: bytes, *, round: int = 0, timestamp: int) -> BlockHeader:
    return BlockHeader(
        height=state.height + 1, prev_hash=state.tip_hash,
        timestamp=timestamp, tx_root=ZERO_HASH, producer=producer, round=round,
    )


# --- parameters -------------------------------------------------------------------------------

@pytest.mark.parametrize("params, sn_blocks, round_time, backstop", [
    (MAINNET, True, 60, 255), (TESTNET, True, 60, 255), (DEVNET, True, 2, 10),
    (REGTEST, False, 2, 10),
])
def test_each_network_has_its_block_production_parameters(params, sn_blocks, round_time, backstop):
    assert params.sn_blocks is sn_blocks
    assert params.round_time == round_time
    assert params.backstop_rounds == backstop
    assert (params.checkpoint_interval, params.checkpoint_quorum_size) == (4, 20)
    assert (params.participation_window, params.participation_max_misses) == (8, 4)


def test_mainnet_draws_eleven_validators_and_needs_seven_signatures():
    for params in (MAINNET, TESTNET):
        assert [params.validator_count(a) for a in (12, 13, 500)] == [11, 11, 11]
        assert params.signatures_needed(11) == 7


@pytest.mark.parametrize("active, validators, needed", [
    (1, 0, 0), (2, 1, 1), (4, 3, 2), (5, 4, 3), (6, 5, 4), (12, 11, 7), (40, 11, 7),
])
def test_devnet_draws_up_to_eleven_validators_and_needs_mainnets_share(active, validators, needed):
    for params in (DEVNET, REGTEST):
        assert params.validator_count(active) == validators
        assert params.signatures_needed(validators) == needed


def test_the_validators_drawn_are_as_many_as_validator_count_says():
    for active in (4, 5, 12, 15):
        state = state_with(active)
        quorum = round_quorum(state, 0, DEVNET)
        assert len(quorum.validators) == DEVNET.validator_count(active)


def test_a_round_quorum_is_drawn_once_per_state_and_round():
    state = state_with(12)
    first = round_quorum(state, 1, DEVNET)
    assert round_quorum(state, 1, DEVNET) is first  # kept: drawn once
    assert round_quorum(state, 2, DEVNET) != first
    # A state with the same tip hash and other nodes (only a test builds one) is drawn afresh.
    other = state_with(5)
    assert other.tip_hash == state.tip_hash
    assert len(round_quorum(other, 1, DEVNET).validators) == DEVNET.validator_count(5)
    assert round_quorum(state, 1, DEVNET) == first


@pytest.mark.parametrize("params, active, size, needed", [
    (MAINNET, 12, 0, 0), (MAINNET, 19, 0, 0), (MAINNET, 20, 20, 14), (MAINNET, 300, 20, 14),
    (DEVNET, 4, 4, 3), (DEVNET, 5, 5, 4), (DEVNET, 12, 12, 8), (DEVNET, 25, 20, 14),
])
def test_checkpoint_quorum_size_and_votes_needed(params, active, size, needed):
    assert params.checkpoint_quorum(active) == size
    assert params.checkpoint_votes_needed(size) == needed


# --- mode -------------------------------------------------------------------------------------

def test_service_nodes_produce_once_the_minimum_is_active_and_one_is_payable():
    assert production_mode(state_with(3), DEVNET) is Mode.AUTHORITY
    assert authority_reason(state_with(3), DEVNET) == "3 service nodes are active, 4 are needed"
    assert production_mode(state_with(4), DEVNET) is Mode.SERVICE_NODES
    assert authority_reason(state_with(4), DEVNET) is None
    assert production_mode(state_with(11), MAINNET) is Mode.AUTHORITY
    assert production_mode(state_with(12), MAINNET) is Mode.SERVICE_NODES


def test_the_authority_produces_while_no_active_node_is_payable():
    # Activated at the parent's height: payable only after the grace period.
    fresh = state_with(6, active_since=HEIGHT)
    assert production_mode(fresh, DEVNET) is Mode.AUTHORITY
    assert authority_reason(fresh, DEVNET) == "no active service node is payable yet"


def test_regtest_blocks_are_always_the_authoritys():
    assert production_mode(state_with(30), REGTEST) is Mode.AUTHORITY
    assert authority_reason(state_with(30), REGTEST) == "service nodes never produce blocks on regtest"


SN_LABELS = [f"pulse real sn {i}" for i in range(4)]


@pytest.fixture(scope="module")
def handed_over() -> LabChain:
    """A real devnet chain whose four nodes have just taken over production (the fourth
    activated last, so it is not payable yet)."""
    return new_sn_chain(SN_LABELS, ("operator", "alice", "bob", "carol"))


def test_a_real_chain_hands_production_to_the_service_nodes_at_the_minimum(handed_over):
    state = handed_over.state
    nodes = [key_from_label(label).public for label in SN_LABELS]
    assert production_mode(state, DEVNET) is Mode.SERVICE_NODES
    assert production_mode(state, REGTEST) is Mode.AUTHORITY
    quorum = round_quorum(state, 0, DEVNET)
    assert quorum.leader in nodes[:3]  # the fourth is not payable yet
    assert sorted((quorum.leader, *quorum.validators)) == sorted(nodes)
    assert quorum.needed == 2


def test_a_round_played_by_machines_on_a_real_chain_makes_a_block_the_rules_accept(handed_over):
    state = handed_over.state
    keys = {k.public: k for k in map(key_from_label, SN_LABELS)}
    machines = {key: RoundMachine.for_state(state, key, DEVNET) for key in keys}
    start = machines[next(iter(keys))].wake_at
    leader = round_quorum(state, 0, DEVNET).leader
    [build] = machines[leader].tick(start)
    assert isinstance(build, BuildTemplate)
    block, _ = build_block(state, Mempool(), handed_over.consensus, keys[leader], timestamp=build.timestamp)
    [send] = machines[leader].on_built(block, start)
    assert isinstance(send, SendTemplate)
    broadcasts = []
    for validator in send.validators:
        [check] = machines[validator].on_template(send.template, start)
        assert isinstance(check, CheckTemplate)
        [sign] = machines[validator].on_checked(check.block_hash, True, start)
        assert isinstance(sign, SignTemplate)
        message = keys[validator].sign(validator_message(DEVNET.network_id, sign.block_hash))
        broadcasts += machines[leader].on_signature(
            ValidatorSignature(sign.height, sign.round, sign.block_hash, validator, message), start
        )
    [made] = broadcasts
    assert isinstance(made, Broadcast)
    quorum = check_block_producer(state, made.block.header, handed_over.consensus)
    assert quorum is not None
    checks = validator_checks(DEVNET.network_id, state.height + 1, made.block_hash, quorum,
                              made.validator_bitset, made.validator_signatures)
    # All three validators answered at once: all are in the block (at least the two needed).
    assert len(checks) == len(quorum.validators) >= quorum.needed and verify_serially(checks) == -1


# --- rounds -----------------------------------------------------------------------------------

def test_round_zero_starts_a_block_time_after_the_parent_and_rounds_follow_each_other():
    assert round_window(1000, 0, DEVNET) == (1002, 1004)
    assert round_window(1000, 3, DEVNET) == (1008, 1010)
    assert round_window(1000, 0, MAINNET) == (1120, 1180)
    assert round_window(1000, 2, MAINNET) == (1240, 1300)


@pytest.mark.parametrize("now, expected", [
    (900, 0), (1001.9, 0), (1002, 0), (1003.99, 0), (1004, 1), (1009.5, 3), (1010, 4),
])
def test_the_round_at_a_time_is_the_one_whose_window_holds_it(now, expected):
    assert round_at(now, 1000, DEVNET) == expected
    if now >= 1002:
        start, end = round_window(1000, expected, DEVNET)
        assert start <= now < end


def test_the_backstop_opens_after_backstop_rounds_full_rounds():
    assert backstop_time(1000, DEVNET) == 1002 + 10 * 2
    assert backstop_time(1000, MAINNET) == 1120 + 255 * 60


def test_each_round_has_the_queue_leader_at_its_position_and_validators_drawn_without_it():
    state = state_with(12)
    index = registry_index(state)
    leaders = []
    for r in range(14):
        quorum = round_quorum(state, r, DEVNET)
        assert quorum.leader == block_leader_from_queue(
            index.reward_queue, state.service_nodes, HEIGHT + 1, r, DEVNET
        )
        assert quorum.validators == block_validators_from_active(
            index.active_keys, state.tip_hash, r, quorum.leader, DEVNET
        )
        assert quorum.leader not in quorum.validators
        assert len(set(quorum.validators)) == 11 and quorum.needed == 7
        leaders.append(quorum.leader)
    # Never paid, so the queue is by registration height: node 0 first, wrapping after 12.
    assert leaders[:12] == [sn_key(i).public for i in range(12)]
    assert leaders[12:] == leaders[:2]
    assert round_quorum(state, 12, DEVNET).validators != round_quorum(state, 0, DEVNET).validators


def test_round_quorum_refuses_what_no_round_can_be():
    state = state_with(4)
    for round in (-1, MAX_ROUND):
        with pytest.raises(InvalidBlock, match=f"claims round {round}; rounds are 0 to"):
            round_quorum(state, round, DEVNET)
    with pytest.raises(InvalidBlock, match="no payable service node can lead round 0 of block 101"):
        round_quorum(state_with(4, active_since=HEIGHT), 0, DEVNET)


def test_a_round_machine_for_a_state_uses_that_states_quorums():
    state = state_with(5)
    leader = round_quorum(state, 1, DEVNET).leader
    machine = RoundMachine.for_state(state, leader, DEVNET)
    assert (machine.height, machine.parent.block_hash) == (HEIGHT + 1, state.tip_hash)
    start, _ = round_window(PARENT_TIME, 1, DEVNET)
    [build] = machine.tick(start)
    assert isinstance(build, BuildTemplate) and build.round == 1  # round 1: this node leads, builds


# --- the producer -----------------------------------------------------------------------------

def test_a_leaders_block_inside_its_rounds_window_is_accepted_with_its_quorum():
    state = state_with(6)
    for r in (0, 1, 4):
        quorum = round_quorum(state, r, DEVNET)
        start, end = round_window(PARENT_TIME, r, DEVNET)
        for timestamp in (start, end - 1):
            made = header(state, quorum.leader, round=r, timestamp=timestamp)
            assert check_block_producer(state, made, consensus(DEVNET)) == quorum


def test_a_block_outside_its_rounds_window_is_refused():
    state = state_with(6)
    quorum = round_quorum(state, 1, DEVNET)
    start, end = round_window(PARENT_TIME, 1, DEVNET)
    for timestamp in (start - 1, end):
        made = header(state, quorum.leader, round=1, timestamp=timestamp)
        with pytest.raises(InvalidBlock, match=rf"block 101 of round 1 has timestamp {timestamp}, "
                           rf"outside its round's window \[{start}, {end}\)"):
            check_block_producer(state, made, consensus(DEVNET))


def test_a_block_from_another_node_than_the_rounds_leader_is_refused():
    state = state_with(6)
    round1 = round_quorum(state, 1, DEVNET).leader
    start, _ = round_window(PARENT_TIME, 0, DEVNET)
    made = header(state, round1, round=0, timestamp=start)
    with pytest.raises(InvalidBlock, match=f"producer {round1.hex()[:16]} is not the leader of round 0"):
        check_block_producer(state, made, consensus(DEVNET))
    outsider = key_from_label("pulse outsider").public
    with pytest.raises(InvalidBlock, match="is not the leader of round 0"):
        check_block_producer(state, header(state, outsider, timestamp=start), consensus(DEVNET))


def test_a_service_node_block_is_refused_while_the_authority_produces():
    state = state_with(3)
    start, _ = round_window(PARENT_TIME, 0, DEVNET)
    made = header(state, sn_key(0).public, timestamp=start)
    with pytest.raises(InvalidBlock, match="not from the authority, which produces this height: "
                       "3 service nodes are active, 4 are needed"):
        check_block_producer(state, made, consensus(DEVNET))
    with pytest.raises(InvalidBlock, match="never produce blocks on regtest"):
        check_block_producer(state_with(8), made, consensus(REGTEST))


def test_the_authority_produces_any_time_in_authority_mode():
    state = state_with(3)
    assert check_block_producer(
        state, header(state, AUTHORITY.public, timestamp=PARENT_TIME), consensus(DEVNET)
    ) is None


def test_in_service_node_mode_the_authority_waits_for_the_backstop():
    state = state_with(6)
    backstop = backstop_time(PARENT_TIME, DEVNET)
    early = header(state, AUTHORITY.public, timestamp=backstop - 1)
    with pytest.raises(InvalidBlock, match=f"authority block 101 at {backstop - 1} comes before "
                       f"the backstop at {backstop}: service nodes produce this height until 10 "
                       "rounds have passed"):
        check_block_producer(state, early, consensus(DEVNET))
    on_time = header(state, AUTHORITY.public, timestamp=backstop)
    assert check_block_producer(state, on_time, consensus(DEVNET)) is None


def test_service_nodes_may_still_produce_after_the_backstop():
    state = state_with(6)
    late_round = DEVNET.backstop_rounds + 3
    quorum = round_quorum(state, late_round, DEVNET)
    start, _ = round_window(PARENT_TIME, late_round, DEVNET)
    made = header(state, quorum.leader, round=late_round, timestamp=start)
    assert check_block_producer(state, made, consensus(DEVNET)) == quorum


def test_an_authority_block_claims_round_zero():
    state = state_with(3)
    made = header(state, AUTHORITY.public, round=2, timestamp=PARENT_TIME + 10)
    with pytest.raises(InvalidBlock, match="authority block 101 claims round 2, not 0"):
        check_block_producer(state, made, consensus(DEVNET))


# --- validator signatures ---------------------------------------------------------------------

KEYS = [key_from_label(f"pulse validator {i}") for i in range(5)]
QUORUM = RoundQuorum(leader=key_from_label("pulse leader").public,
                     validators=tuple(k.public for k in KEYS), needed=4)
BLOCK_HASH = hash32(b"a block")


def signatures_of(indexes: list[int], block_hash: bytes = BLOCK_HASH) -> dict[bytes, bytes]:
    message = validator_message(DEVNET.network_id, block_hash)
    return {KEYS[i].public: KEYS[i].sign(message) for i in indexes}


def test_signer_sets_name_signers_by_bit_in_validator_order():
    bitset, signatures = signer_set(QUORUM.validators, signatures_of([4, 0, 2]))
    assert bitset == 0b10101
    assert signer_indexes(bitset) == [0, 2, 4]
    assert signatures == tuple(signatures_of([0, 2, 4]).values())


def test_enough_good_signatures_give_checks_that_all_verify():
    for signed in ([0, 1, 2, 3], [1, 2, 3, 4], [0, 1, 2, 3, 4]):
        bitset, signatures = signer_set(QUORUM.validators, signatures_of(signed))
        checks = validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, bitset, signatures)
        assert [c.public for c in checks] == [KEYS[i].public for i in signed]
        assert verify_serially(checks) == -1


def test_a_forged_signature_is_caught_by_the_verifier_with_the_validator_named():
    signatures = signatures_of([0, 1, 2, 3])
    signatures[KEYS[2].public] = KEYS[4].sign(validator_message(DEVNET.network_id, BLOCK_HASH))
    bitset, ordered = signer_set(QUORUM.validators, signatures)
    checks = validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, bitset, ordered)
    bad = verify_serially(checks)
    assert checks[bad].what == f"block 7 validator {KEYS[2].public.hex()[:16]}"


def test_a_signature_over_another_message_does_not_verify():
    producer_signed = {k.public: k.sign(producer_message(DEVNET.network_id, BLOCK_HASH)) for k in KEYS}
    bitset, ordered = signer_set(QUORUM.validators, producer_signed)
    checks = validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, bitset, ordered)
    assert verify_serially(checks) == 0
    other_network = validator_checks(MAINNET.network_id, 7, BLOCK_HASH, QUORUM, *signer_set(
        QUORUM.validators, signatures_of([0, 1, 2, 3])))
    assert verify_serially(other_network) == 0


def test_a_bit_beyond_the_validators_is_an_outsider():
    _, ordered = signer_set(QUORUM.validators, signatures_of([0, 1, 2, 3]))
    with pytest.raises(InvalidBlock, match="block 7 names signer 5, but its quorum has 5 members: "
                       "a signature from outside the quorum"):
        validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, 0b101111, (*ordered, ordered[0]))


def test_a_signature_count_that_does_not_match_the_bitset_is_refused():
    bitset, ordered = signer_set(QUORUM.validators, signatures_of([0, 1, 2, 3]))
    with pytest.raises(InvalidBlock, match="block 7 names 4 signers in its bitset but carries 5"):
        validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, bitset, (*ordered, ordered[0]))
    with pytest.raises(InvalidBlock, match="block 7 names 4 signers in its bitset but carries 3"):
        validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, bitset, ordered[:3])


def test_fewer_signers_than_needed_are_refused():
    bitset, ordered = signer_set(QUORUM.validators, signatures_of([0, 2, 4]))
    with pytest.raises(InvalidBlock, match="block 7 has 3 signatures; 4 are needed"):
        validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, bitset, ordered)


def test_a_negative_bitset_is_refused():
    with pytest.raises(InvalidBlock, match="block 7 has a negative signer bitset"):
        validator_checks(DEVNET.network_id, 7, BLOCK_HASH, QUORUM, -1, ())
