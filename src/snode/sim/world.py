"""The simulated network: N service nodes and their contributors on the real core and node code.

One observing `Node` (in-memory store, inline verifier, the simulation's clock) holds the chain
every simulated node agrees on, its mempool and its view of proofs and duties. Around it:
- the genesis authority produces the first blocks, which register every node and fill its
  stakes; every node sends its first uptime proof; the authority's votes activate the first
  `min_active_sns` nodes, after which the obligations quorum of service nodes activates the
  rest and service nodes produce every block (`sim.rounds`);
- each block, nodes go down at random for a random number of blocks (`SimConfig.outage_rate`),
  contributors ask for their stakes back (`unlock_share`), and a scripted partition may cut a
  share of the nodes off; the tip's obligations quorum judges the nodes it has reason to
  (`sim.judges`), its members' votes travel over the lossy network, and the state changes they
  make go through the mempool into the blocks;
- every checkpoint height, the checkpoint quorum signs and the leaders carry the checkpoint.

What is counted is in `sim.report`. World is the one writer of who is down, cut off or asked to
unlock, and of the tally; its helpers get the `sim.stage.Stage` they act on.
"""

from __future__ import annotations

import random
import resource
import time
from collections.abc import Callable
from typing import Final

from snode.common.events import EventHub
from snode.core.blocks import Block
from snode.core.crypto import SigningKey
from snode.core.errors import SnodeError
from snode.core.genesis import genesis_state
from snode.core.pulse import Mode
from snode.core.service_nodes import reward_winner_from_queue
from snode.core.state import registry_index
from snode.core.transactions import StakeReturn, StateChange, Transaction, txid
from snode.core.txbuilder import build_unlock_request
from snode.node.node import Node
from snode.node.verifier import InlineVerifier
from snode.sim.config import SimConfig
from snode.sim.judges import Judges
from snode.sim.network import LinkModel, SimNetwork
from snode.sim.population import (
    Population,
    SimNode,
    genesis_outpoints,
    make_population,
    registration_tx,
    stake_txs,
)
from snode.sim.report import Tally
from snode.sim.rounds import HeightProduction, SimError
from snode.sim.stage import Stage
from snode.store.memory import MemoryStore

__all__ = ["SimConfig", "SimError", "World"]

TXS_PER_BOOTSTRAP_BLOCK: Final = 2_000
"""Registrations or stakes submitted before each bootstrap block."""


class SimClock:
    """The node's clock: the simulation's time."""

    def __init__(self, net: SimNetwork) -> None:
        self.net = net

    def time(self) -> float:
        return self.net.now


class World:
    """The whole simulated network."""

    def __init__(self, config: SimConfig, population: Population | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.progress = progress or (lambda text: None)
        self.rng = random.Random(config.seed)
        self.baseline_rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        self.pop = population or make_population(config.service_nodes, config.contributors, config.seed)
        self.params = self.pop.params
        state, genesis, consensus = genesis_state(self.pop.genesis, self.params)
        self.net = SimNetwork(self.rng, LinkModel(config.latency_ms / 1000, loss=config.loss), float(state.timestamp))
        self.node = Node(params=self.params, consensus=consensus, store=MemoryStore(genesis, state), state=state,
                         identity=None, producer_key=self.pop.authority, hub=EventHub(),
                         clock=SimClock(self.net), verifier=InlineVerifier())
        self.funds = genesis_outpoints(self.pop, txid(genesis.transactions[0]))
        self.by_pubkey: dict[bytes, SimNode] = {n.pubkey: n for n in self.pop.nodes}
        self.keys: dict[bytes, SigningKey] = {n.pubkey: n.key for n in self.pop.nodes}
        self.keys[self.pop.authority.public] = self.pop.authority
        self.down_until: dict[bytes, int] = {}
        self.down_since: dict[bytes, float] = {}
        self.unlock_requested: set[bytes] = set()
        self.ever_down: set[bytes] = set()
        """Every node that has had an outage or was cut off (what a test checks verdicts against)."""
        self.tally = Tally(self.params, config, self.pop.contributor_count, self.baseline_rss_kib)
        self.stage = Stage(self.params, self.net, self.node, self.keys, self.rng, self.down_until, self.down_since)
        self.judges = Judges(self.stage, config, self.submit)

    # --- what the simulated nodes can do ------------------------------------------------------

    def submit(self, tx: Transaction) -> bool:
        """Into the observer's mempool (as gossip brings it to every node); False if refused."""
        try:
            self.node.submit_transaction(tx, int(self.net.now))
            return True
        except SnodeError as err:
            self.tally.refused.append(str(err))
            return False

    # --- the whole run ------------------------------------------------------------------------

    def run(self) -> Tally:
        """Bootstrap, then produce `config.blocks` service-node blocks; the figures."""
        started = time.perf_counter()
        self._bootstrap()
        self.tally.bootstrap_s = time.perf_counter() - started
        self.tally.steady_from(self.node.height, self._messages())
        self.progress(f"bootstrap done at height {self.node.height} in {self.tally.bootstrap_s:.1f} s: "
                      f"{len(registry_index(self.node.state).active_keys)} nodes active")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        first = self.node.height
        while self.node.height < first + self.config.blocks:
            self._events()
            self._next_block()
            done = self.node.height - first
            if done % 500 == 0:
                self.progress(f"block {done}/{self.config.blocks}: {time.perf_counter() - wall0:.0f} s")
        self.tally.finish(self.node.state, self.judges.counts, messages=self._messages(),
                          cpu_s=time.process_time() - cpu0, wall_s=time.perf_counter() - wall0)
        return self.tally

    def _messages(self) -> int:
        """Messages sent so far: over the simulated network, and the quorums' votes."""
        counts = self.judges.counts
        return self.net.sent + counts.vote_messages + counts.checkpoint_messages

    def _bootstrap(self) -> None:
        """Register and fill every node, prove, and activate until service nodes produce."""
        expiry = int(self.net.now) + self.params.registration_validity
        regs = [registration_tx(n, self.funds[n.operator.public], expiry, self.params) for n in self.pop.nodes]
        self._authority_blocks(regs)
        self.progress(f"{len(regs)} nodes registered by height {self.node.height}")
        self._authority_blocks([tx for n in self.pop.nodes for tx in stake_txs(n, self.funds, self.params)])
        self.progress(f"{self.pop.contributor_count} contributors staked by height {self.node.height}")
        self.judges.first_proofs([n.pubkey for n in self.pop.nodes])
        while len(registry_index(self.node.state).active_keys) < len(self.node.state.service_nodes):
            self._next_block()
            if self.node.height > 10_000:
                raise SimError("the nodes were still not all active after 10,000 blocks")

    def _authority_blocks(self, txs: list[Transaction]) -> None:
        for start in range(0, len(txs), TXS_PER_BOOTSTRAP_BLOCK):
            for tx in txs[start:start + TXS_PER_BOOTSTRAP_BLOCK]:
                if not self.submit(tx):
                    raise SimError(f"a bootstrap transaction was refused: {self.tally.refused[-1]}")
            self._authority_block()
        while len(self.node.pool):
            self._authority_block()

    def _authority_block(self) -> None:
        self.net.now = float(self.node.state.timestamp + self.params.target_block_time)
        self._adopt(self.node.build_block(int(self.net.now)), 0)

    def _next_block(self) -> None:
        """The tip's quorum judges; the next block is produced and adopted."""
        self.judges.judge()
        if self.node.production_mode is Mode.AUTHORITY:
            self._authority_block()
            return
        production = HeightProduction(self.stage, self.node.state, self.judges.checkpoint_to_carry)
        block, round_ = production.run()
        self.tally.rounds_failed += round_
        self.tally.equivocations += production.equivocations
        self.tally.template_check_s += production.check_s
        self._adopt(block, production.rounds_begun)

    def _adopt(self, block: Block, rounds: int) -> None:
        """The observer adopts `block` (every node does, the same way)."""
        parent = self.node.state
        winner = reward_winner_from_queue(registry_index(parent).reward_queue, parent.service_nodes,
                                          parent.height + 1, self.params)
        started = time.process_time()
        self.node.accept_block(block, int(self.net.now))
        self.tally.accept_s += time.process_time() - started
        self.tally.block(self.node.state, block, winner.pubkey if winner else None, rounds, len(self.down_until))
        for tx in block.transactions:
            if isinstance(tx.payload, (StakeReturn, StateChange)):
                self._after_change(tx.payload.sn_pubkey)
        self.judges.after_block(block)

    def _after_change(self, pubkey: bytes) -> None:
        """A block changed the node's state: forget a node that left the registry."""
        if pubkey not in self.node.state.service_nodes:
            self.down_until.pop(pubkey, None)
            self.down_since.pop(pubkey, None)
            self.judges.forget(pubkey)

    # --- what happens to nodes ----------------------------------------------------------------

    def _events(self) -> None:
        """Outages start and end, contributors ask to unlock, a partition starts or heals."""
        height = self.node.height
        for pubkey in [k for k, until in self.down_until.items() if until <= height]:
            del self.down_until[pubkey]
            self.down_since.pop(pubkey, None)
            self.judges.watch(pubkey)
        active = registry_index(self.node.state).active_keys
        for _ in range(self._draws(len(active) * self.config.outage_rate)):
            pubkey = self.rng.choice(active)
            if pubkey not in self.down_until:
                self._stop(pubkey, height + self.rng.randint(*self.config.outage_blocks))
                self.tally.outages += 1
        half = max(self.config.blocks // 2, 1)
        if height - self.tally.bootstrap_height < half:
            for _ in range(self._draws(self.config.service_nodes * self.config.unlock_share / half)):
                self._request_unlock(self.rng.choice(active))
        self._partition(height - self.tally.bootstrap_height)
        self._stops(height - self.tally.bootstrap_height)

    def _stops(self, block: int) -> None:
        """The scripted stops that begin at `block` (each ends like an outage)."""
        for index, start, end in self.config.stops:
            pubkey = self.pop.nodes[index].pubkey
            if block == start and pubkey in self.node.state.service_nodes:
                self._stop(pubkey, self.node.height + end - start)

    def _stop(self, pubkey: bytes, until: int) -> None:
        """The node's daemon stops until height `until`."""
        self.down_until[pubkey] = until
        self.down_since[pubkey] = self.net.now
        self.ever_down.add(pubkey)
        self.judges.watch(pubkey)

    def _draws(self, expected: float) -> int:
        """How many events happen this block when `expected` do on average."""
        whole = int(expected)
        return whole + (1 if self.rng.random() < expected - whole else 0)

    def _request_unlock(self, pubkey: bytes) -> None:
        if pubkey in self.unlock_requested:
            return
        contributor = self.rng.choice(self.by_pubkey[pubkey].contributors)
        if self.submit(build_unlock_request(contributor, pubkey, self.params)):
            self.unlock_requested.add(pubkey)

    def _partition(self, block: int) -> None:
        if self.config.partition is None:
            return
        share, start, end = self.config.partition
        if block == start:
            cut = self.rng.sample(list(self.by_pubkey), int(len(self.by_pubkey) * share))
            self.net.partition(cut)
            self.ever_down.update(cut)
            for pubkey in cut:
                self.down_since.setdefault(pubkey, self.net.now)
                self.judges.watch(pubkey)
            self.progress(f"block {block}: {len(cut)} nodes cut off")
        elif block == end:
            self.net.heal()
            for pubkey in [k for k in self.down_since if k not in self.down_until]:
                del self.down_since[pubkey]
            self.progress(f"block {block}: the partition heals")
