"""The round state machine: one node's part in producing the block of one height
(DESIGN.md section 6), without I/O (h11's way: inputs in, actions out).

The service-node service drives one `RoundMachine` per height, from the parent it builds on, and
drops it when a block for that height is adopted. Inputs are methods that take the time with
every call, so that a message is judged against the round in progress when it arrived: `tick`
(the clock reached `wake_at`), `on_built` (the template the shell built when told to),
`on_template` (a leader's `BlockTemplate`), `on_checked` (the shell's full check of a received
template) and `on_signature` (a validator's `ValidatorSignature`). Each returns the actions for
the shell: `BuildTemplate`, `SendTemplate`, `CheckTemplate`, `SignTemplate`, `Broadcast`,
`RoundFailed`, `Equivocation`. The machine holds no key: the shell signs what it is told to.

The rules, round by round (the round in progress is `pulse.round_at(now)`; rounds only move
forward, whatever the clock does):
- At its round's start the leader asks for a template, sends it to the round's validators and
  collects their signatures; as soon as `needed` distinct validators have signed it (any
  ceil(2/3) of them, not all: Pulse's all-or-nothing stages stalled Oxen, oxen-core #1834) it
  broadcasts the block, and ignores the signatures that come later.
- A validator accepts a template only from the round's leader, for this height and round,
  during the round, with a timestamp in the round's window and the leader's signature; it has
  the shell check it fully and signs it once. A second, different template from the same
  leader for the same round is an equivocation: the validator reports it with both templates
  (each carries the leader's signature, so the report is proof) and signs neither from then on.
- A template for the next round that arrives a little before this node's clock reaches it is
  held until the round begins, so that clocks a few milliseconds apart do not lose a round
  (oxen-core #1334; Oxen queues early messages likewise).
- A signature counts only from a validator of the round, for the template the leader sent,
  once, and only if it verifies.
- A message for another height or another round, or one that arrives after its round ended,
  is ignored: that is what a late or lost message looks like, and it costs nothing.
- When a round ends without this node seeing the block (the shell would have dropped the
  machine), every node reports `RoundFailed` and moves to the next round, with its new leader
  and validators.

The messages (`core.round_messages`) and the actions (`core.round_actions`) live in modules of
their own, which this one names too: the machine's inputs and outputs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from snode.core.blocks import Block, block_hash, producer_message
from snode.core.crypto import verify
from snode.core.encoding import decode, encode
from snode.core.errors import DecodeError
from snode.core.pulse import (
    RoundQuorum,
    round_at,
    round_quorum,
    round_start0,
    round_window,
    signer_set,
    validator_message,
)
from snode.core.round_actions import (  # the actions, named here too: the machine's outputs
    Action,
    Broadcast,
    BuildTemplate,
    CheckTemplate,
    Equivocation,
    RoundFailed,
    SendTemplate,
    SignTemplate,
)
from snode.core.round_messages import BlockTemplate, ValidatorSignature  # its inputs, named here too
from snode.core.state import ChainState, with_index
from snode.params import NetworkParams

SIGNATURE_GRACE: Final = 0.25
"""Once a leader holds the signatures it needs, it waits this share of a round for the other
validators' before it broadcasts (at once when all have signed): a validator that signs a
moment later is not marked as missing its duty (`core.participation`), and a silent one costs
the block only the grace."""
__all__ = [
    "Action", "BlockTemplate", "Broadcast", "BuildTemplate", "CheckTemplate", "Equivocation",
    "Parent", "Role", "RoundFailed", "RoundMachine", "SendTemplate", "SignTemplate",
    "ValidatorSignature", "MAX_EARLY_TEMPLATES", "SIGNATURE_GRACE",
]

MAX_EARLY_TEMPLATES: Final = 2
"""Templates held for a round that has not begun yet (`RoundMachine._hold`)."""


# --- the machine ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Parent:
    """The block the height builds on."""

    height: int
    block_hash: bytes
    timestamp: int
    """Round 0 starts a target block time after it."""


class Role(enum.Enum):
    """This node's part in one round."""

    LEADER = "leader"
    VALIDATOR = "validator"
    OBSERVER = "observer"


@dataclass(frozen=True, slots=True)
class _Proposal:
    """A template and what it decodes to."""

    template: BlockTemplate
    block: Block
    block_hash: bytes


@dataclass(slots=True)
class _Round:
    """What this node knows of the round in progress."""

    number: int
    quorum: RoundQuorum
    """Its leader and validators."""
    role: Role
    """This node's part in it."""
    start: int
    end: int
    """The round's window is [start, end)."""
    proposal: _Proposal | None = None
    """The leader's own template, or the first one a validator accepted."""
    signatures: dict[bytes, bytes] = field(default_factory=dict)
    """Leader: validator -> its verified signature of the template."""
    signed: bool = False
    """Validator: it signed the template."""
    equivocated: bool = False
    """Validator: the leader sent a second template."""
    finished: bool = False
    """Leader: the block is broadcast."""
    ready_at: float | None = None
    """Leader: when it first held `needed` signatures (it waits a grace for the others)."""


class RoundMachine:
    """Block production at one height, as one node (`me`) takes part in it."""

    __slots__ = ("parent", "height", "me", "params", "_quorum_of", "_round", "_early")

    def __init__(
        self, *, parent: Parent, quorum_of: Callable[[int], RoundQuorum], me: bytes,
        params: NetworkParams,
    ) -> None:
        self.parent = parent
        self.height = parent.height + 1
        self.me = me
        self.params = params
        self._quorum_of = quorum_of
        self._round: _Round | None = None
        self._early: list[BlockTemplate] = []
        """Templates for the next round, held until it begins (`_hold`)."""

    @classmethod
    def for_state(cls, state: ChainState, me: bytes, params: NetworkParams) -> RoundMachine:
        """The machine of the height after `state`, in service-node mode (every round has a
        leader: `pulse.production_mode`)."""
        state = with_index(state)
        return cls(
            parent=Parent(state.height, state.tip_hash, state.timestamp),
            quorum_of=lambda number: round_quorum(state, number, params), me=me, params=params,
        )

    @property
    def round(self) -> int | None:
        """The round in progress; None before round 0 starts."""
        return self._round.number if self._round is not None else None

    @property
    def wake_at(self) -> float:
        """When to `tick` next: the start of round 0, the end of the round in progress, or a
        leader's end of grace for the last signatures."""
        r = self._round
        if r is None:
            return round_start0(self.parent.timestamp, self.params)
        if r.ready_at is not None and not r.finished:
            return min(r.end, r.ready_at + self._grace)
        return r.end

    @property
    def _grace(self) -> float:
        return self.params.round_time * SIGNATURE_GRACE

    # --- inputs -------------------------------------------------------------------------------

    def tick(self, now: float) -> list[Action]:
        """The clock reads `now`."""
        r = self._round
        if (r is not None and r.ready_at is not None and not r.finished
                and now >= min(r.end, r.ready_at + self._grace)):
            # Broadcast even at the round's end: the block carries its round's timestamp, and
            # every node takes a valid block for the height whatever round it is in.
            return self._broadcast(r)
        return self._advance(now)

    def on_built(self, block: Block, now: float) -> list[Action]:
        """Leader: the shell built the template `BuildTemplate` asked for (too late, once its
        round is over, it is dropped)."""
        actions = self._advance(now)
        r = self._round
        if r is None or r.role is not Role.LEADER or r.proposal is not None:
            return actions
        header = block.header
        if header.round != r.number:
            return actions
        if (header.height, header.prev_hash, header.producer) != (
            self.height, self.parent.block_hash, self.me
        ) or not r.start <= header.timestamp < r.end:
            raise ValueError(
                f"the template built is not a block of height {self.height} round {r.number} "
                "by this leader in its round's window"
            )
        template = BlockTemplate(self.height, r.number, encode(block))
        r.proposal = _Proposal(template, block, block_hash(header))
        return actions + [SendTemplate(template, r.quorum.validators)]

    def on_template(self, template: BlockTemplate, now: float, sender: bytes | None = None) -> list[Action]:
        """Validator: a template arrived (`sender`: the member whose connection brought it;
        one that is not the round's leader is not decoded: a leader sends its own)."""
        actions = self._advance(now)
        r = self._round
        if template.height != self.height:
            return actions
        if template.round == (0 if r is None else r.number + 1):
            self._hold(template, sender)
            return actions
        if r is None or template.round != r.number or sender not in (None, r.quorum.leader):
            return actions
        return actions + self._consider(template, r)

    def on_checked(self, block_hash: bytes, valid: bool, now: float) -> list[Action]:
        """Validator: the shell's verdict on the template `CheckTemplate` named."""
        actions = self._advance(now)
        r = self._round
        if (r is None or r.role is not Role.VALIDATOR or r.proposal is None
                or r.proposal.block_hash != block_hash or not valid or r.signed
                or r.equivocated):
            return actions
        r.signed = True
        return actions + [SignTemplate(self.height, r.number, block_hash, r.quorum.leader)]

    def on_signature(self, message: ValidatorSignature, now: float) -> list[Action]:
        """Leader: a validator's signature arrived."""
        actions = self._advance(now)
        r = self._round
        if r is None or r.proposal is None or not self._counts(message, r, r.proposal):
            return actions
        r.signatures[message.validator] = message.signature
        if len(r.signatures) == len(r.quorum.validators):
            return actions + self._broadcast(r)
        if len(r.signatures) >= r.quorum.needed and r.ready_at is None:
            r.ready_at = now  # enough to make the block: a short grace for the others
        return actions

    def _broadcast(self, r: _Round) -> list[Action]:
        """The leader's block with every signature it holds."""
        assert r.proposal is not None
        r.finished = True
        bitset, signatures = signer_set(r.quorum.validators, r.signatures)
        return [Broadcast(r.proposal.block, r.proposal.block_hash, bitset, signatures)]

    # --- rules --------------------------------------------------------------------------------

    def _advance(self, now: float) -> list[Action]:
        """Move to the round in progress at `now`: the round left behind failed unless its
        leader (this node) broadcast its block; a new leader builds its template."""
        if now < round_start0(self.parent.timestamp, self.params):
            return []
        number = round_at(now, self.parent.timestamp, self.params)
        left = self._round
        if left is not None and number <= left.number:
            return []
        actions: list[Action] = []
        if left is not None and not left.finished:
            actions.append(RoundFailed(self.height, left.number, left.quorum.leader))
        self._round = r = self._new_round(number)
        if r.role is Role.LEADER:
            actions.append(BuildTemplate(self.height, number, int(now)))
        early, self._early = self._early, []
        for template in early:
            if template.round == number:
                actions += self._consider(template, r)
        return actions

    def _new_round(self, number: int) -> _Round:
        """Round `number` as it begins: its quorum, this node's part, its window."""
        quorum = self._quorum_of(number)
        start, end = round_window(self.parent.timestamp, number, self.params)
        return _Round(number, quorum, self._role(quorum), start, end)

    def _hold(self, template: BlockTemplate, sender: bytes | None = None) -> None:
        """A template for the next round that came before this node's clock reached it (a
        leader's clock a little ahead of ours, a fast network: oxen-core #1334) is held, and
        considered once the round begins. Only the round's leader's, and only two: a second
        one already proves an equivocation."""
        if len(self._early) >= MAX_EARLY_TEMPLATES or template in self._early:
            return
        r = self._new_round(template.round)
        if sender not in (None, r.quorum.leader):
            return
        if r.role is Role.VALIDATOR and self._leaders_block(template, r) is not None:
            self._early.append(template)

    def _consider(self, template: BlockTemplate, r: _Round) -> list[Action]:
        """A validator's part: check the first template of the round's leader, report a
        second, different one."""
        if r.role is not Role.VALIDATOR:
            return []
        block = self._leaders_block(template, r)
        if block is None:
            return []
        this_hash = block_hash(block.header)
        first = r.proposal
        if first is None:
            r.proposal = _Proposal(template, block, this_hash)
            return [CheckTemplate(template, block, this_hash)]
        if this_hash == first.block_hash or r.equivocated:
            return []
        r.equivocated = True
        return [Equivocation(self.height, r.number, r.quorum.leader, first.template, template)]

    def _role(self, quorum: RoundQuorum) -> Role:
        """This node's part in a round of `quorum`."""
        if quorum.leader == self.me:
            return Role.LEADER
        if self.me in quorum.validators:
            return Role.VALIDATOR
        return Role.OBSERVER

    def _leaders_block(self, template: BlockTemplate, r: _Round) -> Block | None:
        """The template's block if it is this round's, from its leader; else None."""
        try:
            block = decode(template.block, Block)
        except DecodeError:
            return None
        header = block.header
        if (header.height, header.round, header.prev_hash, header.producer) != (
            self.height, r.number, self.parent.block_hash, r.quorum.leader
        ) or not r.start <= header.timestamp < r.end:
            return None
        message = producer_message(self.params.network_id, block_hash(header))
        if not verify(r.quorum.leader, message, block.producer_signature):
            return None
        return block

    def _counts(self, message: ValidatorSignature, r: _Round, proposal: _Proposal) -> bool:
        """True when the leader counts `message` towards the block it proposed."""
        if r.role is not Role.LEADER or r.finished:
            return False
        if (message.height, message.round, message.block_hash) != (
            self.height, r.number, proposal.block_hash
        ):
            return False
        if message.validator not in r.quorum.validators or message.validator in r.signatures:
            return False
        return verify(
            message.validator, validator_message(self.params.network_id, proposal.block_hash),
            message.signature,
        )
