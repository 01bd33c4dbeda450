"""Tables operators read: the service-node list of snode-cli `nodes` and of the walkthrough, and
the block list of snode-cli `blocks`.

Input is plain record dicts shaped like `get_service_nodes` records (specification section 2.1),
so the same code renders what the RPC returns and what the walkthrough derives from the core.
On a terminal the tables are coloured; in pipes, files and CI logs they are plain text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from snode.api.types import BlockResult
from snode.core.service_nodes import Status, status
from snode.core.units import format_age, format_coins, format_percent

PLAIN_WIDTH: Final = 160
"""Width used when the output is not a terminal: wide enough for the node table on one line."""

SHORT_KEY_CHARS: Final = 12

_STATUS_STYLE: Final = {Status.ACTIVE: "green", Status.DECOMM: "red", Status.AWAIT: "yellow"}


def make_console(file: TextIO | None = None) -> Console:
    """A console that colours a terminal and writes plain text to pipes, files and CI logs.

    `file` None means the current `sys.stdout` at the time of each write.
    """
    console = Console(file=file, highlight=False)
    if not console.is_terminal:
        console = Console(file=file, highlight=False, width=PLAIN_WIDTH)
    return console


def short_key(hex_key: str) -> str:
    """A public key shortened for a table column (its first characters, like a short git hash)."""
    return hex_key if len(hex_key) <= SHORT_KEY_CHARS else f"{hex_key[:SHORT_KEY_CHARS]}..."


def yes_no(flag: bool) -> str:
    """A boolean as an operator reads it."""
    return "yes" if flag else "no"


def proof_age(last_uptime_proof: int, now: int) -> str:
    """Time since the last accepted uptime proof, like `45s`, `1m05s` or `2h03m`; `never` for 0."""
    return format_age(now - last_uptime_proof) if last_uptime_proof else "never"


class _Flags(NamedTuple):
    # The core's status rule reads only these two flags of a node.
    active: bool
    funded: bool


def record_status(record: Mapping[str, Any]) -> Status:
    """Active / Decomm / Await of a `get_service_nodes` record, by the core's rule."""
    # status() reads only .active and .funded; a record dict is not a ServiceNode.
    return status(_Flags(active=bool(record["active"]), funded=bool(record["funded"])))  # type: ignore[arg-type]


def service_node_table(records: Iterable[Mapping[str, Any]], *, now: int | None = None) -> Table:
    """The service-node table: one row per `get_service_nodes` record.

    With `now` (Unix seconds) a `proof` column shows the age of each node's last accepted uptime
    proof.
    """
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("pubkey", no_wrap=True)
    table.add_column("status", no_wrap=True)
    # Funded and active are what the status says (Await: not funded; Decomm: funded, not active).
    table.add_column("payable", no_wrap=True)
    table.add_column("reg. height", justify="right", no_wrap=True)
    table.add_column("staked / required", justify="right", no_wrap=True)
    table.add_column("fee %", justify="right", no_wrap=True)
    table.add_column("contributors", justify="right", no_wrap=True)
    table.add_column("decomms", justify="right", no_wrap=True)
    if now is not None:
        table.add_column("proof", justify="right", no_wrap=True)
    records = list(records)
    # The daemon's records name the last quorum verdict; the walkthrough's (spec fields only) do not.
    with_reason = any("last_state_change_reason" in r for r in records)
    if with_reason:
        table.add_column("last change", no_wrap=True)
        table.add_column("credit", justify="right", no_wrap=True)
        table.add_column("unlock", justify="right", no_wrap=True)
    for r in records:
        state = record_status(r)
        row = [
            short_key(r["service_node_pubkey"]),
            f"[{_STATUS_STYLE[state]}]{state.value}[/]",
            yes_no(r["payable"]),
            str(r["registration_height"]),
            f"{format_coins(r['total_contributed'])} / {format_coins(r['staking_requirement'])}",
            format_percent(r.get("operator_fee") or 0),
            str(len(r["contributors"])),
            str(r["decommission_count"]),
        ]
        if now is not None:
            row.append(proof_age(r["last_uptime_proof"], now))
        if with_reason:
            row.append(r.get("last_state_change_reason") or "-")
            # Downtime credit in blocks, the RPC's number for every node (an Await node's is the
            # credit it starts with); the unlock height once a contributor asked to unlock.
            row.append(str(r.get("earned_downtime_blocks", 0)))
            row.append(str(r.get("requested_unlock_height") or "-"))
        table.add_row(*row)
    return table


def block_table(blocks: Sequence[BlockResult], *, now: int) -> Table:
    """The `snode-cli blocks` table: one row per block, the newest first; `*` marks a block a
    checkpoint stands at or above (final once two do)."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    for column, justify in (("height", "right"), ("age", "right"), ("producer", "left"),
                            ("round", "right"), ("signatures", "right"), ("txs", "right"),
                            ("checkpointed", "left")):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]  # rich's Literal
    for b in blocks:
        producer = b.producer if b.producer == "authority" else b.producer[:SHORT_KEY_CHARS]
        signatures = f"{len(b.validators)}/{b.validator_count}" if b.validator_count else "-"
        carries = f"carries {b.checkpoint}" if b.checkpoint is not None else ""
        mark = " ".join(filter(None, ("*" if b.checkpointed else "", carries)))
        table.add_row(str(b.height), format_age(now - b.timestamp), producer, str(b.round),
                      signatures, str(len(b.tx_ids)), mark)
    return table
