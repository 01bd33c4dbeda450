"""Participation in block production (`core.participation`, issue #12): the duties a block
settles and the record of each node's last eight, checked against tables computed by hand."""

from __future__ import annotations

import pytest

from snode.core.encoding import decode, encode
from snode.core.participation import (
    Participation, fails_participation, miss_count, participation_updates, record, recorded,
)
from snode.core.pulse import RoundQuorum
from snode.params import DEVNET, MAINNET

A, B, C, D, E, F, G = (bytes([i]) * 32 for i in range(1, 8))
ROUND0 = RoundQuorum(leader=A, validators=(B, C, D), needed=2)
ROUND1 = RoundQuorum(leader=B, validators=(C, D, E), needed=2)
ROUND2 = RoundQuorum(leader=C, validators=(D, E, A), needed=2)
WINDOW = DEVNET.participation_window


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
        history = record(history, missed, WINDOW)
    assert history == Participation(misses, count)
    assert miss_count(history) == bin(misses).count("1")


@pytest.mark.parametrize("misses, fails", [
    (0b00000000, False), (0b00001111, False), (0b11110000, False), (0b10101010, False),
    (0b00011111, True), (0b11111000, True), (0b11111111, True), (0b10101011, True),
])
def test_more_than_four_misses_of_the_last_eight_fail(misses, fails):
    for params in (MAINNET, DEVNET):
        assert fails_participation(Participation(misses, 8), params) is fails


def test_a_node_that_does_its_duties_again_recovers():
    history = Participation()
    for _ in range(5):
        history = record(history, True, WINDOW)
    assert fails_participation(history, DEVNET)
    history = record(history, False, WINDOW)
    assert fails_participation(history, DEVNET)  # still five misses in the last eight
    for _ in range(3):
        history = record(history, False, WINDOW)
    assert history == Participation(0b11110000, 8)
    assert not fails_participation(history, DEVNET)


def test_recorded_applies_a_blocks_updates_in_order_to_the_nodes_they_touch():
    before = {A: Participation(0b1, 1), F: Participation(0b11, 2)}
    after = recorded(before, participation_updates([ROUND0, ROUND1, ROUND2], 0b110), WINDOW)
    assert after == {
        A: Participation(0b110, 3),  # had 1 miss; missed round 0's lead; signed in round 2
        B: Participation(0b1, 1),
        C: Participation(0b0, 1),
        D: Participation(0b1, 1),
        E: Participation(0b0, 1),
    }
    assert G not in after and before[A] == Participation(0b1, 1)  # nothing mutated


def test_a_record_travels_in_canonical_bytes():
    history = Participation(0b10110, 5)
    assert decode(encode(history), Participation) == history
