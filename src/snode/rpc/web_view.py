"""`GET /` on the admin port: a read-only page of the chain, this node, the last blocks and the
service-node list; `GET /sn/<pubkey>`: a page per service node (rpc.web_node).

Rendered on the server and complete without JavaScript: it sorts and filters by links
(`?status=Active&sort=fee&order=desc`), shows every key whole, and every value in it is escaped.
Its one script (rpc.web_parts) keeps it current from `/events` without a reload and adds copy
buttons. It changes nothing: the admin port's other protections (loopback, Host check) apply
to it as to the RPC.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from html import escape
from typing import Any, Final
from urllib.parse import urlencode

from snode.api.records import service_node_state
from snode.api.types import BlockResult, ServiceNodeState, sync_state
from snode.core.credit import credit_at
from snode.core.service_nodes import status_words
from snode.core.state import ServiceNode
from snode.core.units import format_age, format_coins, format_percent
from snode.node.readiness import next_fork
from snode.node.views import NodeView
from snode.node.writer import ChainWriter
from snode.rpc.methods import block_result
from snode.rpc.web_node import HistoryCache, node_page
from snode.rpc.web_parts import card, key, node_link, page, table

LAST_BLOCKS: Final = 12
SORTS: Final = {
    "pubkey": lambda r: r.service_node_pubkey,
    "status": lambda r: r.status,
    "fee": lambda r: r.operator_fee,
    "contributors": lambda r: len(r.contributors),
    "staked": lambda r: r.total_contributed,
    "proof": lambda r: -r.last_uptime_proof,
    "reason": lambda r: r.last_state_change_reason,
    "height": lambda r: r.registration_height,
}
STATUSES: Final = ("Active", "Decomm", "Await")
"""The node table's words for a node's state (`snode-cli nodes`, the status line)."""


class WebView:
    """The pages, read from the node (and its store, on the store thread, for blocks)."""

    def __init__(self, node: NodeView, writer: ChainWriter, peer_count: Callable[[], int]) -> None:
        self.node = node
        self.writer = writer
        self.peer_count = peer_count
        self.histories = HistoryCache()

    async def serve(self, path: str, query: Mapping[str, str]) -> tuple[int, str]:
        """(HTTP status, page) for a GET of `path`."""
        node = self.node
        if path.startswith("/sn/"):
            return await node_page(node, self.writer, path[len("/sn/"):], now=node.now(), histories=self.histories)
        blocks = await self.writer.call(last_blocks, node, LAST_BLOCKS)
        return 200, render_page(node, peer_count=self.peer_count(), now=node.now(), query=query, blocks=blocks)


def last_blocks(node: NodeView, count: int) -> list[BlockResult]:
    """The newest `count` main-chain blocks above genesis, newest first (on the store thread)."""
    found = []
    for height in range(node.height, max(node.undo_start - 1, node.height - count), -1):
        block = node.block_and_undo(height)
        if block is not None:
            found.append(block_result(block[0], block[1], node))
    return found


def render_page(node: NodeView, *, peer_count: int, now: int, query: Mapping[str, str],
                blocks: list[BlockResult] | None = None) -> str:
    """The main page for one request (`query`: its URL parameters)."""
    height = node.height
    records = [service_node_state(sn, height, node.params, last_uptime_proof=node.proofs.last_accepted(pk),
                                  participation=node.participation.of(pk))
               for pk, sn in node.state.service_nodes.items()]
    status = query.get("status", "")
    shown = [r for r in records if r.status == status] if status in STATUSES else records
    sort = query.get("sort", "")
    order = query.get("order", "asc")
    if sort in SORTS:
        shown.sort(key=SORTS[sort], reverse=order == "desc")
    body = "".join([
        '<div class="cards">', _chain_card(node, peer_count), _node_card(node, now), "</div>",
        _blocks(blocks or [], now), _history_note(node, blocks or []),
        _table(shown, len(records), now, status, sort, order),
        f'<p><small>Height <span id="tip">{height}</span>.</small></p>',
    ])
    return page(f"snoded {node.params.name} {height}", node.params.name, body)


def _chain_card(node: NodeView, peer_count: int) -> str:
    target = node.target_height
    return card("Chain", [
        ("height", f'<span id="height">{node.height}</span>'),
        ("target", str(target) if target else sync_state(node.params.name, 0, peer_count)),
        ("block production", escape(node.production_mode.value)),
        ("immutable height", str(node.immutable_height)),
        ("peers", str(peer_count)),
        *_fork_rows(node),
    ], "chain")


def _fork_rows(node: NodeView) -> list[tuple[str, str]]:
    """The next fork and its readiness; a fork this node does not know (`node.upgrade`)."""
    rows = []
    fork = next_fork(node)
    if fork is not None:
        rows.append(("next fork", escape(fork["summary"])))
    part = node.upgrade.status_part(node.height, node.now())
    if part:
        rows.append(("upgrade", f"<strong>{escape(part)}</strong>"))
    return rows


def _node_card(node: NodeView, now: int) -> str:
    ident = node.identity
    if ident is None:
        return card("This node", [("service node", "no (started without --service-node)")], "this-node")
    pubkey = ident.key.public
    sn = node.state.service_nodes.get(pubkey)
    rows = [("key", key(pubkey.hex()))]
    if sn is None:  # `registration pending`, how the key left the registry, or `not registered`
        word = node.sn_state_word()
        cls = ' class="bad"' if node.departure is not None and word.startswith("deregistered") else ""
        return card("This node", rows + [("status", f"<span{cls}>{escape(word)}</span>")], "this-node")
    record = service_node_state(sn, node.height, node.params, last_uptime_proof=node.proofs.last_accepted(pubkey))
    last = node.proofs.last_accepted(pubkey)
    proof = f"{format_age(now - last)} ago, accepted by the network" if last else "none accepted yet"
    refused = node.refused_reason
    if refused:
        proof += f' &middot; <span class="bad">refused: {escape(refused)}</span>'
    rows += [
        ("status", f'<span class="{record.status}">{escape(status_words(sn))}</span> '
                   f'<a href="/sn/{pubkey.hex()}">its page</a>'),
        ("uptime proof", proof),
        ("payable", "yes" if record.payable else "no"),
        ("downtime credit", _credit(node, sn)),
        ("unlock", f"at height {sn.requested_unlock_height}" if sn.requested_unlock_height else "none requested"),
    ]
    return card("This node", rows, "this-node")


def _credit(node: NodeView, sn: ServiceNode) -> str:
    """`75 blocks`, or the credit's warning when it is short of an outage (`standing.credit_warning`)."""
    warning = node.credit_warning()
    if warning:
        return f'<span class="bad">{escape(warning)}</span>'
    return f"{credit_at(sn, node.height, node.params)} blocks"


def _history_note(node: NodeView, blocks: list[BlockResult]) -> str:
    """A line when the blocks listed reach the snapshot this node started from (none below)."""
    if node.history_start > 1 and (not blocks or blocks[-1].height == node.undo_start):
        return (f'<p id="history-start"><small>This node started from the snapshot of height '
                f"{node.history_start}: it has no blocks below it.</small></p>")
    return ""


def _blocks(blocks: list[BlockResult], now: int) -> str:
    heads = [("height", "num"), ("age", "num"), ("producer", ""), ("round", "num"), ("signatures", "num"),
             ("checkpointed", ""), ("transactions", "num")]
    rows = []
    for b in blocks:
        producer = node_link(b.producer) if len(b.producer) == 64 else escape(b.producer)
        signatures = f"{len(b.validators)}/{b.validator_count}" if b.validator_count else "-"
        cells = [("num", str(b.height)), ("num", format_age(max(0, now - b.timestamp))), ("", producer),
                 ("num", str(b.round)), ("num", signatures), ("", "yes" if b.checkpointed else "no"),
                 ("num", str(len(b.tx_ids)))]
        tds = "".join(f'<td class="{cls}">{value}</td>' for cls, value in cells)
        rows.append(f'<tr data-height="{b.height}" data-producer="{escape(b.producer)}" data-round="{b.round}" '
                    f'data-signatures="{signatures}" data-checkpointed="{str(b.checkpointed).lower()}">{tds}</tr>')
    return "<h2>Last blocks</h2>" + table("blocks", heads, rows, "no blocks yet")


def _link(label: str, query: dict[str, str], *, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f'<a{attr} href="/?{escape(urlencode(query))}">{escape(label)}</a>'


def _table(rows: list[ServiceNodeState], total: int, now: int, status: str, sort: str, order: str) -> str:
    base = {"status": status} if status else {}
    nav = " ".join([_link(f"all ({total})", {k: v for k, v in {"sort": sort, "order": order}.items() if v})]
                   + [_link(s, {"status": s, **({"sort": sort, "order": order} if sort else {})}) for s in STATUSES])
    heads = [("pubkey", "pubkey", ""), ("status", "status", ""), ("fee %", "fee", "num"),
             ("contributors", "contributors", "num"), ("staked / required", "staked", "num"),
             ("proof age", "proof", "num"), ("last reason", "reason", "")]
    cells = []
    for label, sort_key, cls in heads:
        flip = "desc" if sort == sort_key and order == "asc" else "asc"
        cells.append((_link(label, {**base, "sort": sort_key, "order": flip}), cls))
    return (f'<h2>Service nodes</h2><nav id="filters">{nav}</nav>'
            + table("service-nodes", cells, [_row(r, now) for r in rows], "no service nodes"))


def _row(r: ServiceNodeState, now: int) -> str:
    proof = format_age(now - r.last_uptime_proof) if r.last_uptime_proof else "never"
    values: list[tuple[str, Any]] = [
        ("", node_link(r.service_node_pubkey)),
        (r.status, f'<span class="{r.status}">{r.status}</span>'),
        ("num", format_percent(r.operator_fee)),
        ("num", str(len(r.contributors))),
        ("num", f"{format_coins(r.total_contributed)} / {format_coins(r.staking_requirement)}"),
        ("num", proof),
        ("", escape(r.last_state_change_reason or "-")),
    ]
    tds = "".join(f'<td class="{cls}">{value}</td>' for cls, value in values)
    return (f'<tr data-pubkey="{escape(r.service_node_pubkey)}" data-status="{r.status}" '
            f'data-contributors="{len(r.contributors)}" data-staked="{r.total_contributed}">{tds}</tr>')
