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

from snode.core.blocks import Block, block_hash
from snode.core.crypto import verify
from snode.core.participation import Participation, Update, block_updates, recorded
from snode.core.pulse import round_quorum, validator_message
from snode.core.round_messages import ValidatorSignature
from snode.core.state import ChainState
from snode.params import NetworkParams

LIVE_SECONDS: Final = 120
"""A block adopted within this long of its timestamp is judged for participation."""
WITNESSED_PER_VALIDATOR: Final = 4
"""Signatures of one validator held for the next height: one per round it validates (rounds
move on when a leader is silent), so a member cannot grow the table beyond its own share."""


class ParticipationBook:
    """Participation records by service-node public key."""

    def __init__(self, params: NetworkParams) -> None:
        self._params = params
        self._records: dict[bytes, Participation] = {}
        self._witnessed: dict[bytes, dict[bytes, bytes]] = {}
        """Block hash -> validator -> its signature, for the next height only (`witness`)."""
        self._witnessed_height = 0
        self._held: dict[bytes, int] = {}
        """Validator -> how many of its signatures `_witnessed` holds."""
        self.version = 0
        """Counts changes of the records (`Node.revision`)."""

    def of(self, pubkey: bytes) -> Participation:
        """The node's record (empty if it has had no duty yet)."""
        return self._records.get(pubkey) or Participation()

    def record(self, updates: Iterable[Update], at: int) -> None:
        """Note the duties a block stamped `at` settled."""
        self._records.update(recorded(self._records, updates, self._params, at))
        self.version += 1

    def witness(self, signature: ValidatorSignature, tip_height: int) -> None:
        """A validator's signature of a template of the next height, as it sent it to this node
        (quorumnet ties it to its sender): held unverified until that height's block comes, and
        checked only if the block leaves its signer out."""
        height = tip_height + 1
        if signature.height != height:
            return
        if self._witnessed_height != height:
            self._witnessed, self._held, self._witnessed_height = {}, {}, height
        signers = self._witnessed.setdefault(signature.block_hash, {})
        if signature.validator in signers:
            return
        if self._held.get(signature.validator, 0) >= WITNESSED_PER_VALIDATOR:
            return
        self._held[signature.validator] = self._held.get(signature.validator, 0) + 1
        signers[signature.validator] = signature.signature

    def record_block(self, parent: ChainState, block: Block) -> None:
        """Note the duties `block` (on `parent`) settled: its signers done, and also each
        validator it leaves out whose signature of this very block reached this node before
        the block did (docs/PARTICIPATION.md "Framing")."""
        header = block.header
        this_hash = block_hash(header)
        witnessed = 0
        held = self._witnessed.get(this_hash) if header.height == self._witnessed_height else None
        if held and header.producer in parent.service_nodes:
            message = validator_message(self._params.network_id, this_hash)
            validators = round_quorum(parent, header.round, self._params).validators
            for i, validator in enumerate(validators):
                signature = held.get(validator)
                if (signature is not None and not block.validator_bitset >> i & 1
                        and verify(validator, message, signature)):
                    witnessed |= 1 << i
        self.record(block_updates(parent, block, self._params, witnessed), header.timestamp)

    def keep_active(self, state: ChainState, changed: Iterable[bytes] | None = None) -> None:
        """Forget the records of nodes that are no longer active. `changed`: the only nodes
        whose records may have changed since the last call (the blocks' undo records name
        them), so that a block costs what it changed, not a pass over every record; None
        looks at every record (after a reorganisation)."""
        registry = state.service_nodes
        keys = self._records if changed is None else [k for k in changed if k in self._records]
        for key in [k for k in keys if (sn := registry.get(k)) is None or not sn.active]:
            del self._records[key]
            self.version += 1
