"""Equivocation proofs and their judgement (issue #33 item 8): a proof verifies only when one key
signed two different messages for one slot; the obligations quorum deregisters the offender
with `Reason.EQUIVOCATION` from fork v2 only, its state change carrying the proof; and a
validator whose signature a leader left out keeps its duty where a node witnessed it."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from snode.core.blocks import Block, BlockHeader, Checkpoint, block_hash, make_header, producer_message
from snode.core.equivocation import (
    MAX_PROOF_BYTES,
    BlockTwice,
    EquivocationEvidence,
    InvalidEquivocation,
    block_proof,
    decode_proof,
    encode_proof,
    offender,
    proof_checks,
    verified,
    vote_proof,
)
from snode.core.errors import InvalidStateChange, InvalidTransaction
from snode.core.finality import CheckpointVote, checkpoint_message
from snode.core.obligations import judge
from snode.core.participation import miss_count
from snode.core.pulse import RoundQuorum, round_quorum, validator_message
from snode.core.round_messages import ValidatorSignature
from snode.core.service_nodes import Reason, StateChangeKind, apply_state_change
from snode.core.stake_exit import returned_outputs
from snode.core.transactions import TX_VERSION, ProvenStateChange, StateChange, Transaction, Vote, state_change_hash
from snode.devchain import key_from_label
from snode.net import protocol as P
from snode.net.events import QuorumMessageReceived
from snode.net.quorum_guard import BUDGETS, SCORE_FORGED, message_tag
from snode.node.node import Node
from snode.node.own_proof import Identity
from snode.node.participation import WITNESSED_PER_VALIDATOR, ParticipationBook
from snode.params import DEVNET, REGTEST, schedule_test_forks
from snode.services.checkpoints import CheckpointDuties
from snode.services.equivocation import RESEND_BLOCKS, EquivocationWatch
from snode.services.producer import MAX_WITNESSES, BlockProducer, witnesses
from tests.unit.conftest import FUNDS, PEOPLE, LabChain, node_on, sn_record
from tests.unit.sn_chain import KEYS, advance, new_sn_chain, sn_block

NET = REGTEST.network_id
LEADER = key_from_label("equivocating leader")
OTHER = key_from_label("another node")

log = logging.getLogger(__name__)


def header(*, height: int = 10, round: int = 0, timestamp: int = 1_000, producer: bytes = LEADER.public,
           prev: bytes = b"\x01" * 32) -> BlockHeader:
    return make_header(2, height=height, prev_hash=prev, timestamp=timestamp, tx_root=b"\x00" * 32,
                       producer=producer, round=round, state_root=b"\x00" * 32)


def signed(h: BlockHeader, key=LEADER) -> tuple[BlockHeader, bytes]:
    return h, key.sign(producer_message(NET, block_hash(h)))


def two_blocks(**second: object) -> BlockTwice:
    a = signed(header())
    b = signed(header(timestamp=1_001, **second))  # type: ignore[arg-type]
    return block_proof(*a, *b)


def vote(block: bytes, *, height: int = 8, key=LEADER, network: int = NET) -> CheckpointVote:
    return CheckpointVote(height, block, key.public, key.sign(checkpoint_message(network, height, block)))


# --- the proof -----------------------------------------------------------------------------------

def test_two_signed_blocks_for_one_round_and_two_votes_for_one_height_are_proofs() -> None:
    assert verified(two_blocks(), NET) is None
    assert verified(vote_proof(vote(b"\x02" * 32), vote(b"\x03" * 32)), NET) is None
    assert offender(two_blocks()) == LEADER.public
    assert len(proof_checks(two_blocks(), NET)) == 2


def test_a_proof_is_canonical_and_round_trips_through_its_bytes() -> None:
    a, b = signed(header()), signed(header(timestamp=1_001))
    assert block_proof(*a, *b) == block_proof(*b, *a)
    proof = vote_proof(vote(b"\x03" * 32), vote(b"\x02" * 32))
    assert proof.first.block_hash == b"\x02" * 32
    assert decode_proof(encode_proof(proof)) == proof
    with pytest.raises(InvalidEquivocation, match="not an equivocation proof"):
        decode_proof(b"\x91\xc0")


def test_a_forged_signature_proves_nothing() -> None:
    a = signed(header())
    b = (header(timestamp=1_001), OTHER.sign(producer_message(NET, block_hash(header(timestamp=1_001)))))
    assert "bad signature" in (verified(block_proof(*a, *b), NET) or "")
    forged = msgspec.structs.replace(vote(b"\x03" * 32), signature=bytes(64))
    assert "bad signature" in (verified(vote_proof(vote(b"\x02" * 32), forged), NET) or "")
    assert "bad signature" in (verified(two_blocks(), NET + 1) or "")  # signed for another network


def test_the_same_content_twice_proves_nothing() -> None:
    a = signed(header())
    assert verified(BlockTwice(*a, *a), NET) == "the two blocks are the same block"
    v = vote(b"\x02" * 32)
    assert verified(vote_proof(v, v), NET) == "the two checkpoint votes are for the same block"


def test_two_signers_prove_nothing() -> None:
    a, b = signed(header()), signed(header(timestamp=1_001, producer=OTHER.public), OTHER)
    assert verified(block_proof(*a, *b), NET) == "the two blocks are by different producers"
    assert verified(vote_proof(vote(b"\x02" * 32), vote(b"\x03" * 32, key=OTHER)), NET) == (
        "the two checkpoint votes are by different members")


@pytest.mark.parametrize("slot", [{"round": 1}, {"height": 11}, {"prev": b"\x09" * 32}])
def test_two_slots_prove_nothing(slot: dict) -> None:
    assert "different slots" in (verified(two_blocks(**slot), NET) or "")


def test_two_heights_of_votes_prove_nothing() -> None:
    proof = vote_proof(vote(b"\x02" * 32), vote(b"\x03" * 32, height=12))
    assert verified(proof, NET) == "the two checkpoint votes are for heights 8 and 12"


def test_the_evidence_is_quorumnet_tag_5_with_a_budget() -> None:
    data = msgspec.msgpack.encode(EquivocationEvidence(two_blocks()))
    assert message_tag(data[:2]) == 5 and 5 in BUDGETS
    assert P.strict_decoder(P.QuorumMessage)(data) == EquivocationEvidence(two_blocks())


# --- the judgement -------------------------------------------------------------------------------

def test_a_proven_equivocation_is_a_deregistration_whatever_the_credit_or_the_members_uptime() -> None:
    sn = sn_record(active=True)
    verdict = judge(sn, last_proof=100, now=100, params=REGTEST, may_decommission=False, equivocated=True)
    assert verdict == (StateChangeKind.DEREGISTER, Reason.EQUIVOCATION)
    assert judge(sn, last_proof=100, now=100, params=REGTEST, may_decommission=False) is None
    assert apply_state_change(sn, StateChangeKind.DEREGISTER, Reason.EQUIVOCATION, 20, REGTEST) is None
    inactive = sn_record(active=False)
    assert judge(inactive, last_proof=0, now=100, params=REGTEST, may_decommission=True,
                 equivocated=True) == (StateChangeKind.DEREGISTER, Reason.EQUIVOCATION)
    assert Reason.EQUIVOCATION.label == "equivocation"


def _chain(fork_at: int | None) -> tuple[LabChain, bytes]:
    params = REGTEST if fork_at is None else schedule_test_forks(REGTEST, (f"v2@{fork_at}",))
    chain = LabChain.create({key_from_label(p).public: FUNDS for p in PEOPLE}, params=params)
    pubkey = chain.new_node(sn_label="equivocating leader")
    chain.change_state(pubkey, StateChangeKind.ACTIVATE)
    return chain, pubkey


def _deregistration(chain: LabChain, pubkey: bytes, proof: bytes | None, kind=StateChangeKind.DEREGISTER,
                    reason: int = Reason.EQUIVOCATION) -> Transaction:
    quorum = chain.state.quorums[chain.state.height]
    message = state_change_hash(chain.params.network_id, pubkey, kind, reason, quorum.height)
    votes = (Vote(chain.authority.public, chain.authority.sign(message)),)
    outputs = returned_outputs(chain.state.service_nodes[pubkey]) if kind == StateChangeKind.DEREGISTER else ()
    change = (StateChange(pubkey, kind, reason, quorum.height, votes) if proof is None
              else ProvenStateChange(pubkey, kind, reason, quorum.height, votes, proof))
    return Transaction(TX_VERSION, (), outputs, change, ())


def _proof_at(chain: LabChain, height: int, key=LEADER) -> bytes:
    h = header(height=height, producer=key.public)
    a = signed(h, key)
    b = signed(msgspec.structs.replace(h, timestamp=h.timestamp + 1), key)
    return encode_proof(block_proof(*a, *b))


def test_from_v2_a_state_change_with_the_proof_deregisters_the_node_at_once() -> None:
    chain, pubkey = _chain(1)
    chain.submit(_deregistration(chain, pubkey, _proof_at(chain, chain.state.height)))
    chain.mine()
    assert pubkey not in chain.state.service_nodes


@pytest.mark.parametrize("case, match", [
    ("no proof", "carries its proof"),
    ("another node's", "another node's equivocation"),
    ("before registration", "before the node's registration"),
    ("forged", "bad signature"),
    ("a decommission", "a deregistration for equivocation"),
    ("another reason", "a deregistration for equivocation"),
])
def test_from_v2_a_state_change_for_equivocation_without_a_good_proof_of_this_node_is_refused(case, match) -> None:
    chain, pubkey = _chain(1)
    proof = _proof_at(chain, chain.state.height)
    tx = {
        "no proof": lambda: _deregistration(chain, pubkey, None),
        "another node's": lambda: _deregistration(chain, pubkey, _proof_at(chain, chain.state.height, OTHER)),
        "before registration": lambda: _deregistration(chain, pubkey, _proof_at(chain, 1)),
        "forged": lambda: _deregistration(chain, pubkey, encode_proof(msgspec.structs.replace(
            decode_proof(proof), second_signature=bytes(64)))),
        "a decommission": lambda: _deregistration(chain, pubkey, proof, kind=StateChangeKind.DECOMMISSION),
        "another reason": lambda: _deregistration(chain, pubkey, proof, reason=Reason.MISSED_UPTIME_PROOFS),
    }[case]()
    with pytest.raises(InvalidTransaction, match=match):
        chain.submit(tx)
    assert pubkey in chain.state.service_nodes


def test_in_v1_no_state_change_has_the_reason_or_a_proof() -> None:
    chain, pubkey = _chain(None)
    proof = _proof_at(chain, chain.state.height)
    for tx in (_deregistration(chain, pubkey, proof), _deregistration(chain, pubkey, None),
               _deregistration(chain, pubkey, None, kind=StateChangeKind.DECOMMISSION)):
        with pytest.raises(InvalidStateChange, match="fork v1 has no state change for equivocation"):
            chain.submit(tx)
    assert pubkey in chain.state.service_nodes


def test_a_plain_state_change_keeps_its_v1_bytes() -> None:
    change = StateChange(b"\x01" * 32, 2, 2, 5, ())
    assert msgspec.msgpack.encode(change)[:2] == b"\x96\x04"  # six items, tag 4: as before
    assert msgspec.msgpack.encode(ProvenStateChange(b"\x01" * 32, 4, 7, 5, (), b"p"))[:2] == b"\x97\x07"


# --- framing -------------------------------------------------------------------------------------

def _framed() -> tuple[LabChain, Block, RoundQuorum, ValidatorSignature]:
    """A leader's block that leaves out its last validator, who signed it."""
    chain = new_sn_chain()
    block, quorum = sn_block(chain.state, chain, signers=len(round_quorum(chain.state, 0, DEVNET).validators) - 1)
    dropped = quorum.validators[-1]
    this_hash = block_hash(block.header)
    signature = KEYS[dropped].sign(validator_message(DEVNET.network_id, this_hash))
    return chain, block, quorum, ValidatorSignature(block.header.height, 0, this_hash, dropped, signature)


def test_a_validator_the_leader_left_out_keeps_its_duty_where_its_signature_came_first() -> None:
    chain, block, quorum, claim = _framed()
    witness, blind = ParticipationBook(DEVNET), ParticipationBook(DEVNET)
    witness.witness(claim, chain.state.height)
    witness.record_block(chain.state, block)
    blind.record_block(chain.state, block)
    assert miss_count(witness.of(claim.validator)) == 0
    assert miss_count(blind.of(claim.validator)) == 1  # no signature seen: the bitset's word
    for signer in quorum.validators[:-1]:
        assert miss_count(witness.of(signer)) == 0


@pytest.mark.parametrize("why", ["forged", "another height", "another block", "late"])
def test_a_forged_misplaced_or_late_signature_does_not_count(why: str) -> None:
    chain, block, _, claim = _framed()
    book = ParticipationBook(DEVNET)
    if why == "forged":
        claim = msgspec.structs.replace(claim, signature=bytes(64))
    elif why == "another height":
        claim = msgspec.structs.replace(claim, height=claim.height + 1)
    elif why == "another block":
        claim = msgspec.structs.replace(claim, block_hash=b"\x07" * 32)
    if why != "late":
        book.witness(claim, chain.state.height)
    book.record_block(chain.state, block)
    if why == "late":
        book.witness(claim, chain.state.height)  # after the block: the duty was settled
    assert miss_count(book.of(claim.validator)) == 1


def test_a_validator_cannot_fill_the_witness_table_beyond_its_share() -> None:
    chain, block, _, claim = _framed()
    book = ParticipationBook(DEVNET)
    for i in range(10):  # junk hashes first: only WITNESSED_PER_VALIDATOR are held
        book.witness(msgspec.structs.replace(claim, block_hash=bytes([i]) * 32), chain.state.height)
    book.witness(claim, chain.state.height)
    book.record_block(chain.state, block)
    assert miss_count(book.of(claim.validator)) == 1
    assert sum(len(v) for v in book._witnessed.values()) == WITNESSED_PER_VALIDATOR


# --- the watch and the checkpoint duties ---------------------------------------------------------

class FakeQuorumnet:
    """What the services call on quorumnet: sends and junk, recorded."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, object]] = []
        self.junked: list[tuple[bytes, int, str]] = []

    def send(self, member: bytes, message: object) -> bool:
        self.sent.append((member, message))
        return True

    def junk(self, member: bytes, points: int, reason: str) -> None:
        self.junked.append((member, points, reason))


def _watched() -> tuple[LabChain, bytes, EquivocationWatch, FakeQuorumnet, Node]:
    chain, pubkey = _chain(1)
    node = node_on(chain)
    qnet = FakeQuorumnet()
    return chain, pubkey, EquivocationWatch(node, qnet), qnet, node  # type: ignore[arg-type]


def test_a_proof_from_a_member_is_checked_kept_and_passed_on_to_the_tips_quorum_once() -> None:
    chain, pubkey, watch, qnet, node = _watched()
    proof = decode_proof(_proof_at(chain, chain.state.height))
    sender = OTHER.public
    node.hub.publish(QuorumMessageReceived(EquivocationEvidence(proof), sender))
    assert watch.proofs == {pubkey: proof} and watch.proof_of(pubkey) == encode_proof(proof)
    members = set(chain.state.quorums[chain.state.height].members) - {sender}
    assert {m for m, _ in qnet.sent} == members and qnet.junked == []
    node.hub.publish(QuorumMessageReceived(EquivocationEvidence(proof), sender))  # a copy: nothing more
    assert len(qnet.sent) == len(members)


def test_a_proof_that_proves_nothing_bans_its_sender_and_one_of_an_unknown_key_is_only_ignored() -> None:
    chain, pubkey, watch, qnet, node = _watched()
    proof = decode_proof(_proof_at(chain, chain.state.height))
    forged = msgspec.structs.replace(proof, second_signature=bytes(64))
    node.hub.publish(QuorumMessageReceived(EquivocationEvidence(forged), OTHER.public))
    assert watch.proofs == {} and [(m, p) for m, p, _ in qnet.junked] == [(OTHER.public, SCORE_FORGED)]
    stranger = decode_proof(_proof_at(chain, chain.state.height, OTHER))
    node.hub.publish(QuorumMessageReceived(EquivocationEvidence(stranger), OTHER.public))
    assert watch.proofs == {} and len(qnet.junked) == 1


def test_a_proof_too_large_for_a_state_change_bans_its_sender_and_leaves_room_for_the_real_one() -> None:
    """An insider's proof of its own equivocation, padded past what a StateChange carries, was
    kept (the first proof of an offender wins): the deregistration made from it was refused, and
    the equivocation verdict kept the node from any other, for as long as it stayed registered."""
    chain, pubkey, watch, qnet, node = _watched()
    fat = msgspec.structs.replace(header(height=chain.state.height, producer=pubkey),
                                  checkpoint=Checkpoint(1, b"\x02" * 32, 1, (b"\x03" * 64,) * 400))
    padded = block_proof(*signed(fat), *signed(msgspec.structs.replace(fat, timestamp=fat.timestamp + 1)))
    assert len(encode_proof(padded)) > MAX_PROOF_BYTES
    assert "the limit is" in (verified(padded, NET) or "")
    node.hub.publish(QuorumMessageReceived(EquivocationEvidence(padded), pubkey))
    assert watch.proofs == {} and [(m, p) for m, p, _ in qnet.junked] == [(pubkey, SCORE_FORGED)]
    real = decode_proof(_proof_at(chain, chain.state.height))
    node.hub.publish(QuorumMessageReceived(EquivocationEvidence(real), OTHER.public))
    assert watch.proofs == {pubkey: real}
    chain.submit(_deregistration(chain, pubkey, watch.proof_of(pubkey)))
    chain.mine()
    assert pubkey not in chain.state.service_nodes


def test_a_proof_this_node_made_goes_to_every_service_node_and_leaves_with_its_offender() -> None:
    chain, pubkey, watch, qnet, node = _watched()
    proof = decode_proof(_proof_at(chain, chain.state.height))
    watch.found(proof)
    watch.found(proof)
    assert [m for m, _ in qnet.sent] == list(chain.state.service_nodes)
    chain.submit(_deregistration(chain, pubkey, watch.proof_of(pubkey)))
    node.accept_blocks(chain.mine(), chain.now)
    assert watch.proofs == {}


def test_a_held_proof_goes_again_to_the_tips_quorum_every_few_blocks_until_its_offender_leaves() -> None:
    chain, pubkey, watch, qnet, node = _watched()
    watch.found(decode_proof(_proof_at(chain, chain.state.height)))
    first = len(qnet.sent)
    for _ in range(RESEND_BLOCKS - 1):
        node.accept_blocks(chain.mine(), chain.now)
    assert len(qnet.sent) == first  # not again within RESEND_BLOCKS of the first send
    node.accept_blocks(chain.mine(), chain.now)
    again = qnet.sent[first:]
    members = set(chain.state.quorums[chain.state.height].members) - {pubkey}
    assert {m for m, _ in again} == members and all(isinstance(p, EquivocationEvidence) for _, p in again)
    chain.submit(_deregistration(chain, pubkey, watch.proof_of(pubkey)))
    node.accept_blocks(chain.mine(), chain.now)
    sent = len(qnet.sent)
    for _ in range(RESEND_BLOCKS):
        node.accept_blocks(chain.mine(), chain.now)
    assert watch.proofs == {} and len(qnet.sent) == sent


def test_before_v2_a_proof_is_kept_but_not_sent_and_the_quorum_does_not_judge_it() -> None:
    chain, pubkey = _chain(None)
    node = node_on(chain)
    qnet = FakeQuorumnet()
    watch = EquivocationWatch(node, qnet)  # type: ignore[arg-type]
    watch.found(decode_proof(_proof_at(chain, chain.state.height)))
    assert pubkey in watch.proofs and qnet.sent == []


def _checkpointing() -> tuple[LabChain, Node, CheckpointDuties, EquivocationWatch, int]:
    """A devnet node whose chain waits for the checkpoint of a height."""
    chain = new_sn_chain()
    while not any(not s.carried for s in chain.state.checkpoints.values()):
        advance(chain, sn_block(chain.state, chain)[0])
    node = node_on(chain)
    qnet = FakeQuorumnet()
    watch = EquivocationWatch(node, qnet)  # type: ignore[arg-type]
    duties = CheckpointDuties(node, None, qnet, watch)  # type: ignore[arg-type]
    height = min(h for h, s in chain.state.checkpoints.items() if not s.carried)
    return chain, node, duties, watch, height


@pytest.mark.parametrize("ours_first", [True, False])
def test_two_checkpoint_votes_of_one_member_for_one_height_make_a_proof(ours_first: bool) -> None:
    chain, node, duties, watch, height = _checkpointing()
    slot = chain.state.checkpoints[height]
    member = slot.members[0]
    ours = vote(slot.block_hash, height=height, key=KEYS[member], network=DEVNET.network_id)
    other = vote(b"\x05" * 32, height=height, key=KEYS[member], network=DEVNET.network_id)
    for v in ((ours, other) if ours_first else (other, ours)):
        node.hub.publish(QuorumMessageReceived(v, member))
    assert watch.proofs == {member: vote_proof(ours, other)}


def test_a_second_checkpoint_vote_of_a_held_member_for_our_block_is_not_checked_again() -> None:
    """Its signer can make any number of good signatures of it: one of a member we hold is
    dropped unchecked (its bad signature here would be junk if it were checked)."""
    chain, node, duties, watch, height = _checkpointing()
    slot = chain.state.checkpoints[height]
    member = slot.members[0]
    ours = vote(slot.block_hash, height=height, key=KEYS[member], network=DEVNET.network_id)
    node.hub.publish(QuorumMessageReceived(ours, member))
    node.hub.publish(QuorumMessageReceived(msgspec.structs.replace(ours, signature=bytes(64)), member))
    assert duties.votes[(height, slot.block_hash)][member] == ours.signature
    qnet = duties.quorumnet
    assert isinstance(qnet, FakeQuorumnet) and qnet.junked == []


def test_a_forged_second_vote_makes_no_proof() -> None:
    chain, node, duties, watch, height = _checkpointing()
    slot = chain.state.checkpoints[height]
    member = slot.members[0]
    forged = msgspec.structs.replace(vote(b"\x05" * 32, height=height, key=KEYS[member], network=DEVNET.network_id),
                                     signature=bytes(64))
    ours = vote(slot.block_hash, height=height, key=KEYS[member], network=DEVNET.network_id)
    node.hub.publish(QuorumMessageReceived(ours, member))
    assert member in duties.votes[(height, slot.block_hash)]
    node.hub.publish(QuorumMessageReceived(forged, member))
    assert watch.proofs == {}


def test_a_daemon_votes_once_a_height_and_not_on_a_height_it_may_have_voted_on_before_it_started() -> None:
    chain, node, duties, watch, height = _checkpointing()
    assert duties.signed == {height: None}  # pending when it started: it may have voted there before
    qnet = duties.quorumnet
    member = chain.state.checkpoints[height].members[0]
    node.identity = Identity(KEYS[member], "203.0.113.9", 1, 2)
    while not any(h > height and member in s.members for h, s in chain.state.checkpoints.items()):
        block = sn_block(chain.state, chain)[0]
        advance(chain, block)
        node.accept_blocks([block], chain.now)
    votes = [m for _, m in qnet.sent if isinstance(m, CheckpointVote)]  # type: ignore[union-attr]
    assert votes and {v.height for v in votes} == {h for h in duties.signed if h != height}
    later = max(duties.signed)
    assert duties.signed[later] == chain.state.checkpoints[later].block_hash
    duties.signed[later] = b"\x06" * 32  # as if it had voted for another block there (before a reorganisation)
    del duties.votes[(later, chain.state.checkpoints[later].block_hash)]
    sent = len(qnet.sent)  # type: ignore[union-attr]
    block = sn_block(chain.state, chain)[0]
    advance(chain, block)
    node.accept_blocks([block], chain.now)
    assert not [m for _, m in qnet.sent[sent:] if isinstance(m, CheckpointVote) and m.height == later]  # type: ignore[union-attr]


def test_a_validator_that_checked_one_template_proves_the_equivocation_from_the_block_of_another() -> None:
    chain = new_sn_chain()
    block, quorum = sn_block(chain.state, chain)
    other = msgspec.structs.replace(block.header, timestamp=block.header.timestamp + 1)
    seen = msgspec.structs.replace(block, header=other, producer_signature=KEYS[quorum.leader].sign(
        producer_message(DEVNET.network_id, block_hash(other))))
    found: list[object] = []
    producer = object.__new__(BlockProducer)  # only its bookkeeping: no writer, no loop
    producer.equivocations = SimpleNamespace(found=found.append)  # type: ignore[assignment]
    producer.checked = {(block.header.height, 0): seen}
    producer._check_adopted([block])
    assert found == [block_proof(other, seen.producer_signature, block.header, block.producer_signature)]
    assert verified(found[0], DEVNET.network_id) is None  # type: ignore[arg-type]
    producer.checked = {(block.header.height, 0): block}
    producer._check_adopted([block])  # the block it checked: nothing
    assert len(found) == 1


def test_a_validator_sends_its_signature_to_a_bounded_set_of_witnesses_the_next_judges_first():
    def state(n: int) -> Any:
        nodes = {bytes([i // 256, i % 256]) * 16: SimpleNamespace(active=i % 7 != 3) for i in range(n)}
        judges = tuple(list(nodes)[-10:])
        return SimpleNamespace(service_nodes=nodes, height=5, quorums={5: SimpleNamespace(members=judges)})

    small, big = state(40), state(2_000)
    validator, leader = list(small.service_nodes)[0], list(small.service_nodes)[1]
    signed = ValidatorSignature(6, 0, b"\x07" * 32, validator, b"\x00" * 64)
    log.info("a devnet's 40 nodes: every other active one")
    assert sorted(witnesses(small, signed, leader)) == sorted(
        pk for pk, sn in small.service_nodes.items() if sn.active and pk not in (validator, leader))
    log.info("mainnet's size: %d, the tip's obligations quorum among them", MAX_WITNESSES)
    chosen = witnesses(big, signed, list(big.service_nodes)[1])
    assert len(chosen) == MAX_WITNESSES == len(set(chosen))
    active_judges = [pk for pk in big.quorums[5].members if big.service_nodes[pk].active]
    assert chosen[:len(active_judges)] == active_judges
    assert all(big.service_nodes[pk].active for pk in chosen)
