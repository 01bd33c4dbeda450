"""docs/openrpc.json: the OpenRPC document of the admin API, generated from the typed records
(`rpc.signatures`, `api.types`) so that it cannot drift from what the daemon serves
(`python -m snode.rpc.openrpc > docs/openrpc.json`, run by `make docs`; a unit test compares)."""

from __future__ import annotations

import functools
import json
import types
import typing
from typing import Any

import msgspec

from snode.api.openrpc import Documented, openrpc_document
from snode.rpc.methods import MethodTable
from snode.rpc.signatures import DOCUMENTED_PARAMS, SIGNATURES


def _result_type(attr: str) -> Any:
    """A method's result record (the encoded `msgspec.Raw` fast path left out)."""
    hint = typing.get_type_hints(getattr(MethodTable, attr))["return"]
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        kept = [t for t in typing.get_args(hint) if t is not msgspec.Raw]
        return kept[0]
    return hint


def document() -> dict[str, Any]:
    """The OpenRPC 1.2 document of every admin method."""
    names = list(SIGNATURES)
    return openrpc_document(
        "snoded admin JSON-RPC", "POST /json_rpc on the admin port (docs/RPC.md).",
        [Documented(n, SIGNATURES[n][1] or DOCUMENTED_PARAMS[n], _result_type(SIGNATURES[n][0])) for n in names])


served_document = functools.cache(document)
"""What `rpc.discover` answers (made at its first call)."""


def main() -> None:
    print(json.dumps(document(), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
