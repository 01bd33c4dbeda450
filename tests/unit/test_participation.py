"""Participation in block production (`core.participation`, issue #12): the duties a block
settles and the record of each node's last eight, checked against tables computed by hand."""

from __future__ import annotations

import pytest

from snode.core.encoding import decode, encode
from snode.core.participation import (
    Participation,
    failing,
    fails_participation,
    miss_count,
    participation_updates,
    record,
    recorded,
)
from snode.core.pulse import RoundQuorum
from snode.params import DEVNET, MAINNET

A, B, C, D, E, F, G = (bytes([i]) * 32 for i in range(1, 8))
ROUND0 = RoundQuorum(leader=A, validators=(B, C, D), needed=2)
ROUND1 = RoundQuorum(leader=B, validators=(C, D, E), needed=2)
ROUND2 = RoundQuorum(leader=C, validators=(D, E, A), needed=2)
AT = 1_800_000_000
"""A block timestamp."""


def test_a_round_zero_block_settles_its_leader_and_its_validators_by_bit():
    assert participation_updates([ROUND0], 0b011) == [(A, False), (B, False), (C, False), (D, True)]
    assert participation_updates([ROUND0], 0b101) == [(A, False), (B, False), (C, True), (D, False)]


def test_the_leaders_of_the_failed_rounds_missed_and_their_validators_are_not_judged():
    assert participation_updates([ROUND0, ROUND1, ROUND2], 0b110) == [
        (A, True), (B, True),  # led rounds 0 and 1 without a block
        (C, False),  # led round 2: the block
        (D, True), (E, False), (A, False),  # round 2's validators: D did not sign
    ]


@pytest.mark.parametrize("duties, misses, count", [
    # duties oldest first (True: missed) -> the bitmask, bit 0 the latest, and the count
    ([], 0b0, 0),
    ([True], 0b1, 1),
    ([True, False], 0b10, 2),
    ([False, True, True], 0b011, 3),
    ([True] * 8, 0b11111111, 8),
    ([True] * 8 + [False], 0b11111110, 8),  # the oldest miss left the window
    ([True] * 9 + [False] * 7, 0b10000000, 8),
    ([True, False] * 10, 0b10101010, 8),
])
def test_the_record_keeps_the_last_eight_duties(duties, misses, count):
    history = Participation()
    for missed in duties:
        history = record(history, missed, DEVNET, AT)
    assert (history.misses, history.duties) == (misses, count)
    assert miss_count(history) == bin(misses).count("1")


@pytest.mark.parametrize("misses, fails", [
    (0b00000000, False), (0b00001111, False), (0b11110000, False), (0b10101010, False),
    (0b00011111, True), (0b11111000, True), (0b11111111, True), (0b10101011, True),
])
def test_more_than_four_misses_of_the_last_eight_fail_once_the_grace_span_has_passed(misses, fails):
    for params in (MAINNET, DEVNET):
        history = Participation(misses, 8, AT if fails else 0)
        assert fails_participation(history, params, AT + params.participation_grace) is fails
        assert not fails_participation(history, params, AT + params.participation_grace - 1)


def test_a_node_that_does_its_duties_again_recovers():
    history = Participation()
    for _ in range(5):
        history = record(history, True, DEVNET, AT)
    assert history.failing_since == AT
    later = AT + DEVNET.participation_grace
    assert fails_participation(history, DEVNET, later)
    history = record(history, False, DEVNET, AT + 2)
    assert fails_participation(history, DEVNET, later)  # still five misses in the last eight
    for _ in range(3):
        history = record(history, False, DEVNET, AT + 4)
    assert history == Participation(0b11110000, 8, AT)
    assert not fails_participation(history, DEVNET, later)


@pytest.mark.parametrize("params", [MAINNET, DEVNET])
def test_a_restart_shorter_than_the_grace_span_costs_nothing_and_a_node_that_stays_away_fails(params):
    """Every duty missed while the node is stopped (as in a network so small that it has one in
    every block): back within the grace span, its duties end the stretch before it is judged."""
    block = params.target_block_time
    history = Participation(0, 8)
    stopped = [AT + i * block for i in range(1, 9)]
    for at in stopped:
        history = record(history, True, params, at)
    assert history.failing_since == stopped[4]  # the fifth miss began the stretch
    back = stopped[-1] + block
    for i in range(4):
        history = record(history, False, params, back + i * block)
        assert not fails_participation(history, params, back + i * block)
    assert not failing(history, params)
    history = record(history, False, params, back + 4 * block)
    history = record(history, False, params, back + 5 * block)
    assert history.failing_since == 0  # two misses of eight: the stretch is over
    # The same node away for good: its stretch goes on until the grace span has passed.
    away = Participation(0, 8)
    for at in range(AT, AT + params.participation_grace + 10 * block, block):
        away = record(away, True, params, at)
        assert fails_participation(away, params, at) is (at - (AT + 4 * block) >= params.participation_grace)
    assert fails_participation(away, params, at)


def test_a_node_hovering_at_the_limit_stays_in_one_failing_stretch():
    """Five misses, then four, then five again: one stretch, judged from its start (a node that
    misses every other duty cannot dodge the judgment by passing now and then)."""
    history = Participation(0b1001_1110, 8, AT)
    history = record(history, False, DEVNET, AT + 10)  # 0b0011_1100: four misses, still in the stretch
    assert not failing(history, DEVNET) and history.failing_since == AT
    history = record(history, True, DEVNET, AT + 12)  # 0b0111_1001: five again
    assert history.failing_since == AT
    assert fails_participation(history, DEVNET, AT + DEVNET.participation_grace)


def test_recorded_applies_a_blocks_updates_in_order_to_the_nodes_they_touch():
    before = {A: Participation(0b1, 1), F: Participation(0b11, 2)}
    after = recorded(before, participation_updates([ROUND0, ROUND1, ROUND2], 0b110), DEVNET, AT)
    assert after == {
        A: Participation(0b110, 3),  # had 1 miss; missed round 0's lead; signed in round 2
        B: Participation(0b1, 1),
        C: Participation(0b0, 1),
        D: Participation(0b1, 1),
        E: Participation(0b0, 1),
    }
    assert G not in after and before[A] == Participation(0b1, 1)  # nothing mutated


def test_a_record_travels_in_canonical_bytes():
    history = Participation(0b10110, 5, AT)
    assert decode(encode(history), Participation) == history
