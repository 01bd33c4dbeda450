"""`GET /sn/<pubkey>` on the admin port: one service node's page in the web view. Its record (state
in the node table's words, fee, stake, unlock height, credit, proof), its contributors and their
stakes, and from the last HISTORY blocks its rewards and its state changes (decommissions with
their reasons, recommissions, activation, deregistration).

The history is read from the stored blocks and their undo records on the store thread, once per
tip and node (`HistoryCache`: a reload, or a script that GETs the page in a loop, costs no more
block reads until a new block comes); a block
paid the node when its coinbase pays the node's reward split and the node's record before that
block (in the undo record) was payable; a state change is a quorum's StateChange transaction.
"""

from __future__ import annotations

from html import escape
from typing import Final, NamedTuple

from snode.api.records import service_node_state
from snode.core.credit import credit_at
from snode.core.service_nodes import Reason, StateChangeKind, is_payable, reward_split
from snode.core.transactions import StateChange, TxOut
from snode.core.units import format_age, format_coins, format_percent
from snode.node.views import NodeView
from snode.node.writer import ChainWriter
from snode.rpc.web_parts import card, key, page, table

HISTORY: Final = 720
"""Blocks read back for a node's rewards and state changes (a day of mainnet blocks)."""
MAX_HISTORIES: Final = 256
"""Nodes' histories kept for the tip (past it, a page is read anew for each GET)."""


class History(NamedTuple):
    rewards: list[tuple[int, int]]
    """(height, atomic units paid to the node's contributors), newest first."""
    changes: list[tuple[int, str, str]]
    """(height, what, reason), newest first."""
    since: int
    """The lowest height read."""


def node_history(node: NodeView, pubkey: bytes, depth: int = HISTORY) -> History:
    """The node's rewards and state changes in the last `depth` blocks (on the store thread)."""
    rewards, changes = [], []
    lowest = max(node.undo_start, node.height - depth + 1)
    for height in range(node.height, lowest - 1, -1):
        found = node.block_and_undo(height)
        if found is None:
            continue
        block, undo = found
        for tx in block.transactions:
            change = tx.payload
            if isinstance(change, StateChange) and change.sn_pubkey == pubkey:
                changes.append((height, StateChangeKind(change.kind).name.lower(), Reason(change.reason).label))
        before = dict(undo.service_nodes).get(pubkey)
        if before is not None and is_payable(before, height, node.params):
            split = tuple(TxOut(o, a) for o, a in reward_split(before, node.params.block_reward) if a > 0)
            if block.transactions[0].outputs[:len(split)] == split:
                rewards.append((height, sum(out.amount for out in split)))
    return History(rewards, changes, lowest)


def _history_note(node: NodeView, history: History) -> str:
    """A line when the history read stops at the snapshot this node started from."""
    if node.history_start > 1 and history.since == node.undo_start:
        return (f'<p id="history-start"><small>This node started from the snapshot of height '
                f"{node.history_start}: its history before that is not here.</small></p>")
    return ""


class HistoryCache:
    """The histories read at the tip, by node; emptied when the tip moves."""

    def __init__(self) -> None:
        self._tip = b""
        self._histories: dict[bytes, History] = {}

    async def get(self, node: NodeView, writer: ChainWriter, pubkey: bytes) -> History:
        tip = node.state.tip_hash
        if tip != self._tip:
            self._tip, self._histories = tip, {}
        history = self._histories.get(pubkey)
        if history is None:
            history = await writer.call(node_history, node, pubkey)
            # Read at this tip only if the tip did not move while the store thread read it.
            if node.state.tip_hash == tip == self._tip and len(self._histories) < MAX_HISTORIES:
                self._histories[pubkey] = history
        return history


async def node_page(node: NodeView, writer: ChainWriter, text: str, *, now: int,
                    histories: HistoryCache | None = None) -> tuple[int, str]:
    """(HTTP status, page) for `/sn/<text>`: 404 naming the key when no such node is registered;
    the history from `histories` when given."""
    try:
        pubkey = bytes.fromhex(text) if len(text) == 64 else b""
    except ValueError:
        pubkey = b""
    sn = node.state.service_nodes.get(pubkey) if pubkey else None
    if sn is None:
        shown = escape(text[:80])
        body = (f"<h2>No service node {shown}</h2><p>This chain has no service node with that key "
                '(64 hex characters). <a href="/">The list of service nodes</a>.</p>')
        return 404, page("snoded: no such service node", node.params.name, body)
    history = await (histories or HistoryCache()).get(node, writer, pubkey)
    last = node.proofs.last_accepted(pubkey)
    r = service_node_state(sn, node.height, node.params, last_uptime_proof=last,
                           participation=node.participation.of(pubkey))
    unlock = (f"at height {r.requested_unlock_height}" if r.requested_unlock_height else "none requested")
    rows = [
        ("key", key(r.service_node_pubkey)),
        ("status", f'<span class="{r.status}">{r.status}</span>' + (" (payable)" if r.payable else "")),
        ("operator", key(r.operator_address)),
        ("operator fee", f"{format_percent(r.operator_fee)} %"),
        ("staked / required", f"{format_coins(r.total_contributed)} / {format_coins(r.staking_requirement)}"),
        ("registered at", f"height {r.registration_height}"),
        ("unlock", unlock),
        ("downtime credit", f"{credit_at(sn, node.height, node.params)} blocks"),
        ("uptime proof", f"{format_age(now - last)} ago" if last else "none accepted yet"),
        ("decommissions", f"{r.decommission_count}" + (
            f", the last for {escape(r.last_decommission_reason)}" if r.last_decommission_reason else "")),
    ]
    body = "".join([
        f'<div class="cards">{card("Service node", rows, "service-node")}</div>',
        "<h2>Contributors</h2>", table("contributors", [("address", ""), ("staked", "num"), ("reserved", "num")], [
            f'<tr data-amount="{c.amount}"><td>{key(c.address)}</td><td class="num">{format_coins(c.amount)}</td>'
            f'<td class="num">{format_coins(c.reserved) if c.reserved else "-"}</td></tr>' for c in r.contributors],
            "no contributors"),
        f"<h2>Rewards since height {history.since}</h2>", _history_note(node, history),
        table("rewards", [("height", "num"), ("paid", "num")], [
            f'<tr data-height="{h}" data-amount="{a}"><td class="num">{h}</td>'
            f'<td class="num">{format_coins(a)}</td></tr>' for h, a in history.rewards], "no reward in these blocks"),
        f"<h2>State changes since height {history.since}</h2>",
        table("state-changes", [("height", "num"), ("change", ""), ("reason", "")], [
            f'<tr data-height="{h}" data-change="{what}" data-reason="{why}"><td class="num">{h}</td>'
            f"<td>{what}</td><td>{escape(why) or '-'}</td></tr>" for h, what, why in history.changes],
            "no state change in these blocks"),
    ])
    return 200, page(f"snoded {node.params.name}: service node {r.service_node_pubkey[:16]}", node.params.name, body)
