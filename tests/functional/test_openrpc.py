"""The OpenRPC document against a real daemon: every method it names is served, nothing else is,
and what the read methods answer decodes into the result records it documents."""

from __future__ import annotations

import json

import msgspec

from snode.api import errors as E
from snode.rpc.openrpc import _result_type, document
from snode.rpc.signatures import SIGNATURES
from tests.functional.framework import assert_equal, assert_raises_rpc_error, narrator

log = narrator(__name__)
EFFECTS = {"stop_daemon", "generate_blocks", "set_mock_time", "add_peer", "send_uptime_proof"}
"""Valid calls with effects: checked to exist, not called with their parameters."""


def test_every_documented_method_is_served_and_answers_its_documented_record(sn):
    sn.generate_blocks(blocks=2)
    doc = document()
    for method in doc["methods"]:
        name = method["name"]
        if name in EFFECTS or method["params"]:
            log.info("%s: served (a call without its parameters is refused as such, not unknown)", name)
            try:
                sn.rpc.call(name, {"no_such_param_for_the_contract_test": 1})
            except Exception as err:  # noqa: BLE001 - any refusal but 'method not found'
                assert "Method not found" not in str(err), (name, err)
            continue
        result = sn.rpc.call(name, None)
        msgspec.convert(result, _result_type(SIGNATURES[name][0]))
    for name, params in (("get_block", {"height": 1}), ("get_service_nodes", {})):
        msgspec.convert(sn.rpc.call(name, params), _result_type(SIGNATURES[name][0]))
    log.info("A name the document does not have is not served")
    assert_raises_rpc_error(E.METHOD_NOT_FOUND, "Method not found", sn.rpc.call, "get_everything", None)


def test_rpc_discover_answers_the_document(sn):
    log.info("rpc.discover (OpenRPC's service discovery) answers docs/openrpc.json's document")
    assert_equal(sn.rpc.call("rpc.discover", None), json.loads(json.dumps(document())))
    assert_equal(sn.rpc.call("rpc.discover", []), sn.rpc.call("rpc.discover", {}))
    assert_raises_rpc_error(E.INVALID_PARAMS, "Invalid params: rpc.discover takes no parameters",
                            sn.rpc.call, "rpc.discover", {"verbose": True})
