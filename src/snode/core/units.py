"""Coins <-> atomic units, and percent <-> ppm. Users type coins; the chain counts atomic units."""

from __future__ import annotations

import re
from typing import Final

from snode.core.errors import InvalidAmount
from snode.params import COIN, PPM

DECIMALS: Final = 9
PERCENT_DECIMALS: Final = 4
_DECIMAL = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_EXPONENT = re.compile(r"[0-9.]+[eE][+-]?[0-9]+")


MAX_WHOLE_DIGITS = 30
"""Digits before the point that an amount or a percent may have (the largest amount is 19)."""


def whole_number(text: str, max_digits: int = 19) -> int | None:
    """`text` as a whole number when it is ASCII digits with at most `max_digits` significant ones
    (leading zeros don't count, and never reach int(), which refuses over 4,300 digits, zeros
    included); None otherwise."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0")
    if len(significant) > max_digits:
        return None
    return int(significant or "0")


def _split_decimal(text: str, what: str, max_decimals: int) -> tuple[str, str]:
    if text == "" or text.strip() == "":
        raise InvalidAmount(f"{what} is empty: give a number such as 1.5")
    if text != text.strip() or any(ch.isspace() for ch in text):
        raise InvalidAmount(f"{what} '{text}' contains whitespace: give digits only, such as 1.5")
    if text.startswith("-"):
        raise InvalidAmount(f"{what} '{text}' is negative: give a positive number")
    if "," in text:
        raise InvalidAmount(f"{what} '{text}' contains a comma: write it without separators")
    if _EXPONENT.fullmatch(text):
        raise InvalidAmount(f"{what} '{text}' uses an exponent: write the number out in full")
    if not _DECIMAL.fullmatch(text) or not text.isascii():
        raise InvalidAmount(f"{what} '{text}' is not a decimal number: give digits such as 1.5")
    whole, _, frac = text.partition(".")
    if len(whole.lstrip("0")) > MAX_WHOLE_DIGITS:  # nothing staked or sent is that large; int() of
        # thousands of digits would be slow, and over 4,300 a ValueError
        raise InvalidAmount(f"{what} '{text[:MAX_WHOLE_DIGITS]}...' is too large ({len(whole)} digits)")
    whole = whole.lstrip("0") or "0"  # int() counts leading zeros against its 4,300-digit limit
    if len(frac) > max_decimals:
        raise InvalidAmount(
            f"{what} '{text}' has more than {max_decimals} decimal places: "
            f"the smallest unit is 0.{'0' * (max_decimals - 1)}1"
        )
    return whole, frac


def parse_coins(text: str) -> int:
    """Parse a coin amount typed by a user (`200000`, `1.5`, `0.000000001`) into atomic units."""
    whole, frac = _split_decimal(text, "amount", DECIMALS)
    atomic = int(whole) * COIN + int(frac.ljust(DECIMALS, "0") or "0")
    if atomic > 2**63 - 1:
        raise InvalidAmount(f"amount '{text}' is too large")
    return atomic


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`1 peer`, `2 peers`, `0 peers`: a count with its noun, read right for one and for many."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def duration(seconds: int) -> str:
    """A rough human duration: `15 days`, `3 hours`, `2 minutes`, `40 seconds`."""
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size:
            count = round(seconds / size)
            return counted(count, unit)
    return counted(seconds, "second")


def coin_word(atomic: int) -> str:
    """`coin` for exactly one coin, `coins` for any other amount (0, 1.5, 2)."""
    return "coin" if atomic == COIN else "coins"


def round_up_coins(atomic: int, decimals: int = 2) -> int:
    """Atomic units rounded up to `decimals` places of a coin: a least amount as people type
    one (11111.055555555 -> 11111.06), itself enough."""
    step = 10 ** (DECIMALS - decimals)
    return -(-atomic // step) * step


def format_coins(atomic: int) -> str:
    """Atomic units as coins with no trailing zeros: 16500000000 -> `16.5`."""
    sign = "-" if atomic < 0 else ""
    whole, frac = divmod(abs(atomic), COIN)
    frac_text = f"{frac:0{DECIMALS}d}".rstrip("0")
    return f"{sign}{whole}.{frac_text}" if frac_text else f"{sign}{whole}"


def parse_percent_ppm(text: str, *, maximum_ppm: int) -> int:
    """Parse a decimal percent (`0`, `2.5`, `10`; up to 4 decimals) into ppm, at most maximum_ppm."""
    whole, frac = _split_decimal(text, "percent", PERCENT_DECIMALS)
    ppm = int(whole) * (PPM // 100) + int(frac.ljust(PERCENT_DECIMALS, "0") or "0")
    if ppm > maximum_ppm:
        raise InvalidAmount(
            f"percent '{text}' is above the maximum of {format_percent(maximum_ppm)}"
        )
    return ppm


def format_percent(ppm: int) -> str:
    """ppm as a decimal percent with no trailing zeros: 25000 -> `2.5`."""
    whole, frac = divmod(ppm, PPM // 100)
    frac_text = f"{frac:0{PERCENT_DECIMALS}d}".rstrip("0")
    return f"{whole}.{frac_text}" if frac_text else str(whole)


def format_age(seconds: int) -> str:
    """A duration as the status line shows it: `42s`, `1m05s`, `3h07m`."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{sec:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
