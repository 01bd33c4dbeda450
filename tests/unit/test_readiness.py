"""Readiness for the next fork (issue #34 item 6, `node.readiness`): which proofs say a node
knows the fork, and the operator's summary line."""

from __future__ import annotations

import dataclasses

import msgspec

from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.own_proof import Identity
from snode.node.readiness import knows, next_fork
from snode.node.verifier import InlineVerifier
from snode.params import FAR_AHEAD, REGTEST, TESTNET, V2, Fork
from snode.store.memory import MemoryStore
from tests.unit.conftest import sn_record

V2_AT_20 = Fork(V2, 20)


def test_a_structured_proof_knows_the_fork_at_its_height_with_a_new_enough_snoded():
    assert knows("0.2.0 v2@20", V2_AT_20)
    assert knows("0.3.0 v3@50", V2_AT_20)  # a later fork: it knows this one too
    assert not knows("0.2.0 v2@30", V2_AT_20)  # another schedule
    assert not knows("0.2.0 v1@0", V2_AT_20)
    assert not knows("0.1.0 v2@20", V2_AT_20)


def test_a_free_text_proof_says_only_its_snoded():
    assert knows("0.2.0", V2_AT_20) and knows("0.10.1-dev", V2_AT_20)
    assert not knows("0.1.0", V2_AT_20) and not knows("", V2_AT_20) and not knows("snoded", V2_AT_20)


def _node(params) -> Node:
    from tests.unit.conftest import new_chain
    chain = new_chain()
    params = dataclasses.replace(chain.params, forks=params.forks, target_block_time=params.target_block_time)
    return Node(params=params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], chain.state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier())


def test_the_summary_counts_active_nodes_whose_proofs_know_the_fork():
    node = _node(REGTEST.with_test_forks((Fork(V2, 1_440),)))
    keys = [key_from_label(f"ready {i}").public for i in range(3)]
    registry = {k: msgspec.structs.replace(sn_record(), pubkey=k) for k in keys}
    registry[b"\x01" * 32] = msgspec.structs.replace(sn_record(active=False), pubkey=b"\x01" * 32)
    node._state = dataclasses.replace(node.state, service_nodes=node.state.service_nodes.update(registry))
    node.sn_versions.update({keys[0]: "0.2.0 v2@1440", keys[1]: "0.2.0", keys[2]: "0.1.0 v2@1440"})
    info = next_fork(node)
    assert info is not None
    assert (info["active_sns"], info["ready_sns"], info["this_node"]) == (3, 2, "ready")
    assert info["summary"].startswith(f"fork v2 at 1,440 (in {1_439 - node.height} blocks): 2 of 3 active SNs ready; "
                                      "this node: ready")
    node.own_proof.advertised = (0, 1, 0)
    assert next_fork(node)["this_node"] == "outdated (snoded 0.1.0, 0.2.0 needed)"  # type: ignore[index]


def test_a_service_node_counts_itself_by_its_own_schedule():
    node = _node(REGTEST.with_test_forks((Fork(V2, 1_440),)))
    own, peer = key_from_label("own"), key_from_label("peer").public
    node.identity = Identity(own, "203.0.113.9", 1, 2)
    registry = {k: msgspec.structs.replace(sn_record(), pubkey=k) for k in (own.public, peer)}
    node._state = dataclasses.replace(node.state, service_nodes=node.state.service_nodes.update(registry))
    node.sn_versions[peer] = "0.2.0 v2@1440"  # its own proofs are never in sn_versions
    info = next_fork(node)
    assert info is not None and (info["active_sns"], info["ready_sns"]) == (2, 2)
    node.own_proof.advertised = (0, 1, 0)
    assert next_fork(node)["ready_sns"] == 1  # type: ignore[index]


def test_a_fork_only_known_far_ahead_is_not_shown():
    assert TESTNET.forks[-1].height == FAR_AHEAD
    assert next_fork(_node(TESTNET)) is None
