"""`GET /` on the admin port: a read-only page of the chain, this node and the service-node list.

Rendered on the server and complete without JavaScript: it refreshes itself every REFRESH
seconds, sorts and filters by links (`?status=Active&sort=fee&order=desc`), and every value in
it is escaped. It changes nothing: the admin port's other protections (loopback, Host check)
apply to it as to the RPC.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any, Final
from urllib.parse import urlencode

from snode import __version__
from snode.api.records import service_node_state
from snode.api.types import ServiceNodeState, sync_state
from snode.core.credit import credit_at
from snode.core.service_nodes import status_words
from snode.core.units import format_age, format_coins, format_percent
from snode.node.node import Node

REFRESH: Final = 10
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

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24;background:#fafbfc}
h1{font-size:1.3em;margin:0 0 .6em}h2{font-size:1.05em;margin:1.4em 0 .4em}
.cards{display:flex;gap:1em;flex-wrap:wrap}.card{background:#fff;border:1px solid #d0d7de;
border-radius:6px;padding:.7em 1em;min-width:16em}.card h2{margin-top:0}
.card dt{color:#57606a;float:left;width:10.5em}.card dd{margin:0 0 .2em 10.5em}
table{border-collapse:collapse;background:#fff;width:100%}
th,td{border-bottom:1px solid #d8dee4;padding:.3em .6em;text-align:left;white-space:nowrap}
th a{color:inherit}td.num,th.num{text-align:right}.Active{color:#1a7f37}.Decomm{color:#bf8700}
.Await{color:#57606a}.bad{color:#cf222e}nav a{margin-right:.8em}code{font-size:.95em}
"""


def render_page(node: Node, *, peer_count: int, now: int, query: Mapping[str, str]) -> str:
    """The whole page for one request (`query`: its URL parameters)."""
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
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{REFRESH}">',
        f"<title>snoded {escape(node.params.name)} {height}</title><style>{_STYLE}</style></head><body>",
        f"<h1>snoded v{escape(__version__)} &middot; {escape(node.params.name)}</h1>",
        '<div class="cards">', _chain_card(node, peer_count), _node_card(node, now), "</div>",
        _table(shown, len(records), now, status, sort, order),
        f"<p><small>Read-only; refreshes every {REFRESH} s. Height {height}.</small></p></body></html>",
    ]
    return "".join(parts)


def _card(title: str, rows: list[tuple[str, str]], ident: str) -> str:
    items = "".join(f"<dt>{escape(k)}</dt><dd>{v}</dd>" for k, v in rows)
    return f'<section class="card" id="{ident}"><h2>{escape(title)}</h2><dl>{items}</dl></section>'


def _chain_card(node: Node, peer_count: int) -> str:
    target = node.target_height
    return _card("Chain", [
        ("height", f'<span id="height">{node.height}</span>'),
        ("target", str(target) if target else sync_state(node.params.name, 0, peer_count)),
        ("block production", escape(node.production_mode.value)),
        ("immutable height", str(node.immutable_height)),
        ("peers", str(peer_count)),
    ], "chain")


def _node_card(node: Node, now: int) -> str:
    ident = node.identity
    if ident is None:
        return _card("This node", [("service node", "no (started without --service-node)")], "this-node")
    pubkey = ident.key.public
    sn = node.state.service_nodes.get(pubkey)
    rows = [("key", f"<code>{pubkey.hex()[:16]}&hellip;</code>")]
    if sn is None:
        return _card("This node", rows + [("status", "not registered")], "this-node")
    record = service_node_state(sn, node.height, node.params, last_uptime_proof=node.proofs.last_accepted(pubkey))
    last = node.proofs.last_accepted(pubkey)
    proof = f"{format_age(now - last)} ago, accepted by the network" if last else "none accepted yet"
    refused = node.proofs.own_refused_reason
    if refused:
        proof += f' &middot; <span class="bad">refused: {escape(refused)}</span>'
    rows += [
        ("status", f'<span class="{record.status}">{escape(status_words(sn))}</span>'),
        ("uptime proof", proof),
        ("payable", "yes" if record.payable else "no"),
        ("downtime credit", f"{credit_at(sn, node.height, node.params)} blocks"),
        ("unlock", f"at height {sn.requested_unlock_height}" if sn.requested_unlock_height else "none requested"),
    ]
    return _card("This node", rows, "this-node")


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
    for label, key, cls in heads:
        flip = "desc" if sort == key and order == "asc" else "asc"
        cells.append(f'<th class="{cls}">{_link(label, {**base, "sort": key, "order": flip})}</th>')
    body = "".join(_row(r, now) for r in rows) or '<tr><td colspan="7">no service nodes</td></tr>'
    return (f'<h2>Service nodes</h2><nav id="filters">{nav}</nav>'
            f'<table id="service-nodes"><thead><tr>{"".join(cells)}</tr></thead><tbody>{body}</tbody></table>')


def _row(r: ServiceNodeState, now: int) -> str:
    proof = format_age(now - r.last_uptime_proof) if r.last_uptime_proof else "never"
    values: list[tuple[str, Any]] = [
        ("", f"<code>{escape(r.service_node_pubkey[:16])}&hellip;</code>"),
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
