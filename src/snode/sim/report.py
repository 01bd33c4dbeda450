"""What a simulation counts, and the figures it reports (`snode-sim --json`).

Reward fairness: each block pays one node (the round-robin winner); a node's expected share of a
block is 1 / (nodes payable at that block) for every block in which it was payable. A node's
deviation is |blocks it was paid - its expected share|, in block rewards; the run reports the
largest. Round robin keeps it below about one reward whatever N is.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field
from typing import Any

from snode.core.blocks import Block
from snode.core.service_nodes import StateChangeKind, is_payable
from snode.core.state import ChainState, registry_index
from snode.core.transactions import StakeReturn, StateChange
from snode.params import NetworkParams
from snode.sim.config import SimConfig
from snode.sim.judges import JudgeCounts

GRACE_SCAN_LIMIT = 4_096
"""Entries at the back of the reward queue looked at for nodes still in their grace period."""


@dataclass
class Tally:
    """Counts kept during a run: `sim.world.World` tells it each block and what else it counts;
    the quorums' counts (`JudgeCounts`) come in at the end."""

    params: NetworkParams
    config: SimConfig
    contributors: int
    baseline_rss_kib: int
    """The process's peak RSS before the run: what the nodes add is measured above it."""
    bootstrap_s: float = 0.0
    bootstrap_height: int = 0
    blocks: int = 0
    rounds: int = 0
    rounds_failed: int = 0
    equivocations: int = 0
    outages: int = 0
    state_changes: dict[str, int] = field(default_factory=dict)
    stakes_returned: int = 0
    checkpoints_carried: int = 0
    proof_messages: float = 0.0
    accept_s: float = 0.0
    template_check_s: float = 0.0
    messages_before: int = 0
    refused: list[str] = field(default_factory=list)
    paid: dict[bytes, int] = field(default_factory=dict)
    payable_from: dict[bytes, int] = field(default_factory=dict)
    expected: dict[bytes, float] = field(default_factory=dict)
    cumulative: list[float] = field(default_factory=lambda: [0.0, 0.0])
    """cumulative[h]: sum of every block's 1 / payable count for blocks below h."""
    result: dict[str, Any] = field(default_factory=dict)

    def steady_from(self, height: int, messages: int) -> None:
        """Bootstrap is over at `height`, with `messages` sent so far: the per-block figures count
        from here."""
        self.bootstrap_height = height
        self.accept_s = self.template_check_s = 0.0
        self.messages_before = messages

    def block(self, state: ChainState, block: Block, winner: bytes | None, rounds: int, down: int) -> None:
        """Count an adopted block (`state`: the tip after it; `winner`: the node it paid; `rounds`:
        rounds it took; `down`: nodes down now)."""
        height = block.header.height
        steady = state.height > self.bootstrap_height > 0
        if steady:
            self.blocks += 1
            self.rounds += rounds
            up = len(registry_index(state).active_keys) - down
            self.proof_messages += max(up, 0) * self.params.target_block_time / self.params.proof_interval
        payable = self._payable_count(state, height)
        self.cumulative.append(self.cumulative[-1] + (1 / payable if payable and winner else 0.0))
        if winner is not None:
            self.paid[winner] = self.paid.get(winner, 0) + 1
        if block.header.checkpoint is not None:
            self.checkpoints_carried += 1
        for tx in block.transactions:
            payload = tx.payload
            if isinstance(payload, StateChange):
                kind = StateChangeKind(payload.kind)
                self.state_changes[kind.name.lower()] = self.state_changes.get(kind.name.lower(), 0) + 1
                self._close(payload.sn_pubkey, height + 1)
                if kind in (StateChangeKind.ACTIVATE, StateChangeKind.RECOMMISSION):
                    self.payable_from[payload.sn_pubkey] = height + self.params.payable_grace + 1
            elif isinstance(payload, StakeReturn):
                self.stakes_returned += 1
                self._close(payload.sn_pubkey, height)

    def _payable_count(self, state: ChainState, height: int) -> int:
        """Nodes the block at `height` could pay: the parent's reward queue less the nodes at
        its back still in their grace period (newly active nodes queue at the back)."""
        # `state` is the tip after the block: the parent's queue but for the winner, now at the back.
        queue = registry_index(state).reward_queue
        registry = state.service_nodes
        waiting = 0
        for entry in reversed(queue[-GRACE_SCAN_LIMIT:]):
            if is_payable(registry[entry[2]], height - 1, self.params):
                break
            waiting += 1
        return len(queue) - waiting

    def _close(self, pubkey: bytes, end: int) -> None:
        """The node stops being payable before block `end`."""
        start = self.payable_from.pop(pubkey, None)
        if start is not None and end > start:
            upto = min(end, len(self.cumulative) - 1)
            share = self.cumulative[upto] - self.cumulative[min(start, upto)]
            self.expected[pubkey] = self.expected.get(pubkey, 0.0) + share

    def finish(self, state: ChainState, judged: JudgeCounts, *, messages: int, cpu_s: float,
               wall_s: float) -> None:
        """Close the books at the final tip `state`, with the quorums' counts and the `messages`
        sent in all, and compute the figures."""
        end = len(self.cumulative) - 1
        for pubkey in list(self.payable_from):
            self._close(pubkey, end)
        nodes = set(self.paid) | set(self.expected)
        deviation = max((abs(self.paid.get(k, 0) - self.expected.get(k, 0.0)) for k in nodes), default=0.0)
        blocks = max(self.blocks, 1)
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        config = self.config
        self.result = {
            "service_nodes": config.service_nodes,
            "contributors": self.contributors,
            "blocks": self.blocks,
            "seed": config.seed,
            "latency_ms": config.latency_ms,
            "loss": config.loss,
            "per_block_cpu_ms": round(cpu_s / blocks * 1000, 3),
            "core_check_ms_per_block": round(self.template_check_s / blocks * 1000, 3),
            "node_accept_ms_per_block": round(self.accept_s / blocks * 1000, 3),
            "proof_check_us": round(judged.proof_check_s / max(judged.proofs_checked, 1) * 1e6, 1),
            "proofs_per_block": round(self.proof_messages / blocks, 1),
            "proof_cpu_ms_per_block": round(self.proof_messages / blocks * judged.proof_check_s
                                            / max(judged.proofs_checked, 1) * 1000, 3),
            "messages_per_block": round((messages - self.messages_before) / blocks, 1),
            "peak_rss_mib": round(peak_kib / 1024, 1),
            "rss_per_sn_kib": round(max(peak_kib - self.baseline_rss_kib, 0) / max(config.service_nodes, 1), 2),
            "rounds": self.rounds,
            "failed_rounds": self.rounds_failed,
            "equivocations": self.equivocations,
            "outages": self.outages,
            "state_changes": dict(sorted(self.state_changes.items())),
            "stakes_returned": self.stakes_returned,
            "checkpoints_carried": self.checkpoints_carried,
            "final_height": state.height,
            "final_active": len(registry_index(state).active_keys),
            "final_registered": len(state.service_nodes),
            "max_reward_deviation": round(deviation, 3),
            "refused_transactions": len(self.refused),
            "bootstrap_s": round(self.bootstrap_s, 1),
            "wall_s": round(wall_s, 1),
        }
