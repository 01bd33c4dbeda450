"""The operator's status line and its `SN:` word, from what the node shows (`views.NodeView`).

The line is the specification's (`v<version>; Height: <n>, SN: <state>, proof: <age>`), then what
the operator must act on: why peers refuse this node's proofs, a fork this build does not know,
the downtime credit running short (`Node.status_line` and `Node.sn_state_word` give them).
"""

from __future__ import annotations

from snode import __version__
from snode.common.text import STATUS_LINE_LIMIT, printable
from snode.core.service_nodes import status_words
from snode.core.standing import departure_words
from snode.core.units import format_age
from snode.node.views import NodeView


def sn_state_word(node: NodeView) -> str:
    """The status line's `SN:` state: `no` (not a service node), the node table's word
    (`service_nodes.status_words`), or for a key not in the registry: `registration pending`
    (one waits in the mempool), how it left (`standing.departure_words`), else `not registered`."""
    if node.identity is None:
        return "no"
    record = node.state.service_nodes.get(node.identity.key.public)
    if record is not None:
        return status_words(record)
    if node.registration_pending():
        return "registration pending"
    if node.departure is not None:
        return departure_words(node.departure, node.height, node.params)
    return "not registered"


def status_line(node: NodeView, now: int) -> str:
    """`v<version>; Height: <n>, SN: <state>, proof: <age>` (the specification's fields,
    always), then `, refused: <why>` while peers refuse this node's proofs, and the credit's
    warning while it is short of an outage (`standing.credit_warning`); escaped (`common.text`)."""
    # The network's view: the last proof a peer accepted, and why peers refuse the newer
    # ones if they do (a proof this node signed and sent is not yet a proof).
    last = node.proofs.last_accepted(node.identity.key.public) if node.identity is not None else 0
    line = (f"v{__version__}; Height: {node.height}, SN: {sn_state_word(node)}, "
            f"proof: {format_age(now - last) if last else 'never'}")
    if node.refused_reason:
        line += f", refused: {node.refused_reason}"
    upgrade = node.upgrade.status_part(node.height, now)
    if upgrade:
        line += f", {upgrade}"
    if node.snapshot_download is not None and not node.snapshot_download.done:
        line += f", {node.snapshot_download.words()}"
    elif node.history_percent < 100 and node.backfilled:
        line += f", history: {node.history_percent} %"
    elif node.history_checked and not node.history_verified:
        line += f", history check: {node.history_check_percent} %"
    warning = node.credit_warning()
    if warning:
        line += f", {warning}"
    return printable(line, STATUS_LINE_LIMIT)
