"""Why bytes did not decode, in snode's words, whatever msgspec release said it.

msgspec's error texts are its own and change between releases (0.23 reports a text field that is
not UTF-8 as "Invalid UTF-8 encoded string" where 0.22 raised Python's UnicodeDecodeError). What
reaches an operator's log, a peer's ban reason or an RPC error must not depend on which release a
machine installed, so every decode failure is rewritten here into one of a closed set of phrases
(`PHRASES`); the place in the value (msgspec's `$[1].x`) is kept, the library's wording is not.
A text this module does not recognise becomes "does not have the expected form": the set stays
closed, and `tests/unit/test_decode_reasons.py` checks each phrase against the installed msgspec.
"""

from __future__ import annotations

import re
from typing import Final

import msgspec

TYPE_WORDS: Final = {
    "int": "an integer", "str": "a string", "bool": "true or false", "float": "a number",
    "array": "an array", "object": "an object", "null": "null", "bytes": "bytes",
}
BOUND_WORDS: Final = {"<=": "at most", ">=": "at least", "<": "below", ">": "above"}

NOT_UTF8: Final = "a text field is not UTF-8"
TRUNCATED: Final = "the data ends early"
NOT_MSGPACK: Final = "the bytes are not MessagePack"
NOT_JSON: Final = "the text is not JSON"
TRAILING: Final = "extra bytes follow the value"
NOT_ALLOWED: Final = "not one of the allowed values"
UNHASHABLE: Final = "a set item or map key is not a plain value"
UNKNOWN_FORM: Final = "does not have the expected form"
PHRASES: Final = (
    NOT_UTF8, TRUNCATED, NOT_MSGPACK, NOT_JSON, TRAILING, NOT_ALLOWED, UNHASHABLE, UNKNOWN_FORM,
    "must be {type}, not {type}", "must be {bound} {n}", "must hold {bound} {n} {unit}",
    "must hold {n} {unit}, not {m}", "missing field '{name}'", "unknown field '{name}'",
    "must match the pattern {pattern}",
)
"""Every phrase `reason` can give (templates in braces), for the docs and the tests."""

DECODE_FAILURES: Final = (msgspec.DecodeError, UnicodeDecodeError)
"""What a msgspec decode of outside bytes may raise: ValidationError is a DecodeError, and msgspec
before 0.23 raised UnicodeDecodeError for a text that is not UTF-8 (0.23: a DecodeError)."""

_WRONG_TYPE = re.compile(r"Expected `([^`]+)`, got `([^`]+)`$")
_OUT_OF_RANGE = re.compile(r"Expected `([^`]+)` (<=|>=|<|>) (\S+)$")
_LENGTH_BOUND = re.compile(r"Expected `([^`]+)` of length (<=|>=|<|>) (\d+)$")
_ARRAY_AT_LEAST = re.compile(r"Expected `array` of at (least|most) length (\d+), got (\d+)$")
_ARRAY_LENGTH = re.compile(r"Expected `array` of length (\d+), got (\d+)$")
UNKNOWN_FIELD = re.compile(r"Object contains unknown field `([^`]{0,64})`$")
MISSING_FIELD = re.compile(r"Object missing required field `([^`]{0,64})`$")
_PATTERN = re.compile(r"Expected `str` matching regex ('.{0,200}')$")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")
_PATH = re.compile(r" - at `(\$[^`]{0,200})`$")


def type_words(spelled: str, *, got: bool = False, words: dict[str, str] = TYPE_WORDS) -> str:
    """`int | null` -> "an integer or null"; a type of our own records keeps its name."""
    if got and spelled == "bool":
        return "true/false"
    return " or ".join(words.get(part, part) for part in spelled.split(" | "))


def split_path(text: str) -> tuple[str, str]:
    """(msgspec's message, the place it names, such as `$[1].x`, or "")."""
    found = _PATH.search(text)
    if found is None:
        return text, ""
    return text[: found.start()], found[1]


def _count(n: str, unit: str) -> str:
    return f"{n} {unit}" if n == "1" else f"{n} {unit}s"


def rule(text: str, *, words: dict[str, str] = TYPE_WORDS) -> str:
    """One of PHRASES for msgspec's message `text` (without its ` - at` place); `words` names
    the types (the RPC's say "a string" for bytes, which JSON carries as text)."""
    if found := _WRONG_TYPE.match(text):
        return f"must be {type_words(found[1], words=words)}, not {type_words(found[2], got=True, words=words)}"
    if found := _LENGTH_BOUND.match(text):
        unit = "item" if found[1] in ("array", "object") else "character" if found[1] == "str" else "byte"
        return f"must hold {BOUND_WORDS[found[2]]} {_count(found[3], unit)}"
    if found := _OUT_OF_RANGE.match(text):
        return f"must be {BOUND_WORDS[found[2]]} {found[3]}"
    if found := _ARRAY_AT_LEAST.match(text):
        return f"must hold at {found[1]} {_count(found[2], 'item')}"
    if found := _ARRAY_LENGTH.match(text):
        return f"must hold {_count(found[1], 'item')}, not {found[2]}"
    if found := UNKNOWN_FIELD.match(text):
        return f"unknown field '{found[1]}'"
    if found := MISSING_FIELD.match(text):
        return f"missing field '{found[1]}'"
    if found := _PATTERN.match(text):
        return f"must match the pattern {found[1]}"
    return _plain_rule(text)


def _plain_rule(text: str) -> str:
    at_byte = _AT_BYTE.search(text)
    where = f" (at byte {at_byte[1]})" if at_byte else ""
    if "UTF-8" in text or "utf-8" in text:
        return NOT_UTF8
    if text.startswith("Input data was truncated"):
        return TRUNCATED
    if "trailing characters" in text or text.startswith("Extra data"):
        return TRAILING + where
    if text.startswith("MessagePack data is malformed"):
        return NOT_MSGPACK + where
    if text.startswith("JSON is malformed"):
        return NOT_JSON + where
    if text.startswith("Invalid enum value"):
        return NOT_ALLOWED
    if text.startswith("Expected a hashable value"):
        return UNHASHABLE
    return UNKNOWN_FORM


def reason(err: Exception) -> str:
    """Why msgspec refused the bytes, in our words: a phrase of PHRASES, then the place in the
    value where msgspec named one (`must be at most 5 (at $[1])`). UnicodeDecodeError, which
    msgspec before 0.23 raised for a text field that is not UTF-8, gives the same phrase as
    0.23's DecodeError for it."""
    if isinstance(err, UnicodeDecodeError):
        return NOT_UTF8
    text, place = split_path(str(err))
    words = rule(text)
    return f"{words} (at {place})" if place else words
