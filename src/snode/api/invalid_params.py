"""`-32602 Invalid params` in the operator's words, from msgspec's validation errors.

msgspec says "Expected `int` <= 1000 - at `$.blocks`" or "Object contains unknown field `block`";
an operator typing a call by hand should read "blocks: must be at most 1000" and "unknown
parameter 'block' (this method takes: blocks)". Anything not recognised keeps msgspec's text.
"""

from __future__ import annotations

import re

import msgspec

from snode.api import errors as E
from snode.api.errors import RpcError

_TYPES = {
    "int": "an integer", "str": "a string", "bool": "true or false", "float": "a number",
    "array": "an array", "object": "an object", "null": "null", "bytes": "a string",
}
_BOUNDS = {"<=": "at most", ">=": "at least", "<": "below", ">": "above"}
_WRONG_TYPE = re.compile(r"Expected `([^`]+)`, got `([^`]+)`$")
_OUT_OF_RANGE = re.compile(r"Expected `([^`]+)` (<=|>=|<|>) (\S+)$")
_LENGTH = re.compile(r"Expected `([^`]+)` of length (<=|>=|<|>) (\S+)$")
_UNKNOWN = re.compile(r"Object contains unknown field `([^`]+)`$")
_MISSING = re.compile(r"Object missing required field `([^`]+)`$")


def _type_words(spelled: str, *, got: bool = False) -> str:
    """`int | null` -> "an integer or null"; unknown names as msgspec spells them."""
    if got and spelled == "bool":
        return "true/false"
    return " or ".join(_TYPES.get(part, part) for part in spelled.split(" | "))


def _rule(text: str, names: tuple[str, ...]) -> str:
    if found := _WRONG_TYPE.match(text):
        return f"must be {_type_words(found[1])}, not {_type_words(found[2], got=True)}"
    if found := _LENGTH.match(text):
        unit = "item" if found[1] == "array" else "character"
        plural = "" if found[3] == "1" else "s"
        return f"must hold {_BOUNDS[found[2]]} {found[3]} {unit}{plural}"
    if found := _OUT_OF_RANGE.match(text):
        return f"must be {_BOUNDS[found[2]]} {found[3]}"
    takes = f" (this method takes: {', '.join(names)})" if names else " (this method takes none)"
    if found := _UNKNOWN.match(text):
        return f"unknown parameter '{found[1]}'{takes}"
    if found := _MISSING.match(text):
        return f"missing parameter '{found[1]}'"
    return text[:1].lower() + text[1:]


def invalid_params(err: msgspec.ValidationError, schema: type[msgspec.Struct]) -> RpcError:
    """The -32602 error for params that `schema` refused, leading with the parameter's name."""
    text = str(err)
    names = tuple(field.encode_name for field in msgspec.structs.fields(schema))
    what, sep, where = text.partition(" - at `$")
    rule = _rule(what, names)
    if sep:
        place = where.rstrip("`").lstrip(".")
        return RpcError(E.INVALID_PARAMS, f"Invalid params: {place}: {rule}")
    return RpcError(E.INVALID_PARAMS, f"Invalid params: {rule}")
