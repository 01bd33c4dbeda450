"""docs/openrpc.json: the OpenRPC document of the admin API, generated from the typed records
(`rpc.signatures`, `api.types`) so that it cannot drift from what the daemon serves
(`python -m snode.rpc.openrpc > docs/openrpc.json`, run by `make docs`; a unit test compares)."""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any

import msgspec

from snode import __version__
from snode.rpc.methods import MethodTable
from snode.rpc.signatures import DOCUMENTED_PARAMS, SIGNATURES

REF = "#/components/schemas/{name}"


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
    params = [SIGNATURES[n][1] or DOCUMENTED_PARAMS[n] for n in names]
    results = [_result_type(SIGNATURES[n][0]) for n in names]
    schemas, components = msgspec.json.schema_components([*params, *results], ref_template=REF)
    for component in components.values():
        # A record's description is its docstring, which Python 3.13 dedents as it compiles
        # and older Pythons do not: cleaned, the document is the same on every Python.
        if "description" in component:
            component["description"] = inspect.cleandoc(component["description"])
    methods = []
    for i, name in enumerate(names):
        record = components[params[i].__name__]
        required = set(record.get("required", []))
        methods.append({
            "name": name,
            "paramStructure": "by-name",
            "params": [{"name": field, "required": field in required, "schema": schema}
                       for field, schema in record.get("properties", {}).items()],
            "result": {"name": "result", "schema": schemas[len(names) + i]},
        })
    return {
        "openrpc": "1.2.6",
        "info": {"title": "snoded admin JSON-RPC", "version": __version__,
                 "description": "POST /json_rpc on the admin port (docs/RPC.md)."},
        "methods": methods,
        "components": {"schemas": components},
    }


def main() -> None:
    print(json.dumps(document(), indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
