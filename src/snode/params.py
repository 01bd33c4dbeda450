"""Network parameter sets: every consensus and operator constant, in one place.

One frozen record per network (mainnet, testnet, devnet, regtest). Amounts are atomic units
(1 coin = 10**9), times are seconds, heights are blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

COIN: Final = 1_000_000_000
"""Atomic units in one coin."""

BLOCKS_PER_DAY: Final = 720
"""Mainnet blocks in a day (one every 120 s): the unit of the durations Oxen states in days."""

PPM: Final = 1_000_000
"""Parts per million: the unit of the operator fee (10 % = 100_000 ppm)."""

MAX_TX_BYTES: Final = 100_000
MAX_BLOCK_BYTES: Final = 2_000_000
MAX_OPERATOR_FEE_PPM: Final = 100_000
MAX_CONTRIBUTORS: Final = 11
"""The operator plus up to 10 others."""

PROOF_CLOCK_TOLERANCE: Final = 300
"""The most seconds any network lets an uptime proof's timestamp be off the receiver's clock
(mainnet's `proof_clock_tolerance`): what proof gossip and the saved proofs, which do not judge
proofs, take as the horizon."""

STATE_CHANGE_WINDOW: Final = 10
"""A state change may cite the quorum of any of this many most recent heights."""

MAX_FUTURE_BLOCK_TIME: Final = 120
"""A block timestamp may be at most this far ahead of the receiving node's clock."""

# Published regtest keys: public constants on purpose, like Bitcoin's regtest keys. Never use
# them on a network with value.
REGTEST_AUTHORITY_SEED: Final = bytes.fromhex(
    "7265677465737420617574686f72697479207365656420666f7220736e6f6465"
)
REGTEST_FAUCET_SEED: Final = bytes.fromhex(
    "7265677465737420666175636574207365656420666f7220736e6f6465212121"
)
REGTEST_FAUCET_WORDS: Final = (
    "include clinic tackle slab dance awake office concert gloom close amount traffic "
    "film rare light social impulse adjust swear tell edge mountain loyal dinner"
)
"""BIP-39 words of the regtest faucet wallet: the mnemonic of REGTEST_FAUCET_SEED."""

REGTEST_GENESIS_TIMESTAMP: Final = 1_767_225_600  # 2026-01-01T00:00:00Z
REGTEST_FAUCET_AMOUNT: Final = 1_000_000_000 * COIN
"""Enough for thousands of test service nodes (benchmarks register 2,000)."""


@dataclass(frozen=True, slots=True)
class ForkRules:
    """What one fork's consensus is: the record every rule reads (`NetworkParams.rules_at`),
    so that what a fork changes is in one place (docs/UPGRADES.md). A new switch is a new field
    here, read by the rule it changes; no rule compares heights itself."""

    name: str
    """`v1`, `v2`, ...: named in refusals, the handshake and the operator's view."""
    block_version: int
    """The header version every block of this fork carries, and no other."""
    tx_versions: tuple[int, ...]
    """Transaction versions a block of this fork may hold (the last one is the one made)."""
    branch_id: int
    """Committed to by every transaction signing hash of this fork (Zcash ZIP 200), so that a
    transaction signed for one side of a fork is refused on the other. 0 is v1's: its signing
    hash predates branch ids and stays what it always was."""
    min_sn_version: tuple[int, int, int]
    """The oldest snoded whose uptime proofs this fork's service nodes accept (issue #34 item 5)."""
    equivocation_proofs: bool = False
    """A quorum's `StateChange` may deregister a node with `Reason.EQUIVOCATION`, carrying the
    proof that it signed two blocks for one round or two checkpoint votes for one height
    (`core.equivocation`); before, no state change carries a proof or that reason."""
    state_root: bool = False
    """Every header carries the root of the state after its block, and every node checks it
    (`core.state_root`, DESIGN.md section 13)."""
    proof_version: int = 1
    """1: an uptime proof's `version` is free text nothing checks. 2: it is `MAJOR.MINOR.PATCH
    NAME@HEIGHT` (the sender's snoded and the newest fork its schedule knows, `core.proofs.
    ProofVersion`), a proof below `min_sn_version` or without it is refused as outdated, and its
    node is decommissioned `outdated_software`, not deregistered within `upgrade_grace_blocks`."""

    @property
    def tx_version(self) -> int:
        """The transaction version this fork's producers and wallets make."""
        return self.tx_versions[-1]


V1: Final = ForkRules(name="v1", block_version=1, tx_versions=(2,), branch_id=0, min_sn_version=(0, 1, 0))
"""The rules from genesis."""
V2: Final = ForkRules(
    name="v2", block_version=2, tx_versions=(2,), branch_id=0x5632_0001, min_sn_version=(0, 2, 0),
    equivocation_proofs=True,
    state_root=True,
    proof_version=2,
)
"""The first fork: block version 2 (whose header carries the state root) and a branch id in
every signing hash. Not frozen yet: it
is active on no network, so the state-commitment issue may still add to it (docs/UPGRADES.md)."""

KNOWN_FORKS: Final = {rules.name: rules for rules in (V1, V2)}
"""Every fork this snoded knows, by name, in order: what `--test-fork` may schedule."""

FAR_AHEAD: Final = 100_000_000
"""The height of a fork a release knows but has not yet scheduled (about 380 years of mainnet
blocks): it is never reached; a later release moves it to a real height."""


@dataclass(frozen=True, slots=True)
class Fork:
    """One row of a network's schedule: from `height` on, `rules` hold."""

    rules: ForkRules
    height: int


class ScheduleError(ValueError):
    """A fork schedule that is out of order; the message names what to fix."""


def check_schedule(forks: tuple[Fork, ...]) -> None:
    """A schedule starts with v1 at genesis; heights, block versions and known-fork order
    strictly increase; ScheduleError names the first row that breaks it."""
    if not forks or forks[0] != Fork(V1, 0):
        raise ScheduleError("the schedule must start with fork v1 at height 0")
    order = list(KNOWN_FORKS)
    for before, after in zip(forks, forks[1:]):
        name = after.rules.name
        if after.height <= before.height:
            raise ScheduleError(
                f"fork {name} at height {after.height} must come after fork {before.rules.name} "
                f"at height {before.height}"
            )
        if after.rules.block_version <= before.rules.block_version or (
            name in KNOWN_FORKS and order.index(name) <= order.index(before.rules.name)
        ):
            raise ScheduleError(f"fork {name} cannot follow fork {before.rules.name}: forks go in order "
                                f"({', '.join(order)})")


@dataclass(frozen=True, slots=True)
class NetworkParams:
    """Everything that differs between networks."""

    name: str
    """`mainnet`, `testnet`, `devnet` or `regtest`."""
    network_id: int
    """Mixed into every signed message so that a signature is valid on one network only."""
    address_prefix: str
    """Human-readable part of a wallet address."""
    p2p_port: int
    rpc_port: int
    quorumnet_port: int
    omq_port: int
    wallet_rpc_port: int
    target_block_time: int
    """Seconds between blocks; 0 on regtest, where blocks come from `generate_blocks`."""
    proof_interval: int
    """Seconds between two uptime proofs of one SN."""
    healthy_proof_age: int
    decommission_proof_age: int
    min_active_sns: int
    """Below this many active SNs the genesis authority produces blocks and stands in for quorums."""
    registration_validity: int = 14 * 24 * 3600
    unlock_confirmations: int = 10
    payable_grace: int = 4
    staking_requirement: int = 200_000 * COIN
    pool_operator_min: int = 100_000 * COIN
    obligations_quorum_size: int = 10
    obligations_votes_needed: int = 7
    validators_size: int = 11
    validators_needed: int = 7
    block_reward: int = 16_500_000_000
    fee_per_byte: int = 1_000
    private_public_ip_allowed: bool = False
    """Devnet and regtest accept loopback and private `--service-node-public-ip` values."""
    generate_on_demand: bool = False
    """Regtest: any node produces blocks on `generate_blocks` with the published authority key."""
    sn_blocks: bool = True
    """Service nodes take over block production once `min_active_sns` are active; False on
    regtest, where `generate_blocks` produces authority blocks whatever the active count."""
    round_time: int = 60
    """Seconds of one block-production round: one leader's turn (DESIGN.md section 6)."""
    backstop_rounds: int = 255
    """Full rounds without a service-node block after which the authority may produce one
    (Oxen falls back to mining after 255)."""
    checkpoint_interval: int = 4
    """A checkpoint quorum signs every block whose height is a multiple of this."""
    checkpoint_quorum_size: int = 20
    """Members of a checkpoint quorum (on devnet and regtest at most the active count)."""
    participation_window: int = 8
    """Block-production duties (led a round, validated one) a node's record remembers."""
    participation_max_misses: int = 4
    """A node fails its participation with more than this many misses in the window."""
    participation_grace: int = 1_800
    """Seconds a node's participation must stay failing before it fails (docs/PARTICIPATION.md):
    a restart for an upgrade (10 minutes on mainnet) and the duties that bring the record back
    fit in it whatever the network's size. Mainnet: the decommission proof age, so missed
    duties never judge a node sooner than missed proofs; devnet and regtest: twice it (a
    restart as long as the decommission age, and then the recovery)."""
    participation_cooldown: int = 30
    """Blocks a node decommissioned for missed block production stays out before its proofs
    can recommission it (else it would flap back at the next block, its window cleared)."""
    unlock_duration: int = 15 * BLOCKS_PER_DAY
    """Blocks from an unlock request to the node's exit, when every stake on it comes back
    (Oxen: 15 days)."""
    deregistration_lock: int = 30 * BLOCKS_PER_DAY
    """Blocks the stakes of a deregistered node stay locked before their owners may spend them
    (Oxen: 30 days)."""
    pool_fill_window: int = 2 * BLOCKS_PER_DAY
    """Blocks a pool node has after its registration to fill; an unfilled one then expires and
    its contributions come back."""
    credit_initial: int = 60
    """Blocks of downtime credit a node starts with when it is activated (Oxen: 60)."""
    credit_max: int = 1_440
    """Most blocks of downtime credit a node can hold (Oxen: 1,440: two days of mainnet blocks)."""
    credit_min: int = 60
    """A failing active node with less credit than this is deregistered, not decommissioned."""
    credit_earn_blocks: int = 30
    """Blocks of activity that earn one block of credit (Oxen: 24 blocks a day of 720)."""
    proof_clock_tolerance: int = PROOF_CLOCK_TOLERANCE
    """Seconds an uptime proof's timestamp may be off the receiver's clock. A proof stamped that
    far ahead counts as fresh that much longer, so a node that signs one before it dies is judged
    that much later: it must stay well inside `decommission_proof_age` (mainnet 300 of 1,800 s, a
    sixth; devnet and regtest 10 of 30, a third, their `healthy_proof_age`: their nodes share a
    host or NTP-synced clocks, and prove every 2 s; regtest's tests move every node's clock at
    once, `set_mock_time`, and a proof signed in between is refused once and taken 2 s later)."""
    reachability_interval: int = 300
    """Seconds between two reachability tests of one node by a quorum member (a CurveZMQ
    handshake at the address its proof declares); a node failing them for longer than the
    decommission proof age is decommissioned as `unreachable`."""
    upgrade_grace_blocks: int = 7 * BLOCKS_PER_DAY
    """Blocks after a fork within which no node decommissioned `outdated_software` is
    deregistered (Oxen's HARDFORK_DEREGISTRATION_GRACE_PERIOD: 7 days): its operator has that
    long to upgrade."""
    forks: tuple[Fork, ...] = (Fork(V1, 0),)
    assume_valid: bytes | None = None
    """The hash of a block this release assumes valid (Bitcoin Core's `-assumevalid`): a sync may
    skip the input signatures of its ancestors (`--assume-valid` overrides it). None on every
    network of this release: none is compiled in yet."""
    snapshot_interval: int = BLOCKS_PER_DAY
    """Heights a multiple of this are those a node writing snapshots writes one of, once they
    are final (`services.snapshots`; fork v2 on, whose headers carry the root). Mainnet: a day."""
    snapshot_chunk_bytes: int = 1024 * 1024
    """Bytes of entries a snapshot chunk holds (at most `core.snapshot.CHUNK_BYTES`); regtest's
    are small, so that its few entries make many chunks for the tests of a download."""
    snapshot_depth: int = 0
    """0: a snapshot height must be final (checkpointed twice over, `immutable_height`). Regtest,
    whose authority chain has no checkpoint quorums: a height this many blocks below the tip."""
    trusted_snapshot: tuple[int, bytes] | None = None
    """The (height, block hash) a new node of this release trusts to start from a snapshot
    (`--trusted-checkpoint` gives another). None on every network of this release: no network has
    a v2 chain yet (v2 is FAR_AHEAD on mainnet and testnet; devnet and regtest take theirs from
    the operator or `snode-devnet`)."""
    test_forks: bool = False
    """Devnet and regtest: `--test-fork` schedules forks at start (their tables hold v1 only)."""
    """The fork schedule, v1 from genesis first (`check_schedule`); devnet and regtest add
    forks at start with `--test-fork` (`with_test_forks`)."""

    def rules_at(self, height: int) -> ForkRules:
        """The rules of the block at `height`: the one lookup every rule asks."""
        rules = self.forks[0].rules
        for fork in self.forks[1:]:
            if fork.height > height:
                break
            rules = fork.rules
        return rules

    def in_upgrade_grace(self, height: int) -> bool:
        """Whether the block at `height` is within `upgrade_grace_blocks` of the fork it is on
        (never for v1, from genesis)."""
        fork = self.fork_of(self.rules_at(height))
        return fork is not None and fork.height > 0 and height - fork.height < self.upgrade_grace_blocks

    def fork_of(self, rules: ForkRules) -> Fork | None:
        """The schedule's row of `rules` (None: a fork this network has not scheduled)."""
        return next((fork for fork in self.forks if fork.rules == rules), None)

    def next_fork(self, height: int) -> Fork | None:
        """The first fork scheduled above `height`, if any."""
        return next((fork for fork in self.forks if fork.height > height), None)

    def with_test_forks(self, forks: tuple[Fork, ...]) -> NetworkParams:
        """These parameters with `forks` scheduled (devnet and regtest only: `--test-fork`)
        on top of v1 at genesis; ScheduleError names what to fix."""
        if not self.test_forks:
            raise ScheduleError(f"{self.name}'s fork schedule is in the release; the flag is for devnet and regtest")
        schedule = (self.forks[0], *forks)
        check_schedule(schedule)
        return replace(self, forks=schedule)

    def quorum_size(self, active: int) -> int:
        """Obligations quorum size for a network with `active` active SNs."""
        if self.private_public_ip_allowed:
            return min(self.obligations_quorum_size, active)
        return self.obligations_quorum_size

    def votes_needed(self, size: int) -> int:
        """Votes needed from an obligations quorum of `size` members."""
        if self.private_public_ip_allowed:
            return -(-2 * size // 3)
        return self.obligations_votes_needed

    def validator_count(self, active: int) -> int:
        """Validators of a block-production round with `active` active SNs (the leader is one
        of them and never validates its own block)."""
        if self.private_public_ip_allowed:
            return max(0, min(self.validators_size, active - 1))
        return self.validators_size

    def signatures_needed(self, validators: int) -> int:
        """Validator signatures a block needs from a round of `validators` validators.

        Mainnet and testnet keep the table's fixed 7 of 11 (as Oxen), although ceil(2/3 x 11)
        would be 8: the chain tolerates four silent validators, not three. Devnet and regtest,
        whose rounds may be smaller, keep the same share, rounded up (7 of 11, 2 of 3): a
        devnet of 12 keeps producing with 4 nodes down, as mainnet does."""
        if self.private_public_ip_allowed:
            return -(-validators * self.validators_needed // self.validators_size)
        return self.validators_needed

    def checkpoint_quorum(self, active: int) -> int:
        """Members of the checkpoint quorum with `active` active SNs; 0 where there is none.

        Mainnet and testnet draw a full quorum or none (as Oxen, below 20 active nodes there
        are no checkpoints); devnet and regtest take at most every active node."""
        if self.private_public_ip_allowed:
            return min(self.checkpoint_quorum_size, active)
        return self.checkpoint_quorum_size if active >= self.checkpoint_quorum_size else 0

    def checkpoint_votes_needed(self, size: int) -> int:
        """Votes that make a checkpoint from a quorum of `size` members: ceil(2/3), on every
        network (14 of 20)."""
        return two_thirds(size)


def two_thirds(count: int) -> int:
    """ceil(2/3 x count), in integers: the share of a quorum whose signatures carry a decision."""
    return -(-2 * count // 3)


MAINNET: Final = NetworkParams(
    name="mainnet", network_id=0x534E0001, address_prefix="sn",
    p2p_port=9230, rpc_port=9231, quorumnet_port=9232, omq_port=9233, wallet_rpc_port=9234,
    target_block_time=120, proof_interval=60, healthy_proof_age=120,
    decommission_proof_age=1800, min_active_sns=12, forks=(Fork(V1, 0), Fork(V2, FAR_AHEAD)),
)
TESTNET: Final = NetworkParams(
    name="testnet", network_id=0x534E0002, address_prefix="snt",
    p2p_port=18090, rpc_port=18091, quorumnet_port=18092, omq_port=18093, wallet_rpc_port=18094,
    target_block_time=120, proof_interval=60, healthy_proof_age=120,
    decommission_proof_age=1800, min_active_sns=12, forks=(Fork(V1, 0), Fork(V2, FAR_AHEAD)),
)
DEVNET: Final = NetworkParams(
    name="devnet", network_id=0x534E0003, address_prefix="snd",
    p2p_port=38090, rpc_port=38091, quorumnet_port=38092, omq_port=38093, wallet_rpc_port=38094,
    target_block_time=2, proof_interval=2, healthy_proof_age=10,
    decommission_proof_age=30, proof_clock_tolerance=10, min_active_sns=4, private_public_ip_allowed=True,
    round_time=2, backstop_rounds=10, participation_cooldown=10, participation_grace=60,
    unlock_duration=30, deregistration_lock=40, pool_fill_window=50, reachability_interval=10,
    test_forks=True, upgrade_grace_blocks=60, snapshot_interval=20,
)
REGTEST: Final = NetworkParams(
    name="regtest", network_id=0x534E0004, address_prefix="snr",
    p2p_port=38090, rpc_port=38091, quorumnet_port=38092, omq_port=38093, wallet_rpc_port=38094,
    target_block_time=0, proof_interval=2, healthy_proof_age=10,
    decommission_proof_age=30, proof_clock_tolerance=10, min_active_sns=4, private_public_ip_allowed=True,
    generate_on_demand=True, sn_blocks=False, round_time=2, backstop_rounds=10,
    participation_cooldown=10, participation_grace=60, unlock_duration=30, deregistration_lock=40,
    pool_fill_window=50, reachability_interval=10, test_forks=True, upgrade_grace_blocks=20,
    snapshot_interval=5, snapshot_depth=2, snapshot_chunk_bytes=200,
)

NETWORKS: Final = {p.name: p for p in (MAINNET, TESTNET, DEVNET, REGTEST)}


def schedule_test_forks(params: NetworkParams, values: tuple[str, ...]) -> NetworkParams:
    """`params` with the fork of each `--test-fork` value (NAME@HEIGHT, in height order)
    scheduled: devnet and regtest only, snoded's and the wallet's flag alike. ScheduleError
    names what to fix."""
    if not values:
        return params
    if not params.test_forks:
        raise ScheduleError(f"{params.name}'s fork schedule is in the release; the flag is for devnet and regtest")
    return params.with_test_forks(tuple(parse_test_fork(value) for value in values))


def parse_test_fork(value: str) -> Fork:
    """One `--test-fork` value, NAME@HEIGHT: a fork this snoded knows, above genesis."""
    name, at, height = value.partition("@")
    if not at or not height.isascii() or not height.isdigit():
        raise ScheduleError(f"'{value}' is not NAME@HEIGHT (example: v2@20)")
    rules = KNOWN_FORKS.get(name)
    if rules is None:
        known = ", ".join(n for n in KNOWN_FORKS if n != "v1")
        raise ScheduleError(f"this snoded knows no fork '{name}' (it knows {known})")
    if int(height) == 0 or len(height) > 10:
        raise ScheduleError(f"height {height} of {name} must be from 1 to 9999999999")
    return Fork(rules, int(height))
