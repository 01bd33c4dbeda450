"""Who takes part in a simulation: the service nodes, their contributors, the genesis that funds
them, and the transactions that register and fill every node.

Contributors include the operators (a node's first contributor is its operator, as in
`core.state.Contribution`): C contributors over N nodes give each node its operator and
(C - N) / N others, spread as evenly as the 11-contributor limit allows. A node with others
is a pool: its operator stakes the pool minimum and the others share the rest.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Final

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, GenesisOutput
from snode.core.registration import sign_registration
from snode.core.state import new_utxo
from snode.core.transactions import OutPoint, Payload, Reservation, Stake, Transaction, TxOut
from snode.core.txbuilder import estimate_fee, payload_spend, sign_spend
from snode.params import BLOCKS_PER_DAY, COIN, MAINNET, MAX_CONTRIBUTORS, NetworkParams

SIMNET: Final = dataclasses.replace(
    MAINNET, name="simnet", network_id=0x534E00FF, address_prefix="sns",
    unlock_duration=BLOCKS_PER_DAY, deregistration_lock=BLOCKS_PER_DAY,
)
"""Mainnet's rules (2-minute blocks, 60-second rounds and proofs, quorums of 10 and 11,
checkpoints of 20 every 4 blocks), with the unlock period and the deregistration lock cut from
15 and 30 days to one, so that stakes come back within a run of 10,000 blocks (14 days)."""

GENESIS_TIMESTAMP: Final = 1_767_225_600
FEE_MARGIN: Final = COIN
"""What each contributor holds beyond its stake, for the fee of its transaction."""


def sim_key(seed: int, role: str, index: int) -> SigningKey:
    """A deterministic key of the simulation (never for real funds)."""
    return SigningKey(hashlib.blake2b(f"snode-sim {seed} {role} {index}".encode(), digest_size=32).digest())


@dataclass(slots=True)
class SimNode:
    """One service node and its contributors, as the simulation drives them."""

    index: int
    key: SigningKey
    operator: SigningKey
    others: list[SigningKey]
    operator_stake: int
    other_stakes: list[int]

    @property
    def pubkey(self) -> bytes:
        return self.key.public

    @property
    def contributors(self) -> list[SigningKey]:
        return [self.operator, *self.others]


@dataclass(slots=True)
class Population:
    """Every node, the authority, and the genesis that funds the contributors."""

    params: NetworkParams
    authority: SigningKey
    nodes: list[SimNode]
    genesis: GenesisDoc

    @property
    def contributor_count(self) -> int:
        return sum(len(n.contributors) for n in self.nodes)


def make_population(service_nodes: int, contributors: int, seed: int, params: NetworkParams = SIMNET) -> Population:
    """N nodes and C contributors (operators included); ValueError when they do not fit."""
    if service_nodes < params.min_active_sns:
        raise ValueError(f"--service-nodes must be at least {params.min_active_sns} (the active minimum "
                         "for service nodes to produce blocks)")
    if not service_nodes <= contributors <= service_nodes * MAX_CONTRIBUTORS:
        raise ValueError(f"--contributors must be between --service-nodes ({service_nodes}) and "
                         f"{MAX_CONTRIBUTORS} times it ({service_nodes * MAX_CONTRIBUTORS}): every "
                         "node has its operator and at most 10 others")
    extra, rest = divmod(contributors - service_nodes, service_nodes)
    nodes: list[SimNode] = []
    made = 0
    for i in range(service_nodes):
        count = extra + (1 if i < rest else 0)
        operator_stake = params.staking_requirement if count == 0 else params.pool_operator_min
        share, left = divmod(params.staking_requirement - operator_stake, max(count, 1))
        stakes = [share + (left if j == count - 1 else 0) for j in range(count)]
        others = [sim_key(seed, "contributor", made + j) for j in range(count)]
        made += count
        nodes.append(SimNode(i, sim_key(seed, "node", i), sim_key(seed, "operator", i), others,
                             operator_stake, stakes))
    authority = sim_key(seed, "authority", 0)
    outputs = [
        GenesisOutput(encode_address(params.address_prefix, key.public), stake + FEE_MARGIN)
        for node in nodes
        for key, stake in [(node.operator, node.operator_stake), *zip(node.others, node.other_stakes)]
    ]
    genesis = GenesisDoc(network=params.name, timestamp=GENESIS_TIMESTAMP,
                         authorities=[authority.public.hex()], outputs=outputs)
    return Population(params, authority, nodes, genesis)


def genesis_outpoints(population: Population, genesis_txid: bytes) -> dict[bytes, tuple[OutPoint, int]]:
    """Each contributor's genesis output: public key -> (outpoint, amount), in genesis order."""
    found: dict[bytes, tuple[OutPoint, int]] = {}
    index = 0
    for node in population.nodes:
        for key, stake in [(node.operator, node.operator_stake), *zip(node.others, node.other_stakes)]:
            found[key.public] = (OutPoint(genesis_txid, index), stake + FEE_MARGIN)
            index += 1
    return found


def _spend(key: SigningKey, outpoint: OutPoint, amount: int, payload: Payload, params: NetworkParams) -> Transaction:
    """`key` spends one output on `payload`, the rest back to itself less the minimum fee."""
    fee = estimate_fee(1, [], payload, params)
    change = amount - payload_spend(payload) - fee
    if change < 0:
        raise ValueError("a simulated contributor cannot pay its fee")
    outputs = (TxOut(key.public, change),) if change else ()
    return sign_spend(key, [(outpoint, new_utxo(key.public, amount, 0))], outputs, payload, params)


def registration_tx(node: SimNode, funds: tuple[OutPoint, int], expiry: int, params: NetworkParams) -> Transaction:
    """The operator registers its node and stakes its share (the others' is not reserved)."""
    reg = sign_registration(node.key, params, 0, (Reservation(node.operator.public, node.operator_stake),), expiry)
    return _spend(node.operator, funds[0], funds[1], reg, params)


def stake_txs(node: SimNode, funds: dict[bytes, tuple[OutPoint, int]], params: NetworkParams) -> list[Transaction]:
    """Each other contributor's stake on the node."""
    return [
        _spend(key, *funds[key.public], Stake(node.pubkey, amount), params)
        for key, amount in zip(node.others, node.other_stakes)
    ]
