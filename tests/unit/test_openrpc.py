"""docs/openrpc.json is the OpenRPC document the typed records make (`make docs` writes it): a
changed record or method without a regenerated document fails here."""

from __future__ import annotations

import json
from pathlib import Path

from snode.rpc.openrpc import document
from snode.rpc.signatures import SIGNATURES

DOC = Path(__file__).resolve().parents[2] / "docs" / "openrpc.json"


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
