"""Fuzzing the admin RPC of a real daemon: thousands of generated bodies, envelopes and params.

No request may get HTTP 500 or kill the connection handling, and the daemon must keep
answering get_info afterwards. stop_daemon and generate_blocks are left out: they are valid
calls with effects, not bad input.

One daemon serves the whole module; the fuzzing test narrates once, in that fixture, rather than
once per generated body.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from snode.rpc.openrpc import document
from snode.rpc.signatures import SIGNATURES
from tests.functional.figures import write_figures
from tests.functional.framework import TestNode, assert_equal, fuzz_settings, narrator

log = narrator(__name__)

EFFECTS = {"stop_daemon", "generate_blocks", "set_mock_time", "add_peer"}
"""Valid calls with effects (add_peer would dial whatever address it is given): left out."""
METHODS = [m for m in SIGNATURES if m not in EFFECTS] + ["no_such_method", ""]
"""Every method of the OpenRPC document (docs/openrpc.json) but those, and unknown names."""
EXAMPLES = int(os.environ.get("SNODE_FUZZ_EXAMPLES", "2000"))
SENT: list[int] = []
"""Bodies sent (hypothesis may stop before max_examples)."""

json_scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
                | st.text(max_size=40))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=20,
)
param_names = st.sampled_from(sorted({p["name"] for m in document()["methods"] for p in m["params"]}
                                      | {"no_such_param"}))
params = st.dictionaries(param_names, json_values, max_size=4) | json_values
envelopes = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2]), "method": st.sampled_from(METHODS) | json_scalars},
    optional={"id": json_scalars, "params": params},
)
bodies = (
    envelopes.map(json.dumps)
    | st.lists(envelopes, max_size=4).map(json.dumps)
    | st.binary(max_size=200)
    | json_values.map(json.dumps)
)


@pytest.fixture(scope="module")
def fuzz_node(tmp_path_factory):
    log.info("Start one service node for the whole module")
    node = TestNode(0, tmp_path_factory.mktemp("fuzz"), extra_args=["--service-node"])
    node.start()
    node.generate_blocks(blocks=2)
    tip_before = node.get_height()
    log.info("Send it up to %d generated bodies: none may get HTTP 500 or an internal error", EXAMPLES)
    yield node, tip_before
    log.info("Stop it: it must exit with status 0")
    try:
        assert_equal(node.stop(), 0)
    finally:
        node.kill()


@pytest.mark.slow
def test_no_request_gets_http_500_and_the_daemon_still_answers(fuzz_node):
    """One test, so that the checks after the fuzzing run on the daemon that was fuzzed
    (pytest-xdist may hand two tests of a module to two workers, each with its own daemon)."""
    fuzz_node, tip_before = fuzz_node
    @fuzz_settings(EXAMPLES)
    @given(body=bodies)
    def one(body):
        SENT.append(len(body))
        status, _, data = fuzz_node.rpc.raw(body)
        assert status in (200, 204), (status, body, data[:200])
        if status == 200:
            reply = json.loads(data)
            replies = reply if isinstance(reply, list) else [reply]
            for r in replies:
                assert ("result" in r) != ("error" in r), r
                if "error" in r:
                    assert r["error"]["code"] != -32603, f"internal error for {body!r}: {r}"
    one()
    log.info("After the fuzzing the daemon still answers get_info, and its chain is unchanged")
    assert_equal(fuzz_node.get_info()["target_height"], 0)
    assert_equal(fuzz_node.get_height(), tip_before)
    assert fuzz_node.running
    write_figures("admin RPC fuzzing", {"requests": len(SENT), "http_500": 0, "internal_errors": 0,
                                        "crashes": 0, "chain_unchanged": True})
