"""The round state machine (`core.rounds`, issue #12) driven with a fake clock and message lists,
no sockets.

`Net` gives every member of a small network its own machine and plays the shell for all of them:
it builds real signed templates when a leader is told to, delivers templates and signatures
between machines, answers template checks, and records what each machine reports. Nodes can be
down (their machines get nothing), and a test can hold messages back to deliver them late.
Single machines are also driven by hand for the cases a network of honest nodes cannot show (an
equivocating leader, forged or misdirected messages), and hypothesis throws arbitrary messages
at a leader in arbitrary order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snode.core.blocks import Block, block_hash, make_block
from snode.core.crypto import SigningKey, hash32
from snode.core.encoding import decode, encode
from snode.core.finality import CheckpointVote
from snode.core.pulse import RoundQuorum, signer_indexes, validator_checks, validator_message
from snode.core.rounds import (
    SIGNATURE_GRACE,
    Action,
    BlockTemplate,
    Broadcast,
    BuildTemplate,
    CheckTemplate,
    Equivocation,
    Parent,
    RoundFailed,
    RoundMachine,
    SendTemplate,
    SignTemplate,
    ValidatorSignature,
)
from snode.core.transactions import TX_VERSION, Coinbase, Transaction, TxOut
from snode.core.transition import verify_serially
from snode.devchain import key_from_label
from snode.net.protocol import QuorumVote
from snode.params import DEVNET

PARENT = Parent(height=50, block_hash=hash32(b"rounds parent"), timestamp=1000)
HEIGHT = PARENT.height + 1
POOL = [key_from_label(f"rounds sn {i}") for i in range(9)]
KEY_OF = {k.public: k for k in POOL}
OUTSIDER = key_from_label("rounds outsider")
VALIDATORS_PER_ROUND = 6
GRACE = DEVNET.round_time * SIGNATURE_GRACE
NEEDED = DEVNET.signatures_needed(VALIDATORS_PER_ROUND)
"""4 of 6."""
ROUND0 = 1002
"""Round 0 starts a block time (2 s) after the parent; each round lasts 2 s."""
OTHER_HASH = hash32(b"some other block")
A = TypeVar("A")


def quorum_of(round: int) -> RoundQuorum:
    """Round r: POOL[r % 9] leads, the next six in the pool validate."""
    leader = round % len(POOL)
    validators = tuple(POOL[(leader + 1 + i) % len(POOL)].public for i in range(VALIDATORS_PER_ROUND))
    return RoundQuorum(POOL[leader].public, validators, NEEDED)


def machine(key: SigningKey) -> RoundMachine:
    return RoundMachine(parent=PARENT, quorum_of=quorum_of, me=key.public, params=DEVNET)


def template_block(
    key: SigningKey, round: int = 0, *, timestamp: int | None = None, height: int = HEIGHT,
    prev_hash: bytes = PARENT.block_hash, salt: int = 0,
) -> Block:
    """A block signed by `key` as a template of `round`; a salt above 0 makes another block
    (its coinbase pays `salt` to the producer)."""
    coinbase = Transaction(TX_VERSION, (), (TxOut(key.public, salt),), Coinbase(height), ())
    return make_block(version=1,
        height=height, prev_hash=prev_hash,
        timestamp=ROUND0 + 2 * round if timestamp is None else timestamp,
        transactions=(coinbase,) if salt else (), producer_key=key,
        network_id=DEVNET.network_id, round=round,
    )


def template(
    key: SigningKey, *, timestamp: int | None = None, prev_hash: bytes = PARENT.block_hash,
    salt: int = 0,
) -> BlockTemplate:
    """A round-0 template message of a block signed by `key`."""
    block = template_block(key, timestamp=timestamp, prev_hash=prev_hash, salt=salt)
    return BlockTemplate(HEIGHT, 0, encode(block))


def signature(
    key: SigningKey, block_hash: bytes, round: int = 0, *, height: int = HEIGHT,
    signer: SigningKey | None = None,
) -> ValidatorSignature:
    """`key`'s ValidatorSignature of block_hash (signed by `signer`, to forge one)."""
    signed = (signer or key).sign(validator_message(DEVNET.network_id, block_hash))
    return ValidatorSignature(height, round, block_hash, key.public, signed)


def of_type(actions: list[Action], kind: type[A]) -> list[A]:
    return [a for a in actions if isinstance(a, kind)]


class Net:
    """Every pool member's machine, and the shell of all of them."""

    def __init__(self, *, down: frozenset[bytes] = frozenset(),
                 valid: Callable[[Block], bool] = lambda block: True) -> None:
        self.machines = {k.public: machine(k) for k in POOL if k.public not in down}
        self.valid = valid
        self.reports: dict[bytes, list[Action]] = defaultdict(list)
        """Everything each machine returned, in order."""
        self.held: dict[bytes, list[ValidatorSignature]] = defaultdict(list)
        self.hold_from: set[bytes] = set()
        """Validators whose signatures are held back (delivered by `release`)."""

    def at(self, now: float) -> None:
        """Tick every machine at `now` and play out what follows, all at `now`."""
        for key, m in self.machines.items():
            self._play(key, m.tick(now), now)

    def release(self, validator: bytes, now: float) -> None:
        """Deliver the signatures held back from `validator`, at `now`."""
        for message in self.held.pop(validator, []):
            self._deliver_signature(message, now)

    def broadcasts(self) -> list[tuple[bytes, Broadcast]]:
        return [(key, a) for key, actions in self.reports.items() for a in of_type(actions, Broadcast)]

    def _play(self, key: bytes, actions: list[Action], now: float) -> None:
        self.reports[key] += actions
        for action in actions:
            self._do(key, action, now)

    def _do(self, key: bytes, action: Action, now: float) -> None:
        m = self.machines[key]
        if isinstance(action, BuildTemplate):
            block = template_block(KEY_OF[key], action.round, timestamp=action.timestamp)
            self._play(key, m.on_built(block, now), now)
        elif isinstance(action, SendTemplate):
            for validator in action.validators:
                if validator in self.machines:
                    self._play(validator, self.machines[validator].on_template(action.template, now), now)
        elif isinstance(action, CheckTemplate):
            self._play(key, m.on_checked(action.block_hash, self.valid(action.block), now), now)
        elif isinstance(action, SignTemplate):
            message = signature(KEY_OF[key], action.block_hash, action.round)
            if key in self.hold_from:
                self.held[key].append(message)
            else:
                self._deliver_signature(message, now)

    def _deliver_signature(self, message: ValidatorSignature, now: float) -> None:
        leader = quorum_of(message.round).leader
        if leader in self.machines:
            self._play(leader, self.machines[leader].on_signature(message, now), now)


def assert_well_signed(broadcast: Broadcast, quorum: RoundQuorum) -> None:
    """The block carries at least `needed` good signatures, all from the round's validators."""
    checks = validator_checks(
        DEVNET.network_id, HEIGHT, broadcast.block_hash, quorum, broadcast.validator_bitset,
        broadcast.validator_signatures,
    )
    assert len(checks) >= quorum.needed
    assert verify_serially(checks) == -1
    assert broadcast.block_hash == block_hash(broadcast.block.header)


# --- a network of machines --------------------------------------------------------------------

def test_a_happy_round_the_leader_broadcasts_as_soon_as_every_validator_signed():
    net = Net()
    net.at(ROUND0 - 0.5)
    assert not any(net.reports.values())  # round 0 has not started
    net.at(ROUND0)
    [(sender, broadcast)] = net.broadcasts()
    quorum = quorum_of(0)
    assert sender == quorum.leader
    header = broadcast.block.header
    assert (header.height, header.round, header.timestamp, header.producer) == (HEIGHT, 0, ROUND0, quorum.leader)
    assert_well_signed(broadcast, quorum)
    # Every validator answered at once: no grace is waited for, every one is in the block.
    assert signer_indexes(broadcast.validator_bitset) == list(range(VALIDATORS_PER_ROUND))
    signed = [k for k, actions in net.reports.items() if of_type(actions, SignTemplate)]
    assert sorted(signed) == sorted(quorum.validators)
    assert not any(of_type(actions, RoundFailed) for actions in net.reports.values())


def test_a_silent_leader_fails_round_zero_and_round_ones_leader_makes_the_block():
    silent = quorum_of(0).leader
    net = Net(down=frozenset({silent}))
    net.at(ROUND0)
    net.at(ROUND0 + 1.9)
    assert net.broadcasts() == []
    net.at(ROUND0 + 2)
    for key, actions in net.reports.items():
        assert of_type(actions, RoundFailed) == [RoundFailed(HEIGHT, 0, silent)], key.hex()
    [(sender, broadcast)] = net.broadcasts()
    assert sender == quorum_of(1).leader
    assert (broadcast.block.header.round, broadcast.block.header.timestamp) == (1, ROUND0 + 2)
    assert_well_signed(broadcast, quorum_of(1))


def test_exactly_the_needed_validators_answering_make_the_block():
    quorum = quorum_of(0)
    net = Net(down=frozenset(quorum.validators[:VALIDATORS_PER_ROUND - NEEDED]))
    net.at(ROUND0)
    assert net.broadcasts() == []  # enough to make the block: a grace for the others
    net.at(ROUND0 + GRACE)
    [(_, broadcast)] = net.broadcasts()
    assert signer_indexes(broadcast.validator_bitset) == [2, 3, 4, 5]
    assert_well_signed(broadcast, quorum)


def test_one_validator_fewer_than_needed_and_the_round_fails():
    quorum = quorum_of(0)
    net = Net(down=frozenset(quorum.validators[:VALIDATORS_PER_ROUND - NEEDED + 1]))
    net.at(ROUND0)
    net.at(ROUND0 + 1.5)
    assert net.broadcasts() == []
    net.at(ROUND0 + 2)
    assert of_type(net.reports[quorum.leader], RoundFailed) == [RoundFailed(HEIGHT, 0, quorum.leader)]


def test_a_validator_that_signs_late_is_ignored():
    quorum = quorum_of(0)
    net = Net(down=frozenset(quorum.validators[:2]))
    late = quorum.validators[2]
    net.hold_from.add(late)
    net.at(ROUND0)
    assert net.broadcasts() == []  # three of four signatures arrived
    net.at(ROUND0 + 2)  # round 0 is over: the leader gave up
    net.release(late, ROUND0 + 2.1)
    assert all(b.block.header.round == 1 for _, b in net.broadcasts())
    assert of_type(net.reports[quorum.leader], RoundFailed) == [RoundFailed(HEIGHT, 0, quorum.leader)]


def test_validators_do_not_sign_a_template_the_shell_finds_invalid():
    net = Net(valid=lambda block: False)
    net.at(ROUND0)
    assert net.broadcasts() == []
    assert not any(of_type(actions, SignTemplate) for actions in net.reports.values())
    assert len([k for k, a in net.reports.items() if of_type(a, CheckTemplate)]) == VALIDATORS_PER_ROUND


# --- one leader -------------------------------------------------------------------------------

def leading() -> tuple[RoundMachine, bytes]:
    """Round 0's leader machine, its template sent: (machine, template hash)."""
    key = KEY_OF[quorum_of(0).leader]
    m = machine(key)
    [build] = m.tick(ROUND0)
    assert build == BuildTemplate(HEIGHT, 0, ROUND0)
    block = template_block(key, 0, timestamp=build.timestamp)
    [send] = m.on_built(block, ROUND0 + 0.1)
    assert isinstance(send, SendTemplate) and send.validators == quorum_of(0).validators
    return m, block_hash(block.header)


def validator_keys() -> list[SigningKey]:
    """The keys of round 0's validators."""
    return [KEY_OF[k] for k in quorum_of(0).validators]


def test_the_leader_counts_each_validator_once():
    m, this_hash = leading()
    first = validator_keys()[0]
    assert m.on_signature(signature(first, this_hash), ROUND0 + 0.2) == []
    for _ in range(5):
        assert m.on_signature(signature(first, this_hash), ROUND0 + 0.3) == []
    for key in validator_keys()[1:NEEDED]:
        assert m.on_signature(signature(key, this_hash), ROUND0 + 0.4) == []
    assert m.wake_at == ROUND0 + 0.4 + GRACE  # the needed signatures are in: the grace ends then
    [broadcast] = m.tick(ROUND0 + 0.4 + GRACE)
    assert isinstance(broadcast, Broadcast)
    assert_well_signed(broadcast, quorum_of(0))
    assert len(broadcast.validator_signatures) == NEEDED
    # After the broadcast every signature is late.
    assert m.on_signature(signature(validator_keys()[NEEDED], this_hash), ROUND0 + 1.0) == []


def test_the_leader_ignores_signatures_from_outsiders_forgeries_and_other_blocks():
    m, this_hash = leading()
    good = validator_keys()[:NEEDED - 1]
    for key in good:
        m.on_signature(signature(key, this_hash), ROUND0 + 0.2)
    last = validator_keys()[NEEDED - 1]
    ignored = [
        signature(OUTSIDER, this_hash),  # not a validator of the round
        signature(KEY_OF[quorum_of(0).leader], this_hash),  # the leader itself
        signature(last, hash32(b"another block")),  # another block hash
        signature(last, this_hash, signer=OUTSIDER),  # forged
        signature(last, this_hash, height=HEIGHT + 1),  # another height
        signature(last, this_hash, round=1),  # another round
    ]
    for message in ignored:
        assert m.on_signature(message, ROUND0 + 0.3) == [], message
    assert m.on_signature(signature(last, this_hash), ROUND0 + 0.4) == []
    assert of_type(m.tick(ROUND0 + 0.4 + GRACE), Broadcast)


def test_signatures_before_the_template_is_built_are_ignored():
    key = KEY_OF[quorum_of(0).leader]
    m = machine(key)
    m.tick(ROUND0)
    block = template_block(key, 0)
    this_hash = block_hash(block.header)
    for validator in validator_keys():
        assert m.on_signature(signature(validator, this_hash), ROUND0 + 0.1) == []


def test_a_template_built_after_its_round_ended_is_dropped():
    key = KEY_OF[quorum_of(0).leader]
    m = machine(key)
    m.tick(ROUND0)
    actions = m.on_built(template_block(key, 0), ROUND0 + 2.5)
    assert actions == [RoundFailed(HEIGHT, 0, key.public)]


def test_a_template_that_is_not_this_rounds_is_a_shell_bug():
    key = KEY_OF[quorum_of(0).leader]
    m = machine(key)
    m.tick(ROUND0)
    wrong = [
        template_block(key, 0, height=HEIGHT + 1), template_block(key, 0, timestamp=ROUND0 + 2),
        template_block(OUTSIDER, 0), template_block(key, 0, prev_hash=OTHER_HASH),
    ]
    for block in wrong:
        with pytest.raises(ValueError, match="is not a block of height 51 round 0 by this leader"):
            m.on_built(block, ROUND0 + 0.1)


# --- one validator ----------------------------------------------------------------------------

def validating(index: int = 0) -> RoundMachine:
    """The machine of round 0's `index`-th validator, its clock in round 0."""
    m = machine(validator_keys()[index])
    assert m.tick(ROUND0) == []
    return m


def test_a_validator_checks_then_signs_the_leaders_template_once():
    m = validating()
    leader = KEY_OF[quorum_of(0).leader]
    message = template(leader)
    [check] = m.on_template(message, ROUND0 + 0.1)
    assert isinstance(check, CheckTemplate) and check.template == message
    assert m.on_template(message, ROUND0 + 0.2) == []  # the same template again
    [sign] = m.on_checked(check.block_hash, True, ROUND0 + 0.3)
    assert sign == SignTemplate(HEIGHT, 0, check.block_hash, leader.public)
    assert m.on_checked(check.block_hash, True, ROUND0 + 0.4) == []


def test_a_template_a_member_other_than_the_leader_brought_is_not_looked_at():
    """A leader sends its template itself: one another member's connection brought (up to a
    whole block of bytes, decoded and its signature checked before) is dropped unread."""
    m = validating()
    leader = KEY_OF[quorum_of(0).leader]
    message = template(leader)
    other = next(key for key in validator_keys() if key.public != leader.public)
    assert m.on_template(message, ROUND0 + 0.1, sender=other.public) == []
    [check] = m.on_template(message, ROUND0 + 0.2, sender=leader.public)
    assert isinstance(check, CheckTemplate) and check.template == message


def test_a_leader_that_equivocates_is_reported_and_neither_template_signed():
    m = validating()
    leader = KEY_OF[quorum_of(0).leader]
    first, second, third = template(leader), template(leader, salt=1), template(leader, salt=2)
    [check] = m.on_template(first, ROUND0 + 0.1)
    assert isinstance(check, CheckTemplate)
    [report] = m.on_template(second, ROUND0 + 0.2)
    assert report == Equivocation(HEIGHT, 0, leader.public, first, second)
    assert m.on_template(third, ROUND0 + 0.3) == []  # reported once
    assert m.on_checked(check.block_hash, True, ROUND0 + 0.4) == []


def test_a_second_template_after_signing_is_still_reported_and_not_signed():
    m = validating()
    leader = KEY_OF[quorum_of(0).leader]
    first, second = template(leader), template(leader, salt=1)
    [check] = m.on_template(first, ROUND0 + 0.1)
    assert isinstance(check, CheckTemplate)
    assert of_type(m.on_checked(check.block_hash, True, ROUND0 + 0.2), SignTemplate)
    assert of_type(m.on_template(second, ROUND0 + 0.3), Equivocation)
    second_hash = block_hash(template_block(leader, salt=1).header)
    assert m.on_checked(second_hash, True, ROUND0 + 0.4) == []


def test_templates_that_are_not_the_rounds_leaders_are_ignored():
    m = validating()
    leader = KEY_OF[quorum_of(0).leader]
    good = template_block(leader)
    forged = Block(good.header, good.transactions, OUTSIDER.sign(b"not the leader's"))
    ignored = [
        template(KEY_OF[quorum_of(1).leader]),  # round 1's leader, in round 0
        template(OUTSIDER),
        BlockTemplate(HEIGHT, 0, encode(forged)),
        template(leader, timestamp=ROUND0 - 1),  # outside the window
        template(leader, timestamp=ROUND0 + 2),
        template(leader, prev_hash=hash32(b"another parent")),
        BlockTemplate(HEIGHT, 0, b"\x94not a block"),
        BlockTemplate(HEIGHT, 0, encode(template_block(leader, height=HEIGHT + 1))),
        BlockTemplate(HEIGHT + 1, 0, encode(good)),  # another height
        BlockTemplate(HEIGHT, 1, encode(good)),  # another round
        BlockTemplate(HEIGHT, 0, encode(template_block(leader, 1, timestamp=ROUND0))),
    ]
    for message in ignored:
        assert m.on_template(message, ROUND0 + 0.5) == [], message
    assert of_type(m.on_template(BlockTemplate(HEIGHT, 0, encode(good)), ROUND0 + 0.6), CheckTemplate)


def test_a_template_after_its_round_is_ignored():
    m = validating()
    late = m.on_template(template(KEY_OF[quorum_of(0).leader]), ROUND0 + 2.1)
    assert of_type(late, CheckTemplate) == []


def test_a_template_that_comes_a_little_before_its_round_is_held_until_the_round_begins():
    leader = KEY_OF[quorum_of(0).leader]
    m = machine(validator_keys()[1])
    message = template(leader)
    assert m.on_template(message, ROUND0 - 0.05) == []  # the leader's clock is a bit ahead
    [check] = m.tick(ROUND0)
    assert isinstance(check, CheckTemplate) and check.template == message
    assert m.tick(ROUND0 + 0.5) == []  # considered once


def test_a_template_for_the_next_round_is_held_through_the_round_in_progress():
    round1 = quorum_of(1)
    validator = KEY_OF[round1.validators[0]]
    m = machine(validator)
    m.tick(ROUND0)
    message = BlockTemplate(HEIGHT, 1, encode(template_block(KEY_OF[round1.leader], 1)))
    assert m.on_template(message, ROUND0 + 1.9) == []
    actions = m.tick(ROUND0 + 2)
    assert of_type(actions, RoundFailed) and [a.template for a in of_type(actions, CheckTemplate)] == [message]


def test_early_templates_from_others_than_the_leader_or_further_ahead_are_not_held():
    leader = KEY_OF[quorum_of(0).leader]
    m = machine(validator_keys()[1])
    assert m.on_template(template(OUTSIDER), ROUND0 - 0.05) == []
    two_ahead = BlockTemplate(HEIGHT, 1, encode(template_block(KEY_OF[quorum_of(1).leader], 1)))
    assert m.on_template(two_ahead, ROUND0 - 0.05) == []
    assert m.tick(ROUND0) == []
    assert of_type(m.on_template(template(leader), ROUND0 + 0.1), CheckTemplate)


def test_two_early_templates_from_the_leader_are_an_equivocation_when_the_round_begins():
    leader = KEY_OF[quorum_of(0).leader]
    m = machine(validator_keys()[1])
    first, second, third = template(leader), template(leader, salt=1), template(leader, salt=2)
    for message in (first, second, third):
        assert m.on_template(message, ROUND0 - 0.05) == []
    check, report = m.tick(ROUND0)
    assert isinstance(check, CheckTemplate) and check.template == first
    assert report == Equivocation(HEIGHT, 0, leader.public, first, second)
    assert m.on_checked(check.block_hash, True, ROUND0 + 0.1) == []


def test_the_messages_decode_beside_quorumnets_other_messages():
    vote = QuorumVote(bytes(32), 1, 2, 3, bytes(32), bytes(64))
    checkpoint_vote = CheckpointVote(8, OTHER_HASH, bytes(32), bytes(64))
    message = signature(validator_keys()[0], OTHER_HASH)
    held = template(KEY_OF[quorum_of(0).leader])
    for sent in (vote, checkpoint_vote, message, held):
        kinds = QuorumVote | CheckpointVote | BlockTemplate | ValidatorSignature
        assert decode(encode(sent), kinds) == sent  # type: ignore[arg-type]  # a Union alias, not a type object; msgspec takes it


def test_a_check_answered_after_the_round_ended_signs_nothing():
    m = validating(index=1)
    [check] = m.on_template(template(KEY_OF[quorum_of(0).leader]), ROUND0 + 0.1)
    assert isinstance(check, CheckTemplate)
    assert m.on_checked(check.block_hash, True, ROUND0 + 2) == [
        RoundFailed(HEIGHT, 0, quorum_of(0).leader)
    ]


def test_nodes_outside_the_round_only_see_it_fail():
    outsider_of_round0 = next(k for k in POOL if k.public not in (quorum_of(0).leader, *quorum_of(0).validators))
    m = machine(outsider_of_round0)
    assert m.on_template(template(KEY_OF[quorum_of(0).leader]), ROUND0 + 0.1) == []
    assert m.tick(ROUND0 + 2) == [RoundFailed(HEIGHT, 0, quorum_of(0).leader)]


# --- time -------------------------------------------------------------------------------------

def test_the_machine_wakes_at_round_zero_then_at_each_rounds_end():
    m = machine(OUTSIDER)
    assert (m.round, m.wake_at) == (None, ROUND0)
    m.tick(ROUND0 + 0.3)
    assert (m.round, m.wake_at) == (0, ROUND0 + 2)
    m.tick(ROUND0 + 7)
    assert (m.round, m.wake_at) == (3, ROUND0 + 8)


def test_rounds_only_move_forward_and_one_failure_is_reported_for_rounds_slept_through():
    m = machine(OUTSIDER)
    m.tick(ROUND0 + 4)
    assert m.tick(ROUND0 + 0.5) == [] and m.round == 2  # the clock went back
    assert m.tick(ROUND0 + 20) == [RoundFailed(HEIGHT, 2, quorum_of(2).leader)]
    assert m.round == 10


def test_a_leader_that_wakes_late_in_its_round_still_builds():
    m = machine(KEY_OF[quorum_of(1).leader])
    assert m.tick(ROUND0 + 3.5) == [BuildTemplate(HEIGHT, 1, ROUND0 + 3)]


# --- whatever arrives, in whatever order ------------------------------------------------------

ROUND0_VALIDATORS = [KEY_OF[k] for k in quorum_of(0).validators]
SIGNERS = [*ROUND0_VALIDATORS, *ROUND0_VALIDATORS, *(k for k in POOL if k not in ROUND0_VALIDATORS), OUTSIDER]
"""Who a signature claims to be from: round 0's validators three times in four, anyone else
(the leader, other nodes, an outsider) otherwise."""


def mostly(common: object, rare: object) -> st.SearchStrategy:
    """`common` three times in four: hypothesis then often meets enough messages that count
    for a block, mixed with some that must not."""
    return st.sampled_from([common, common, common, rare])


message_events = st.tuples(
    st.integers(0, len(SIGNERS) - 1),
    mostly(True, False),  # for the leader's template (else another hash)
    mostly(True, False),  # signed by the claimed key (else forged)
    mostly(0, 1),  # the round it claims
    mostly(HEIGHT, HEIGHT + 1),
    st.floats(0, 0.2),  # time passing before it arrives (round 0 lasts 2 s)
)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(message_events, max_size=60))
def test_whatever_signatures_arrive_the_leader_broadcasts_only_well_signed_blocks(events):
    key = KEY_OF[quorum_of(0).leader]
    m = machine(key)
    now = float(ROUND0)
    m.tick(now)
    block = template_block(key, 0)
    m.on_built(block, now)
    template_hash = block_hash(block.header)
    broadcasts = []
    for who, for_template, genuine, round, height, delay in events:
        now += delay
        claimed = SIGNERS[who]
        message = signature(
            claimed, template_hash if for_template else OTHER_HASH, round, height=height,
            signer=None if genuine else SIGNERS[(who + 1) % len(SIGNERS)],
        )
        broadcasts += of_type(m.on_signature(message, now), Broadcast)
    assert len(broadcasts) <= 1
    for broadcast in broadcasts:
        assert broadcast.block_hash == template_hash
        assert_well_signed(broadcast, quorum_of(0))


template_events = st.tuples(
    st.sampled_from(["template", "checked", "tick"]),
    st.integers(0, 3),  # which template (0 to 2: the leader's three blocks; 3: an outsider's)
    st.booleans(),  # the shell's verdict
    st.floats(0, 1),
)


@settings(max_examples=150, deadline=None)
@given(events=st.lists(template_events, max_size=30))
def test_whatever_templates_arrive_a_validator_signs_at_most_one_per_round(events):
    leader = KEY_OF[quorum_of(0).leader]
    blocks = [*(template_block(leader, salt=s) for s in range(3)), template_block(OUTSIDER)]
    m = machine(validator_keys()[0])
    now = float(ROUND0)
    signed: dict[int, set[bytes]] = defaultdict(set)
    reported = False
    for kind, which, verdict, delay in events:
        now += delay
        if kind == "template":
            actions = m.on_template(BlockTemplate(HEIGHT, 0, encode(blocks[which])), now)
        elif kind == "checked":
            actions = m.on_checked(block_hash(blocks[which].header), verdict, now)
        else:
            actions = m.tick(now)
        reported = reported or bool(of_type(actions, Equivocation))
        for sign in of_type(actions, SignTemplate):
            assert not reported
            assert sign.block_hash != block_hash(blocks[3].header)
            signed[sign.round].add(sign.block_hash)
    assert all(len(hashes) == 1 for hashes in signed.values())
