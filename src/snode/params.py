"""Network parameter sets: every consensus and operator constant, in one place.

One frozen record per network (mainnet, testnet, devnet, regtest). Amounts are atomic units
(1 coin = 10**9), times are seconds, heights are blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    sixth; devnet 10 of 30, a third, its `healthy_proof_age`: its nodes share a host or NTP-synced
    clocks, and prove every 2 s). Regtest keeps 300: its tests move clocks and replay proofs
    minutes apart, and no regtest node is judged by a quorum it does not drive itself."""
    reachability_interval: int = 300
    """Seconds between two reachability tests of one node by a quorum member (a CurveZMQ
    handshake at the address its proof declares); a node failing them for longer than the
    decommission proof age is decommissioned as `unreachable`."""

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
    decommission_proof_age=1800, min_active_sns=12,
)
TESTNET: Final = NetworkParams(
    name="testnet", network_id=0x534E0002, address_prefix="snt",
    p2p_port=18090, rpc_port=18091, quorumnet_port=18092, omq_port=18093, wallet_rpc_port=18094,
    target_block_time=120, proof_interval=60, healthy_proof_age=120,
    decommission_proof_age=1800, min_active_sns=12,
)
DEVNET: Final = NetworkParams(
    name="devnet", network_id=0x534E0003, address_prefix="snd",
    p2p_port=38090, rpc_port=38091, quorumnet_port=38092, omq_port=38093, wallet_rpc_port=38094,
    target_block_time=2, proof_interval=2, healthy_proof_age=10,
    decommission_proof_age=30, proof_clock_tolerance=10, min_active_sns=4, private_public_ip_allowed=True,
    round_time=2, backstop_rounds=10, participation_cooldown=10, participation_grace=60,
    unlock_duration=30, deregistration_lock=40, pool_fill_window=50, reachability_interval=10,
)
REGTEST: Final = NetworkParams(
    name="regtest", network_id=0x534E0004, address_prefix="snr",
    p2p_port=38090, rpc_port=38091, quorumnet_port=38092, omq_port=38093, wallet_rpc_port=38094,
    target_block_time=0, proof_interval=2, healthy_proof_age=10,
    decommission_proof_age=30, min_active_sns=4, private_public_ip_allowed=True,
    generate_on_demand=True, sn_blocks=False, round_time=2, backstop_rounds=10,
    participation_cooldown=10, participation_grace=60, unlock_duration=30, deregistration_lock=40,
    pool_fill_window=50, reachability_interval=10,
)

NETWORKS: Final = {p.name: p for p in (MAINNET, TESTNET, DEVNET, REGTEST)}
