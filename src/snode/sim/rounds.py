"""One height of service-node block production in the simulation: the round's leader and
validators each run the real `core.rounds.RoundMachine`, their templates and signatures travel
over the simulated network, and the observing node adopts the block the leader broadcasts.

Only the nodes of the rounds actually played get a machine (a leader and 11 validators a round),
so a height costs the same at 1,000 and at 10,000 nodes. A node that is down or cut off plays no
part: a silent leader fails its round and the next round's leader takes over, as on a real
network. The validators share one check of each template (they all check the same block on the
same parent, and the verdict is the same), and the finished block reaches the observer by gossip:
after a latency, never lost (a real block travels over many peers).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

import msgspec

from snode.core.blocks import Block, Checkpoint
from snode.core.errors import SnodeError
from snode.core.production import build_block
from snode.core.pulse import round_quorum, round_start0, round_window, validator_message
from snode.core.round_actions import (
    Action,
    Broadcast,
    BuildTemplate,
    CheckTemplate,
    Equivocation,
    SendTemplate,
    SignTemplate,
)
from snode.core.round_messages import BlockTemplate, ValidatorSignature
from snode.core.rounds import Parent, RoundMachine
from snode.core.state import ChainState, with_index
from snode.sim.stage import Stage

MAX_ROUNDS: Final = 30
"""Rounds a height may take before the simulation stops with an error (30 silent leaders in a
row means the scenario broke the network, not that it is slow)."""


class SimError(Exception):
    """The simulated network stopped making progress; the message says where."""


class HeightProduction:
    """Producing the block after `parent` (the observer's tip) on `stage`; World reads the
    block and what it cost (`equivocations`, `check_s`, `rounds_begun`)."""

    def __init__(self, stage: Stage, parent: ChainState, checkpoint: Callable[[], Checkpoint | None]) -> None:
        self.stage = stage
        self.parent = with_index(parent)
        self.params = stage.params
        self.checkpoint = checkpoint
        self.machines: dict[bytes, RoundMachine] = {}
        self.wakes: dict[bytes, float] = {}
        self.checked: dict[bytes, bool] = {}
        self.block: Block | None = None
        self.equivocations = 0
        self.check_s = 0.0
        self.rounds_begun = 0

    def run(self) -> tuple[Block, int]:
        """The block and the round that made it; SimError after MAX_ROUNDS."""
        net = self.stage.net
        start0 = round_start0(self.parent.timestamp, self.params)
        net.at(start0, lambda: self._begin_round(0))
        deadline = round_window(self.parent.timestamp, MAX_ROUNDS, self.params)[0]
        made = net.run_until(lambda: self.block is not None, deadline)
        net.clear()
        if not made or self.block is None:
            raise SimError(f"no block at height {self.parent.height + 1} after {MAX_ROUNDS} rounds: "
                           "too many leaders or validators down, cut off or unheard (a real network "
                           f"would wait for the authority's backstop after {self.params.backstop_rounds} "
                           "rounds, which the simulation does not play)")
        return self.block, self.block.header.round

    # --- rounds -------------------------------------------------------------------------------

    def _begin_round(self, number: int) -> None:
        """Round `number` starts: its playing nodes get a machine and a tick."""
        if self.block is not None:
            return
        self.rounds_begun = number + 1
        quorum = round_quorum(self.parent, number, self.params)
        for pubkey in (quorum.leader, *quorum.validators):
            if pubkey not in self.machines and self.stage.is_up(pubkey):
                self.machines[pubkey] = RoundMachine(
                    parent=Parent(self.parent.height, self.parent.tip_hash, self.parent.timestamp),
                    quorum_of=lambda r: round_quorum(self.parent, r, self.params), me=pubkey,
                    params=self.params,
                )
            if pubkey in self.machines:
                self._do(pubkey, self.machines[pubkey].tick(self.stage.net.now))
        end = round_window(self.parent.timestamp, number, self.params)[1]
        self.stage.net.at(end, lambda: self._begin_round(number + 1))

    def _wake(self, pubkey: bytes) -> None:
        """Keep one timer per machine at its `wake_at`."""
        machine = self.machines[pubkey]
        when = machine.wake_at
        if self.wakes.get(pubkey) == when:
            return
        self.wakes[pubkey] = when

        def fire() -> None:
            if self.block is None and self.wakes.get(pubkey) == when:
                self.wakes.pop(pubkey, None)
                self._do(pubkey, machine.tick(self.stage.net.now))
        self.stage.net.at(when, fire)

    # --- the machines' actions ------------------------------------------------------------------

    def _do(self, me: bytes, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, BuildTemplate):
                self._build(me, action)
            elif isinstance(action, SendTemplate):
                for validator in action.validators:
                    self._send_template(me, validator, action.template)
            elif isinstance(action, CheckTemplate):
                self._check(me, action)
            elif isinstance(action, SignTemplate):
                self._sign(me, action)
            elif isinstance(action, Broadcast):
                self._broadcast(me, action)
            elif isinstance(action, Equivocation):
                self.equivocations += 1
            # RoundFailed: counted from the round of the block that ends the height.
        if me in self.machines and self.block is None:
            self._wake(me)

    def _send_template(self, me: bytes, validator: bytes, template: BlockTemplate) -> None:
        self.stage.net.send(me, validator, lambda: self._deliver(
            validator, lambda m: m.on_template(template, self.stage.net.now)))

    def _deliver(self, to: bytes, call: Callable[[RoundMachine], list[Action]]) -> None:
        machine = self.machines.get(to)
        if machine is not None and self.block is None and self.stage.is_up(to):
            self._do(to, call(machine))

    def _build(self, me: bytes, action: BuildTemplate) -> None:
        stage = self.stage
        key = stage.keys[me]
        block, _ = build_block(self.parent, stage.node.pool, stage.node.consensus, key,
                               timestamp=action.timestamp, round=action.round, checkpoint=self.checkpoint())
        self._do(me, self.machines[me].on_built(block, stage.net.now))

    def _check(self, me: bytes, action: CheckTemplate) -> None:
        valid = self.checked.get(action.block_hash)
        if valid is None:
            started = time.process_time()
            try:
                self.stage.node.check_template(action.block, int(self.stage.net.now))
                valid = True
            except SnodeError:
                valid = False
            self.check_s += time.process_time() - started
            self.checked[action.block_hash] = valid
        self._do(me, self.machines[me].on_checked(action.block_hash, valid, self.stage.net.now))

    def _sign(self, me: bytes, action: SignTemplate) -> None:
        key = self.stage.keys[me]
        message = ValidatorSignature(
            action.height, action.round, action.block_hash, me,
            key.sign(validator_message(self.params.network_id, action.block_hash)),
        )
        self.stage.net.send(me, action.leader, lambda: self._deliver(
            action.leader, lambda m: m.on_signature(message, self.stage.net.now)))

    def _broadcast(self, me: bytes, action: Broadcast) -> None:
        block = msgspec.structs.replace(action.block, validator_bitset=action.validator_bitset,
                                        validator_signatures=action.validator_signatures)
        self.stage.net.at(self.stage.net.now + self.stage.net.delay(), lambda: self._arrive(block))

    def _arrive(self, block: Block) -> None:
        if self.block is None:
            self.block = block
