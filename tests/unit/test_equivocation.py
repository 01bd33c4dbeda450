"""Equivocation proofs and their judgement (issue #33 item 8): a proof verifies only when one key
signed two different messages for one slot; the obligations quorum deregisters the offender
with `Reason.EQUIVOCATION` from fork v2 only, its state change carrying the proof; and a
validator whose signature a leader left out keeps its duty where a node witnessed it."""

from __future__ import annotations

import msgspec
import pytest

from snode.core.blocks import Block, BlockHeader, block_hash, producer_message
from snode.core.equivocation import (
    BlockTwice, EquivocationEvidence, InvalidEquivocation, block_proof, decode_proof, encode_proof, offender,
    proof_checks, verified, vote_proof,
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
from snode.net.quorum_guard import BUDGETS, message_tag
from snode.node.participation import WITNESSED_PER_VALIDATOR, ParticipationBook
from snode.params import DEVNET, REGTEST, schedule_test_forks
from tests.unit.conftest import FUNDS, PEOPLE, LabChain, sn_record
from tests.unit.sn_chain import KEYS, new_sn_chain, sn_block

NET = REGTEST.network_id
LEADER = key_from_label("equivocating leader")
OTHER = key_from_label("another node")


def header(*, height: int = 10, round: int = 0, timestamp: int = 1_000, producer: bytes = LEADER.public,
           prev: bytes = b"\x01" * 32) -> BlockHeader:
    return BlockHeader(2, height, prev, timestamp, b"\x00" * 32, producer, round)


def signed(h: BlockHeader, key=LEADER) -> tuple[BlockHeader, bytes]:
    return h, key.sign(producer_message(NET, block_hash(h)))


def two_blocks(**second: object) -> BlockTwice:
    a = signed(header())
    b = signed(header(timestamp=1_001, **second))  # type: ignore[arg-type]
    return block_proof(*a, *b)


def vote(block: bytes, *, height: int = 8, key=LEADER) -> CheckpointVote:
    return CheckpointVote(height, block, key.public, key.sign(checkpoint_message(NET, height, block)))


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
