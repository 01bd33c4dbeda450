"""docs/openrpc.json and docs/wallet-openrpc.json are the OpenRPC documents the typed records make
(`make docs` writes them): a changed record or method without a regenerated document fails here.
Both are valid against the OpenRPC meta-schema (tests/data: @open-rpc/meta-schema 1.14.9 and the
JSON-schema meta-schema it refers to, @json-schema-tools/meta-schema 1.7.0, both Apache-2.0, as
their npm packages ship them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT7

from snode.rpc.openrpc import document
from snode.rpc.signatures import SIGNATURES
from snode.wallet import openrpc as wallet_openrpc
from snode.wallet.rpc_server import WalletRpc

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "openrpc.json"
WALLET_DOC = ROOT / "docs" / "wallet-openrpc.json"
DATA = ROOT / "tests" / "data"


def _meta_schema_validator() -> jsonschema.Draft7Validator:
    """The OpenRPC meta-schema, its reference to the JSON-schema meta-schema resolved from tests/data."""
    openrpc = json.loads((DATA / "openrpc-meta-schema-1.14.9.json").read_text())
    json_schema = json.loads((DATA / "json-schema-tools-meta-schema-1.7.0.json").read_text())
    resource = Resource.from_contents(json_schema, default_specification=DRAFT7)
    registry: Registry[Any] = Registry().with_resources(
        [("https://meta.json-schema.tools", resource), ("https://meta.json-schema.tools/", resource)])
    return jsonschema.Draft7Validator(openrpc, registry=registry)


def test_the_committed_document_is_the_generated_one():
    assert json.loads(DOC.read_text()) == json.loads(json.dumps(document())), (
        "regenerate it: make docs (or python -m snode.rpc.openrpc > docs/openrpc.json)")


def test_every_method_has_its_params_and_result():
    doc = document()
    assert [m["name"] for m in doc["methods"]] == list(SIGNATURES)
    by_name = {m["name"]: m for m in doc["methods"]}
    assert [p["name"] for p in by_name["get_block"]["params"]] == ["height", "hash"]
    assert {p["name"]: p["required"] for p in by_name["get_outputs"]["params"]} == {"address": True}
    assert by_name["get_locked_stakes"]["result"]["schema"] == {"$ref": "#/components/schemas/LockedStakesResult"}
    assert "contributor_amounts" in {p["name"] for p in by_name["get_service_node_registration_cmd"]["params"]}


def test_the_committed_wallet_document_is_the_generated_one():
    assert json.loads(WALLET_DOC.read_text()) == json.loads(json.dumps(wallet_openrpc.document())), (
        "regenerate it: make docs (or python -m snode.wallet.openrpc > docs/wallet-openrpc.json)")


def test_the_wallet_document_has_every_method_the_wallet_serves_with_its_params():
    served = WalletRpc(None).methods  # type: ignore[arg-type]  # the table only; no call is made
    assert [m.name for m in wallet_openrpc.METHODS] == list(served)
    assert {m.name: m.params for m in wallet_openrpc.METHODS} == {name: p for name, (_, p) in served.items()}
    stake = next(m for m in wallet_openrpc.document()["methods"] if m["name"] == "stake")
    assert {p["name"]: p["required"] for p in stake["params"]} == {
        "service_node_pubkey": True, "amount": False, "percent": False}


@pytest.mark.parametrize("path", [DOC, WALLET_DOC], ids=["admin", "wallet"])
def test_the_documents_are_valid_against_the_openrpc_meta_schema(path: Path):
    validator = _meta_schema_validator()
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in validator.iter_errors(json.loads(path.read_text()))]
    assert errors == []


def test_the_meta_schema_check_finds_a_broken_document():
    broken = json.loads(WALLET_DOC.read_text())
    broken["methods"][0]["paramStructure"] = "by-guess"
    del broken["info"]["version"]
    messages = [e.message for e in _meta_schema_validator().iter_errors(broken)]
    assert any("by-guess" in m for m in messages) and any("'version' is a required property" in m for m in messages)
