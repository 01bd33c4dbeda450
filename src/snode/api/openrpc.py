"""OpenRPC documents (https://spec.open-rpc.org) made from typed records, for the daemon's admin
RPC (snode.rpc.openrpc) and the wallet's (snode.wallet.openrpc): each method's parameters are
the fields of its msgspec record, its result the schema of its result record, so a document
cannot drift from what the server checks and answers. Both servers also answer `rpc.discover`
with their document (the OpenRPC service-discovery method)."""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import msgspec

from snode import __version__

REF = "#/components/schemas/{name}"
DISCOVER = "rpc.discover"


class Documented(NamedTuple):
    """One method of a document."""

    name: str
    params: type
    """Its parameter record (a msgspec Struct)."""
    result: Any
    """Its result's type."""
    summary: str = ""


def openrpc_document(title: str, description: str, methods: list[Documented]) -> dict[str, Any]:
    """The OpenRPC 1.2 document of `methods`, parameters by name."""
    types = [m.params for m in methods] + [m.result for m in methods]
    schemas, components = msgspec.json.schema_components(types, ref_template=REF)
    for component in components.values():
        # A record's description is its docstring, which Python 3.13 dedents as it compiles
        # and older Pythons do not: cleaned, the document is the same on every Python.
        if "description" in component:
            component["description"] = inspect.cleandoc(component["description"])
    documented = []
    for i, method in enumerate(methods):
        record = components[method.params.__name__]
        required = set(record.get("required", []))
        entry: dict[str, Any] = {"name": method.name}
        if method.summary:
            entry["summary"] = method.summary
        entry.update({
            "paramStructure": "by-name",
            "params": [{"name": field, "required": field in required, "schema": schema}
                       for field, schema in record.get("properties", {}).items()],
            "result": {"name": "result", "schema": schemas[len(methods) + i]},
        })
        documented.append(entry)
    return {
        "openrpc": "1.2.6",
        "info": {"title": title, "version": __version__, "description": description},
        "methods": documented,
        "components": {"schemas": components},
    }
