"""SNODE_CLOCK_OFFSET: a skewed clock for fault tests on devnet and regtest, never elsewhere."""

from __future__ import annotations

import pytest

from snode.common.clock import MockableClock, SystemClock, clock_offset


def test_the_offset_moves_the_clock_and_a_mock_time_stays_exact():
    assert 399 < SystemClock(400).time() - SystemClock().time() < 401
    clock = MockableClock(-30)
    assert -31 < clock.time() - SystemClock().time() < -29
    clock.set_mock(1_000)
    assert clock.time() == 1_000


@pytest.mark.parametrize("network, value, expected", [
    ("devnet", "", 0.0), ("devnet", "1.5", 1.5), ("regtest", "-400", -400.0), ("mainnet", "", 0.0),
])
def test_good_offsets(network, value, expected):
    assert clock_offset(network, {"SNODE_CLOCK_OFFSET": value}) == expected


@pytest.mark.parametrize("network, value, message", [
    ("mainnet", "1", "is for devnet and regtest fault tests; unset it to run on mainnet"),
    ("testnet", "1", "unset it to run on testnet"),
    ("devnet", "soon", "'soon' is not a number of seconds"),
    ("devnet", "nan", "is beyond a day either way"),
    ("devnet", "100000", "is beyond a day either way"),
])
def test_bad_offsets_are_one_line(network, value, message):
    with pytest.raises(ValueError, match=message):
        clock_offset(network, {"SNODE_CLOCK_OFFSET": value})
