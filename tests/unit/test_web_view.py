"""The web view's page (`rpc.web_view.render_page`) on an in-memory node: every URL parameter is
either one of the page's own values or ignored, never echoed unescaped; sorting and filtering
choose rows; the page has no script."""

from __future__ import annotations

from snode.core.service_nodes import StateChangeKind
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.rpc.web_view import render_page
from snode.store.memory import MemoryStore
from tests.unit.conftest import POOL_MINIMUM, new_chain


def _node_with_two_nodes() -> tuple[Node, bytes, bytes]:
    chain = new_chain()
    active = chain.new_node(operator="operator", sn_label="web a")
    chain.change_state(active, StateChangeKind.ACTIVATE)
    pool = chain.new_node(operator="alice", sn_label="web b", amount=POOL_MINIMUM)
    genesis = chain.blocks[0]
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(genesis, chain.fork(at=0).state),
                state=chain.state, identity=None, producer_key=None, verifier=InlineVerifier())
    return node, active, pool


def test_hostile_parameters_are_never_echoed():
    node, _, _ = _node_with_two_nodes()
    html = render_page(node, peer_count=0, now=0, query={
        "status": "<script>alert(1)</script>", "sort": "\"><img src=x>", "order": "<b>"})
    assert "<script" not in html and "<img" not in html and "<b>" not in html
    assert html.count("data-pubkey=") == 2  # an unknown status filters nothing


def test_filter_and_sort_choose_the_rows():
    node, active, pool = _node_with_two_nodes()
    only_await = render_page(node, peer_count=0, now=0, query={"status": "Await"})
    assert pool.hex() in only_await and f'data-pubkey="{active.hex()}"' not in only_await
    ascending = render_page(node, peer_count=0, now=0, query={"sort": "staked", "order": "asc"})
    assert ascending.index(pool.hex()) < ascending.index(f'data-pubkey="{active.hex()}"')
    descending = render_page(node, peer_count=0, now=0, query={"sort": "staked", "order": "desc"})
    assert descending.index(f'data-pubkey="{active.hex()}"') < descending.index(f'data-pubkey="{pool.hex()}"')
    assert "service node</dt><dd>no" in descending  # this daemon runs no service node
