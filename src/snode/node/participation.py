"""ParticipationBook: this node's view of every service node's block-production duties.

Updated by the node (`Node._adopt`) from each block it adopts live (not during a sync: a block
more than `LIVE_SECONDS` old when it arrives says nothing about how its validators are doing
now, as in Oxen); read by the obligations judge (`services.sn_duties`) and the RPC. A node that
leaves the active set loses its record: it has no duties while inactive, and comes back with a
clean window.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from snode.core.participation import Participation, Update, recorded
from snode.core.state import ChainState
from snode.params import NetworkParams

LIVE_SECONDS: Final = 120
"""A block adopted within this long of its timestamp is judged for participation."""


class ParticipationBook:
    """Participation records by service-node public key."""

    def __init__(self, params: NetworkParams) -> None:
        self._params = params
        self._records: dict[bytes, Participation] = {}

    def of(self, pubkey: bytes) -> Participation:
        """The node's record (empty if it has had no duty yet)."""
        return self._records.get(pubkey) or Participation()

    def record(self, updates: Iterable[Update], at: int) -> None:
        """Note the duties a block stamped `at` settled."""
        self._records.update(recorded(self._records, updates, self._params, at))

    def keep_active(self, state: ChainState, changed: Iterable[bytes] | None = None) -> None:
        """Forget the records of nodes that are no longer active. `changed`: the only nodes
        whose records may have changed since the last call (the blocks' undo records name
        them), so that a block costs what it changed, not a pass over every record; None
        looks at every record (after a reorganisation)."""
        registry = state.service_nodes
        keys = self._records if changed is None else [k for k in changed if k in self._records]
        for key in [k for k in keys if (sn := registry.get(k)) is None or not sn.active]:
            del self._records[key]
