"""`-32602 Invalid params` in the operator's words, from msgspec's validation errors.

msgspec says "Expected `int` <= 1000 - at `$.blocks`" or "Object contains unknown field `block`";
an operator typing a call by hand should read "blocks: must be at most 1000" and "unknown
parameter 'block' (this method takes: blocks)". Anything else is worded by
`common.decode_reasons`, so no msgspec release's own text reaches the caller.
"""

from __future__ import annotations

import msgspec

from snode.api import errors as E
from snode.api.errors import RpcError
from snode.common import decode_reasons

RPC_TYPE_WORDS = {**decode_reasons.TYPE_WORDS, "bytes": "a string"}
"""JSON carries bytes as text: a caller typed a string."""


def _rule(text: str, names: tuple[str, ...]) -> str:
    takes = f" (this method takes: {', '.join(names)})" if names else " (this method takes none)"
    if found := decode_reasons.UNKNOWN_FIELD.match(text):
        return f"unknown parameter '{found[1]}'{takes}"
    if found := decode_reasons.MISSING_FIELD.match(text):
        return f"missing parameter '{found[1]}'"
    return decode_reasons.rule(text, words=RPC_TYPE_WORDS)


def invalid_params(err: msgspec.ValidationError, schema: type[msgspec.Struct]) -> RpcError:
    """The -32602 error for params that `schema` refused, leading with the parameter's name."""
    text = str(err)
    names = tuple(field.encode_name for field in msgspec.structs.fields(schema))
    what, where = decode_reasons.split_path(text)
    rule = _rule(what, names)
    if where:
        place = where.removeprefix("$").lstrip(".")
        return RpcError(E.INVALID_PARAMS, f"Invalid params: {place}: {rule}")
    return RpcError(E.INVALID_PARAMS, f"Invalid params: {rule}")
