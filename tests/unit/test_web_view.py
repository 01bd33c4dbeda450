"""The web view's page (`rpc.web_view.render_page`) on an in-memory node: every URL parameter is
either one of the page's own values or ignored, never echoed unescaped; sorting and filtering
choose rows; every key is shown whole; the page's one script is the live-update script."""

from __future__ import annotations

import asyncio

from snode.core.service_nodes import StateChangeKind
from snode.devchain import key_from_label
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.node.writer import ChainWriter
from snode.rpc.web_node import node_history, node_page
from snode.rpc.web_parts import LIVE_SCRIPT
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
    assert "<script>alert" not in html and "<img" not in html and "<b>" not in html
    assert html.count("<script") == 1 and f"<script>{LIVE_SCRIPT}</script>" in html
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


def test_every_key_is_whole_and_links_to_its_page():
    node, active, pool = _node_with_two_nodes()
    html = render_page(node, peer_count=0, now=0, query={})
    for pubkey in (active.hex(), pool.hex()):
        assert f'<code class="key">{pubkey}</code> <a class="sn-page" href="/sn/{pubkey}">' in html
    assert "&hellip;" not in html


def _replayed(chain) -> Node:
    """A node that adopted every block of `chain` (so its store has them and their undo records)."""
    start = chain.fork(at=0)
    node = Node(params=chain.params, consensus=chain.consensus, store=MemoryStore(chain.blocks[0], start.state),
                state=start.state, identity=None, producer_key=None, verifier=InlineVerifier())
    node.accept_blocks(chain.blocks[1:], now=chain.blocks[-1].header.timestamp + 1)
    return node


def test_a_nodes_history_has_its_rewards_and_its_decommissions_with_reasons():
    chain = new_chain()
    operator = key_from_label("operator")
    mine = chain.new_node(operator="operator", sn_label="history a")
    other = chain.new_node(operator="alice", sn_label="history b")
    activated = chain.change_state(mine, StateChangeKind.ACTIVATE)
    chain.change_state(other, StateChangeKind.ACTIVATE)
    chain.mine(12)
    decommissioned = chain.change_state(mine, StateChangeKind.DECOMMISSION)
    chain.mine(3)
    recommissioned = chain.change_state(mine, StateChangeKind.RECOMMISSION)
    chain.mine(6)
    node = _replayed(chain)
    history = node_history(node, mine)
    assert history.changes == [(recommissioned, "recommission", "uptime_proofs_resumed"),
                               (decommissioned, "decommission", "missed_uptime_proofs"),
                               (activated, "activate", "first_uptime_proof")]
    paid = [b.header.height for b in chain.blocks[1:] if b.transactions[0].outputs[0].owner == operator.public]
    assert paid and [h for h, _ in history.rewards] == sorted(paid, reverse=True)
    assert {a for _, a in history.rewards} == {chain.params.block_reward}
    assert recommissioned not in paid, "a recommission is not a reward"
    assert node_history(node, mine, depth=2).since == node.height - 1


def test_the_page_of_a_node_and_of_an_unknown_key():
    chain = new_chain()
    mine = chain.new_node(operator="operator", sn_label="page a", fee_ppm=50_000)
    chain.change_state(mine, StateChangeKind.ACTIVATE)
    chain.mine(2)
    node = _replayed(chain)

    writer = ChainWriter(node)  # no executor: its calls run inline
    status, html = asyncio.run(node_page(node, writer, mine.hex(), now=0))
    assert status == 200 and f'<code class="key">{mine.hex()}</code>' in html
    assert 'data-change="activate" data-reason="first_uptime_proof"' in html and "<dd>5 %</dd>" in html
    assert html.count('<tr data-amount=') == 1, "one contributor, the operator"
    for bad in ("00" * 32, "zz" * 32, "<script>" * 8):
        status, html = asyncio.run(node_page(node, writer, bad, now=0))
        assert status == 404 and "<script>&lt;" not in html and "No service node" in html


def test_a_nodes_page_reads_its_history_once_per_tip():
    """Issue #33 item 9: every GET of /sn/<key> read HISTORY blocks and their undo records on the
    store thread; now once per tip and node, again after a new block."""
    from snode.rpc.web_view import WebView

    chain = new_chain()
    mine = chain.new_node(operator="operator", sn_label="page cache", fee_ppm=50_000)
    chain.change_state(mine, StateChangeKind.ACTIVATE)
    chain.mine(2)
    node = _replayed(chain)
    reads: list[int] = []
    block_and_undo = node.block_and_undo

    def counted(height: int):  # noqa: ANN202  (block_and_undo's own answer)
        reads.append(height)
        return block_and_undo(height)

    node.block_and_undo = counted  # type: ignore[method-assign]
    view = WebView(node, ChainWriter(node), lambda: 0)
    first = asyncio.run(view.serve(f"/sn/{mine.hex()}", {}))
    once = len(reads)
    assert once == node.height and first[0] == 200
    for _ in range(3):
        assert asyncio.run(view.serve(f"/sn/{mine.hex()}", {})) == first
    assert len(reads) == once, "the same tip: no block read again"
