"""Coins <-> atomic units and percent <-> ppm (core/units.py): what users may type, and the
rule each refusal names."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.core.errors import InvalidAmount
from snode.core.units import format_coins, format_percent, parse_coins, parse_percent_ppm, whole_number
from snode.params import COIN, MAX_OPERATOR_FEE_PPM


@pytest.mark.parametrize(
    ("text", "atomic"),
    [
        ("200000", 200_000 * COIN),
        ("1.5", 1_500_000_000),
        ("0.000000001", 1),
        ("0", 0),
        ("16.5", 16_500_000_000),
        ("007.10", 7_100_000_000),
        ("9223372036.854775807", 2**63 - 1),
    ],
)
def test_parse_coins_accepts(text, atomic):
    assert parse_coins(text) == atomic


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("1,000", "contains a comma: write it without separators"),
        ("1e5", "uses an exponent: write the number out in full"),
        ("1E5", "uses an exponent"),
        ("-3", "is negative: give a positive number"),
        ("1.0000000001", "has more than 9 decimal places: the smallest unit is 0.000000001"),
        ("", "is empty"),
        ("   ", "is empty"),
        (" 5", "contains whitespace"),
        ("5 ", "contains whitespace"),
        ("1 000", "contains whitespace"),
        ("5\n", "contains whitespace"),
        ("1.", "is not a decimal number"),
        (".5", "is not a decimal number"),
        ("1.2.3", "is not a decimal number"),
        ("0x10", "is not a decimal number"),
        ("+5", "is not a decimal number"),
        ("١٢", "is not a decimal number"),
        ("five", "is not a decimal number"),
        ("9223372036.854775808", "is too large"),
        ("9" * 31, r"'9{30}\.\.\.' is too large \(31 digits\)"),
        ("9" * 5000, r"is too large \(5000 digits\)"),  # past int()'s 4,300-digit limit
    ],
)
def test_parse_coins_refuses_with_the_rule(text, rule):
    with pytest.raises(InvalidAmount, match=rule):
        parse_coins(text)


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_format_then_parse_coins_round_trips(atomic):
    assert parse_coins(format_coins(atomic)) == atomic


@pytest.mark.parametrize(
    ("atomic", "text"),
    [(16_500_000_000, "16.5"), (200_000 * COIN, "200000"), (1, "0.000000001"), (-5 * COIN, "-5")],
)
def test_format_coins(atomic, text):
    assert format_coins(atomic) == text


@pytest.mark.parametrize(
    ("text", "ppm"),
    [
        ("0", 0), ("1", 10_000), ("2.5", 25_000), ("10", 100_000), ("10.0000", 100_000),
        ("0.0001", 1), ("3.3333", 33_333), ("9.9999", 99_999), ("5", 50_000),
    ],
)
def test_parse_percent_to_ppm(text, ppm):
    assert parse_percent_ppm(text, maximum_ppm=MAX_OPERATOR_FEE_PPM) == ppm


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("10.0001", "above the maximum of 10"),
        ("11", "above the maximum of 10"),
        ("100", "above the maximum of 10"),
        ("2.50001", "more than 4 decimal places: the smallest unit is 0.0001"),
        ("-1", "is negative"),
        ("5%", "is not a decimal number"),
        ("", "is empty"),
    ],
)
def test_parse_percent_refuses_with_the_rule(text, rule):
    with pytest.raises(InvalidAmount, match=rule):
        parse_percent_ppm(text, maximum_ppm=MAX_OPERATOR_FEE_PPM)


@given(st.integers(min_value=0, max_value=MAX_OPERATOR_FEE_PPM))
def test_format_then_parse_percent_round_trips(ppm):
    assert parse_percent_ppm(format_percent(ppm), maximum_ppm=MAX_OPERATOR_FEE_PPM) == ppm


@pytest.mark.parametrize(("text", "max_digits", "value"), [
    ("0", 19, 0), ("0042", 19, 42), ("0" * 5000 + "7", 19, 7), ("9" * 19, 19, 10**19 - 1),
    ("9" * 20, 19, None), ("1" * 5000, 19, None), ("²", 19, None), ("١٢", 19, None), ("-1", 19, None),
    ("", 19, None), ("1000", 3, None), ("999", 3, 999),
])
def test_whole_number_never_hands_int_more_than_it_can_take(text: str, max_digits: int, value: int | None) -> None:
    assert whole_number(text, max_digits) == value


def test_leading_zeros_do_not_count_against_the_digit_limits() -> None:
    assert parse_coins("0" * 5000 + "1") == COIN
    assert parse_percent_ppm("0" * 5000 + "5", maximum_ppm=MAX_OPERATOR_FEE_PPM) == 50_000
