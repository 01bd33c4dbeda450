"""Every admin RPC method's parameters and result, typed in one place (as uvicorn's `_types.py`).

The daemon builds its answers from these records and the wallet, snode-cli, snode-devnet and the
tests decode answers into them (`RpcClient.call_typed`), so a field renamed on one side fails on
the other at once instead of reading `None` from a dict. The field names and JSON shapes are the
contract of docs/RPC.md and of the specification (section 2): same keys, same order, same nulls.

Parameter records forbid unknown fields, so a typo in a parameter name is an error naming it.
Result records ignore unknown fields, so an older client still reads a newer daemon's answers.
"""

from __future__ import annotations

from typing import Annotated, Final, Generic, TypeVar

import msgspec

from snode.api.base import Params as Params  # named here with every record
from snode.api.base import Result as Result
from snode.api.peer_types import (
    BanInfo as BanInfo,
)
from snode.api.peer_types import (
    PeerInfo as PeerInfo,
)
from snode.api.peer_types import (
    PeersResult as PeersResult,
)

MAX_GENERATE: Final = 1000
"""Blocks one `generate_blocks` call may mine."""
MAX_MOCK_TIME: Final = 2**32 - 1
"""The latest `set_mock_time` accepts (year 2106): far beyond any test, inside every time format."""

RecordT = TypeVar("RecordT")


# --- parameters ------------------------------------------------------------------------------

class NoParams(Params, frozen=True):
    """Methods that take no parameters."""


class GetServiceNodesParams(Params, frozen=True, omit_defaults=True):
    """`get_service_nodes`: no field is every node; each given filter narrows the list (a filter
    left out is not sent, so a daemon that predates it still answers)."""

    service_node_pubkeys: list[str] = []
    """Only these nodes (hex public keys); keys not registered are left out."""
    contributor: str | None = None
    """Only the nodes this address contributed to (operator included) or has a reservation on."""


class GetBlockParams(Params, frozen=True):
    """`get_block`: exactly one of the two."""

    height: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """A height on the main chain."""
    hash: str | None = None
    """A block hash (hex)."""


class TxidParams(Params, frozen=True):
    """`get_transaction`."""

    txid: str
    """Transaction id (hex)."""


class RawTxParams(Params, frozen=True):
    """`send_raw_transaction`."""

    tx_hex: str
    """The encoded, signed transaction (hex)."""


class AddressParams(Params, frozen=True):
    """`get_outputs`."""

    address: str
    """A wallet address of this network."""


class AddPeerParams(Params, frozen=True):
    """`add_peer`."""

    address: str
    """`<ip>:<port>` of the peer's P2P port."""


class GenerateBlocksParams(Params, frozen=True):
    """`generate_blocks` (regtest)."""

    blocks: Annotated[int, msgspec.Meta(ge=1, le=MAX_GENERATE)] = 1
    """How many blocks to mine, one after the other."""


class SetMockTimeParams(Params, frozen=True):
    """`set_mock_time` (regtest)."""

    timestamp: Annotated[int, msgspec.Meta(ge=0, le=MAX_MOCK_TIME)]
    """Unix seconds the daemon's clock shows from now on; 0 restores the real clock."""


class RegistrationCmdParams(Params, frozen=True, omit_defaults=True):
    """`get_service_node_registration_cmd`, as clients send it. The daemon reads the raw object
    with the specification's rules (a wrong operator amount must fail with its text, `No operator
    contribution given`, not with a type error)."""

    contributor_addresses: list[str]
    """The operator's wallet address first, then any reserved contributors'."""
    contributor_amounts: list[int]
    """Atomic units, one per address."""
    operator_cut: str = "0"
    """Operator fee, a decimal percent from "0" to "10"."""
    staking_requirement: int | None = None
    """Atomic units; when given, it must be the network's."""


# --- service nodes ---------------------------------------------------------------------------

class Contributor(Result, frozen=True):
    """One contributor of a service node (the operator first)."""

    address: str
    """Wallet address."""
    amount: int
    """Atomic units contributed so far."""
    reserved: int
    """Atomic units the registration reserved for this address (0: none)."""


class ServiceNodeRecord(Result, frozen=True):
    """The specification's service node record (section 2.1): its 11 fields, in its order."""

    service_node_pubkey: str
    """Hex public key: the node's identity."""
    active: bool
    """False while decommissioned or not yet funded."""
    funded: bool
    """The contributions reach the staking requirement."""
    payable: bool
    """The node earns rewards (active, past the grace blocks)."""
    registration_height: int
    """Height of the block holding the registration."""
    total_contributed: int
    """Atomic units: the sum of the contributions."""
    staking_requirement: int
    """Atomic units needed to fill the node."""
    operator_fee: int
    """Parts per million of the rewards (tools show `operator_fee / 10000` percent)."""
    contributors: list[Contributor]
    """The operator first."""
    last_uptime_proof: int
    """Unix seconds of the last accepted uptime proof; 0: none yet."""
    decommission_count: int
    """Decommissions so far."""


class ServiceNodeState(ServiceNodeRecord, frozen=True):
    """An element of `get_service_nodes`' `service_node_states`: the specification's record,
    then what the daemon adds for operators and tools."""

    status: str
    """`Active`, `Decomm` or `Await`."""
    operator_address: str
    """The first contributor's address."""
    funded_height: int | None
    """Height at which the node filled; null until then."""
    activation_height: int | None
    """Height since which the node is active; null while it is not."""
    last_reward_height: int
    """Height of the last reward paid to the node."""
    last_state_change_height: int
    """Height of the last quorum verdict on the node."""
    last_state_change_reason: str
    """Why the last verdict was given (e.g. `missed_uptime_proofs`); empty: none yet."""
    last_decommission_reason: str
    """Why the node was last decommissioned; empty: never."""
    missed_duties: int = 0
    """Block-production duties (leading a round, signing as a validator) it missed among the
    last `recorded_duties`, as this daemon saw them."""
    recorded_duties: int = 0
    """Duties in its participation window so far (at most 8)."""
    requested_unlock_height: int = 0
    """Height until which it works after an unlock request (0: none); the next block removes it."""
    earned_downtime_blocks: int = 0
    """Blocks of downtime credit: how long it may stay decommissioned before deregistration."""
    state_height: int = 0
    """Height of its last state change (registration, stake, quorum verdict, unlock request)."""
    leaves_at: int = 0
    """The block that will remove it (after its unlock height, or an unfilled pool's expiry)."""


class ServiceNodesResult(Result, Generic[RecordT], frozen=True):
    """`get_service_nodes`. Clients read `ServiceNodesResult[ServiceNodeState]`; the daemon may
    answer with each record already encoded (`ServiceNodesResult[msgspec.Raw]`)."""

    service_node_states: list[RecordT]
    """The nodes, in the chain's order."""
    height: int
    """The tip height the records describe."""


class ServiceNodeKeyResult(Result, frozen=True):
    """`get_service_node_key`."""

    service_node_pubkey: str
    """This daemon's service node key (hex)."""
    service_node_x25519_pubkey: str = ""
    """Its X25519 key (hex): the CurveZMQ server key of its quorumnet and public OMQ ports."""


class RegistrationCmdResult(Result, frozen=True):
    """`get_service_node_registration_cmd`."""

    registration_cmd: str
    """The single-line command to paste into the wallet."""


# --- the node --------------------------------------------------------------------------------

class UpgradeRequired(Result, frozen=True):
    """`get_info`'s `upgrade_required`: a fork this daemon does not know, which it learnt of from
    peers' fork announcements, blocks or service nodes' proofs (issue #34 item 4)."""

    fork: str
    """The fork's name (`v2`), or `unknown` (a fork this snoded has never heard of)."""
    height: int
    """Its first block: this daemon extends its chain up to the block before it."""
    blocks_left: int
    """Blocks until this daemon stops (0: stopped)."""
    eta_seconds: int | None
    """About how long until then, at the network's block time (null on regtest)."""
    known_by: list[str]
    """The snoded versions that announced it (peers' agents, escaped)."""
    confirmed: bool
    """A block of the fork, or the proofs of a third of the active service nodes, say so: the
    daemon stops at `height` (peers' announcements alone only warn)."""
    stopped: bool
    """Its tip is the block before `height`: it makes, signs and validates nothing further."""
    pending_blocks: int
    """Blocks of that fork kept as "cannot validate yet", for the snoded that knows it."""
    action: str
    """What the operator does: the snoded or the `--test-fork` to start."""


class NextFork(Result, frozen=True):
    """`get_info`'s `next_fork`: the next fork of this daemon's schedule and the network's
    readiness for it, from the service nodes' uptime proofs (issue #34 item 6; no on-chain vote)."""

    fork: str
    """Its name (`v2`)."""
    height: int
    """Its first block."""
    blocks_left: int
    """Blocks before it."""
    eta_seconds: int | None
    """About how long until then, at the network's block time (null on regtest)."""
    active_sns: int
    """Active service nodes."""
    ready_sns: int
    """Those whose last accepted proof says they know the fork (`node.readiness.knows`)."""
    this_node: str
    """`ready`, or why not (`outdated (snoded 0.1.0, 0.2.0 needed)`)."""
    summary: str
    """`fork v2 at 1,440 (in 100 blocks, ~3h 20m): 11 of 12 active SNs ready; this node: ready`."""
class Departure(Result, frozen=True):
    """How this service node's key left the registry, as the block that removed it records it."""

    height: int
    """The block that removed it."""
    kind: str
    """`deregistered`, `unlock` or `pool expired`."""
    reason: str
    """A deregistration's quorum reason (`missed_uptime_proofs`...); empty otherwise."""
    stakes_unlock_height: int
    """The first block that may spend the returned stakes."""
    stakes_locked_blocks: int
    """Blocks until a wallet at the tip can spend them (0: it can now)."""


class InfoResult(Result, frozen=True):
    """`get_info` (specification section 2.2, then the daemon's own fields)."""

    height: int
    """The daemon's chain height."""
    target_height: int
    """The network's height while syncing; 0 when synced."""
    status_line: str
    """`v<version>; Height: <n>, SN: <state>, proof: <age>`."""
    network: str
    """`mainnet`, `testnet`, `devnet` or `regtest`."""
    version: str
    """The daemon's version."""
    top_block_hash: str
    """Hash of the tip block (hex)."""
    genesis_hash: str
    """Hash of the genesis block (hex)."""
    mempool_size: int
    """Transactions waiting in the mempool."""
    service_node: bool
    """The daemon runs in service-node mode."""
    service_node_count: int
    """Registered service nodes."""
    peer_count: int
    """Connected peers."""
    last_uptime_proof_rejection: str
    """Why a peer last refused this node's uptime proof; empty: never."""
    immutable_height: int = 0
    """The highest final height (a block with two checkpoints at or above it); 0 before any."""
    block_production: str = "authority"
    """Who produces the next block: `authority` or `service_nodes`."""
    state_root: str = ""
    """The root of the state at the tip (hex), which the tip's header carries, from fork v2 on
    (DESIGN.md section 13); empty before."""
    upgrade_required: UpgradeRequired | None = None
    """A fork this daemon does not know, learnt of from the network; null: none."""
    history_start: int = 1
    """The lowest height above genesis whose block this node holds: 1, or the height of the
    snapshot it started from (`--trusted-checkpoint`: the blocks below it are not downloaded)."""
    history_backfilled: int = 0
    """The height up to which a node started from a snapshot holds every block from genesis
    (the backfill below `history_start`; 0: none yet, or a node that started from genesis)."""
    history_percent: int = 100
    """The share of the blocks below `history_start` this node holds: 100 when all are (or it
    started from genesis), less while the backfill fills them in or with `--no-backfill`."""
    history_checked: int = 0
    """The height up to which a node started from a snapshot has replayed its history from
    genesis (the history check, once the backfill is done; `history_start` once verified)."""
    history_verified: bool = False
    """Whether that replay reached the snapshot's state root: the state it loaded is the one its
    history gives (false before the check and for a node that started from genesis)."""
    snapshot_download: SnapshotDownload | None = None
    """The snapshot download of a node started from a trusted point; null: none."""
    next_fork: NextFork | None = None
    """The next fork this daemon's schedule has (not one only known, far ahead), with readiness; null: none."""
    downtime_credit: int | None = None
    """This service node's downtime credit in blocks; null when it is not a registered service node."""
    credit_warning: str = ""
    """What the credit means for the next outage when it is short of what one needs (an active
    node below the decommission minimum is deregistered by it; a decommissioned one when it runs
    out), with the stake lock; empty otherwise. The status line shows it too."""
    departure: Departure | None = None
    """How this service node's key left the registry (deregistered, unlocked, pool expired);
    null while it is registered or for a key the chain never knew."""
    registration_pending: bool = False
    """A registration of this service node's key waits in the mempool."""
    mempool_min_fee_rate: int = 0
    """The fee per byte (atomic units, rounded up) this daemon's mempool asks of a transaction
    arriving now: the chain's minimum, or more while its floor is raised after evicting or while it
    is full. 0: a daemon older than this field (a wallet pays the chain's minimum then)."""


class SnapshotDownload(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot download's progress (`get_info`'s `snapshot_download`)."""

    height: int
    """The trusted point's height, the snapshot's."""
    chunks: int
    """Chunks checked and stored so far..."""
    total_chunks: int
    """...of this many."""
    bytes: int
    total_bytes: int
    peers: int
    """Peers the chunks are fetched from now."""
    fetched_chunks: int
    """Chunks fetched by this run of the daemon (a resumed download fetches none it stored)."""
    eta: int
    """Seconds left at the rate so far (0: not known yet)."""
    done: bool
    """The snapshot is loaded; the node syncs on from its height."""


def sync_state(network: str, target_height: int, peer_count: int) -> str:
    """What a tool says of a daemon's sync: `syncing to N`, `synced`, or `no peers`. A daemon
    with no peer cannot know that it has the network's chain, so it never says `synced` (but on
    regtest, where a network of one daemon is the usual case)."""
    if target_height:
        return f"syncing to {target_height}"
    return "no peers" if peer_count == 0 and network != "regtest" else "synced"


class HeightResult(Result, frozen=True):
    """`get_height`."""

    height: int
    """The tip height."""
    hash: str
    """The tip block's hash (hex)."""


class StakingRequirementResult(Result, frozen=True):
    """`get_staking_requirement`."""

    staking_requirement: int
    """Atomic units a service node needs."""
    height: int
    """The tip height."""


class StatusResult(Result, frozen=True):
    """Methods that only say they did it: `add_peer`, `stop_daemon`."""

    status: str
    """`OK`."""


class SendProofResult(Result, frozen=True):
    """`send_uptime_proof`: a fresh proof went to every peer; whether one accepted it in time."""

    status: str
    """`OK`: the proof was signed and sent."""
    timestamp: int
    """The proof's timestamp (always newer than the last one sent)."""
    accepted: bool
    """A peer acknowledged it within a few seconds (the network's view now counts it)."""
    accepted_by: str = ""
    """The peer that acknowledged it."""
    refused: str = ""
    """Why a peer refused it, if one did and none accepted it."""


class MockTimeResult(Result, frozen=True):
    """`set_mock_time`."""

    status: str
    """`OK`."""
    timestamp: int
    """The mock time now set; 0: the real clock again."""


class GenerateBlocksResult(Result, frozen=True):
    """`generate_blocks`."""

    blocks: list[str]
    """Hashes of the mined blocks (hex), oldest first."""
    height: int
    """The tip height afterwards."""


# --- blocks and transactions -----------------------------------------------------------------

class BlockResult(Result, frozen=True):
    """`get_block`."""

    hash: str
    """The block's hash (hex)."""
    height: int
    """Its height."""
    timestamp: int
    """Unix seconds, as its producer wrote them."""
    prev_hash: str
    """The previous block's hash (hex)."""
    producer: str
    """`authority`, or the public key (hex) of the service node that led its round (`genesis`
    for block 0)."""
    tx_ids: list[str]
    """Its transactions' ids (hex), coinbase first."""
    block_hex: str
    """The whole encoded block (hex)."""
    producer_key: str = ""
    """The key that signed the block as its producer (hex), the authority's included."""
    round: int = 0
    """The block-production round that made it (0 for authority blocks)."""
    validators: list[str] = []
    """Public keys (hex) of the round's validators whose signatures the block carries."""
    validator_count: int = 0
    """How many validators the round had (signatures: `len(validators)` of it)."""
    checkpointed: bool = False
    """A checkpoint at or above this block is carried by the chain."""
    checkpoint: int | None = None
    """The height of the checkpoint this block carries, if any."""


class TransactionResult(Result, frozen=True):
    """`get_transaction`."""

    txid: str
    """The id asked for (hex)."""
    height: int | None
    """Height of the block holding it; null while in the mempool."""
    in_pool: bool
    """Waiting in the mempool."""
    kind: str
    """`coinbase`, `transfer`, `registration`, `stake` or `state_change`."""
    tx_hex: str
    """The encoded transaction (hex)."""


class SendTxResult(Result, frozen=True):
    """`send_raw_transaction`."""

    txid: str
    """The accepted transaction's id (hex)."""


class OutputEntry(Result, frozen=True):
    """One unspent output of an address."""

    txid: str
    """Id of the transaction that created it (hex)."""
    index: int
    """Its position among that transaction's outputs."""
    amount: int
    """Atomic units."""
    unlock_height: int
    """The first block height that may spend it."""


class LockedStake(Result, frozen=True):
    """A stake of an address that it cannot spend: on a node, or returned by a deregistration."""

    service_node_pubkey: str
    amount: int
    state: str
    """`staked`, `unlocking` (an unlock was requested) or `deregistered` (returned, locked)."""
    unlock_height: int | None
    """`unlocking`: the node's unlock height; `deregistered`: the height from which the returned
    output is spendable; `staked`: null."""
    leaves_at: int = 0
    """The block that returns the stake (after an unlock, or an unfilled pool's expiry); 0: none."""
    reason: str = ""
    output: str = ""
    """`deregistered`: the quorum's reason (`missed_uptime_proofs`...) and the returned output
    (`<txid>:<index>`)."""


class LockedStakesResult(Result, frozen=True):
    """`get_locked_stakes`: stakes on nodes, then those deregistrations returned still locked."""

    height: int
    stakes: list[LockedStake]


class ServiceNodeRewardsParams(Params, frozen=True):
    """`get_service_node_rewards`: one node's rewards between two heights (both included)."""

    service_node_pubkey: str
    """The node (hex public key); it must be registered now."""
    from_height: Annotated[int, msgspec.Meta(ge=0)] = 0
    to_height: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Default: the tip."""


class RewardShare(Result, frozen=True):
    """What one address received: from one reward, or in all."""

    address: str
    amount: int
    """Atomic units."""


class RewardPaid(Result, frozen=True):
    """One block whose coinbase paid the node its reward."""

    height: int
    amount: int
    """The whole reward the node paid out (atomic units): the sum of `shares`."""
    shares: list[RewardShare]
    """Operator first (its fee and its share), then each contributor, as the coinbase pays them."""


class ServiceNodeRewardsResult(Result, frozen=True):
    """`get_service_node_rewards`."""

    service_node_pubkey: str
    from_height: int
    to_height: int
    rewards: list[RewardPaid]
    """Oldest first."""
    total: int
    """Atomic units: the sum of the rewards listed."""
    totals: list[RewardShare]
    """Each address's sum over the rewards listed, in the order of the latest reward's shares."""
    complete: bool
    """False when more rewards lie between from_height and the oldest listed than one answer
    holds: ask again with `to_height` below `rewards[0].height`; also when the range reaches
    below the snapshot this node started from (its blocks are not here: ask a node that has them)."""


class OutputsResult(Result, frozen=True):
    """`get_outputs`."""

    height: int
    """The tip height the list describes."""
    outputs: list[OutputEntry]
    """The address's unspent outputs."""


class MempoolEntry(Result, frozen=True):
    """One transaction waiting in the mempool."""

    txid: str
    """Its id (hex)."""
    size: int
    """Encoded size, bytes."""
    fee: int
    """Atomic units."""
    kind: str
    """As in `TransactionResult.kind`."""
    spends: list[str]
    """The outputs it spends, as `<txid>:<index>`."""


class MempoolResult(Result, frozen=True):
    """`get_mempool`."""

    transactions: list[MempoolEntry]
    """Oldest arrival first."""
