"""Recompute a vector case from the inputs written in its file.

Every file holds `keys` (a name -> a 32-byte Ed25519 seed, hex; the public key beside it) and
`cases`; a case names keys by their name and holds its inputs and `expected`, what these
functions must give back. `COMPUTE[file](keys, case)` is the whole rule of one file.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import immutables
import msgspec

from snode.app.builtin import BUILTIN_GENESIS
from snode.core import mempool, pulse
from snode.core.blocks import Block, block_hash, header_state_root, make_block, producer_message, tx_root
from snode.core.crypto import SigningKey, hash32
from snode.core.encoding import domain_hash, encode
from snode.core.errors import InvalidTransaction
from snode.core.genesis import GenesisDoc, GenesisOutput, genesis_state, regtest_genesis
from snode.core.production import build_block
from snode.core.proofs import make_proof, proof_message
from snode.core.quorums import block_leader, block_validators, obligations_quorum
from snode.core.registration import format_command, sign_registration
from snode.core.service_nodes import reward_split
from snode.core.state import NO_HEIGHT, ChainState, Contribution, ServiceNode
from snode.core.state_root import state_checksum
from snode.core.transactions import (
    REFUSED_TX_VERSION,
    Coinbase,
    OutPoint,
    Payload,
    Registration,
    Reservation,
    Stake,
    StakeReturn,
    StateChange,
    Transaction,
    Transfer,
    TxOut,
    UnlockRequest,
    Vote,
    check_stateless,
    registration_hash,
    signing_hash,
    state_change_hash,
    txid,
)
from snode.core.transition import apply_block
from snode.core.txbuilder import build_spend
from snode.params import (
    KNOWN_FORKS,
    NETWORKS,
    REGTEST_AUTHORITY_SEED,
    REGTEST_FAUCET_SEED,
    Fork,
    ForkRules,
    NetworkParams,
)
from snode.sim.population import SIMNET, make_population

Json = dict[str, Any]
Keys = dict[str, SigningKey]


def network(name: str) -> NetworkParams:
    """A network's parameters by name; `simnet` is snode-sim's."""
    return SIMNET if name == SIMNET.name else NETWORKS[name]


def load_keys(doc: Json) -> Keys:
    """The file's named keys, from their seeds."""
    return {name: SigningKey(bytes.fromhex(k["seed"])) for name, k in doc["keys"].items()}


def _pub(keys: Keys, name: str) -> bytes:
    return keys[name].public


# --- genesis ----------------------------------------------------------------------------------

def genesis_doc(case: Json) -> GenesisDoc:
    """The genesis document a case names: the package's own, or the one written in the case."""
    source = case["source"]
    if source == "builtin":
        return BUILTIN_GENESIS[case["network"]]
    if source == "regtest":
        return regtest_genesis()
    if source == "snode-sim":
        sim = case["sim"]
        return make_population(sim["service_nodes"], sim["contributors"], sim["seed"]).genesis
    doc = case["doc"]
    return GenesisDoc(
        network=doc["network"], timestamp=doc["timestamp"], authorities=doc["authorities"],
        outputs=[GenesisOutput(o["address"], o["amount"]) for o in doc["outputs"]],
    )


def genesis_at(case: Json) -> Block:
    """Block 0 as the code makes it, with its coinbase at the case's transaction version (an
    earlier version's block 0 is kept as a vector of what it was)."""
    _, block, _ = genesis_state(genesis_doc(case), network(case["network"]))
    coinbase = block.transactions[0]
    if coinbase.version == case["tx_version"]:
        return block
    coinbase = msgspec.structs.replace(coinbase, version=case["tx_version"])
    header = msgspec.structs.replace(block.header, tx_root=tx_root([txid(coinbase)]))
    return msgspec.structs.replace(block, header=header, transactions=(coinbase,))


def genesis(keys: Keys, case: Json) -> Json:
    """Block 0 of a network: its hash, its coinbase's id and (small ones) its encoding."""
    block = genesis_at(case)
    out = {"block_hash": block_hash(block.header).hex(), "coinbase_txid": txid(block.transactions[0]).hex()}
    encoded = encode(block)
    if len(encoded) <= 1_000:
        out["block_encoding"] = encoded.hex()
    return out


# --- transactions -----------------------------------------------------------------------------

def payload(keys: Keys, p: Json, params: NetworkParams) -> Payload:
    """A payload from its readable form (`kind` and the kind's fields)."""
    kind = p["kind"]
    if kind == "transfer":
        return Transfer()
    if kind == "coinbase":
        return Coinbase(p["height"])
    if kind == "registration":
        reservations = tuple(Reservation(_pub(keys, r["owner"]), r["amount"]) for r in p["reservations"])
        return sign_registration(keys[p["service_node"]], params, p["fee_ppm"], reservations, p["expiry"])
    if kind == "stake":
        return Stake(_pub(keys, p["service_node"]), p["amount"])
    if kind == "state_change":
        sn = _pub(keys, p["service_node"])
        message = state_change_hash(params.network_id, sn, p["state_change_kind"], p["reason"], p["quorum_height"])
        votes = tuple(Vote(keys[v].public, keys[v].sign(message)) for v in p["voters"])
        return StateChange(sn, p["state_change_kind"], p["reason"], p["quorum_height"], votes)
    if kind == "stake_return":
        return StakeReturn(_pub(keys, p["service_node"]), p["reason"])
    if kind == "unlock_request":
        return UnlockRequest(_pub(keys, p["service_node"]), _pub(keys, p["contributor"]))
    raise ValueError(f"unknown payload kind {kind!r}")


def unsigned_transaction(keys: Keys, case: Json) -> Transaction:
    """A case's transaction without its signatures."""
    params = network(case["network"])
    inputs = tuple(OutPoint(bytes.fromhex(i["txid"]), i["index"]) for i in case["inputs"])
    outputs = tuple(TxOut(_pub(keys, o["owner"]), o["amount"]) for o in case["outputs"])
    return Transaction(case["version"], inputs, outputs, payload(keys, case["payload"], params), ())


def signers(keys: Keys, case: Json) -> list[SigningKey]:
    """Who signs a case's transaction: each input's owner, or an unlock request's contributor."""
    if case["payload"]["kind"] == "unlock_request":
        return [keys[case["payload"]["contributor"]]]
    return [keys[i["owner"]] for i in case["inputs"]]


def v1_signing_hash(tx: Transaction, network_id: int) -> bytes:
    """Version 1's signing hash, kept to recompute its vectors: the transaction without its
    signatures, and nothing of the outputs it spends (why version 1 is refused)."""
    return domain_hash(b"tx", network_id, encode(msgspec.structs.replace(tx, signatures=())))


def fork(case: Json) -> ForkRules:
    """The fork a case is made for (`fork`, the fork's name; v1 where the case names none)."""
    return KNOWN_FORKS[case.get("fork", "v1")]


def signed_transaction(keys: Keys, case: Json) -> tuple[Transaction, bytes]:
    """A case's transaction, signed, and the signing hash its signers signed (by the rule of
    the case's version, with its fork's branch id)."""
    unsigned = unsigned_transaction(keys, case)
    network_id = network(case["network"]).network_id
    if case["version"] == REFUSED_TX_VERSION:
        message = v1_signing_hash(unsigned, network_id)
    else:
        spent = [TxOut(_pub(keys, i["owner"]), i["amount"]) for i in case["inputs"]]
        message = signing_hash(unsigned, spent, network_id, fork(case).branch_id)
    signatures = tuple(k.sign(message) for k in signers(keys, case))
    return Transaction(unsigned.version, unsigned.inputs, unsigned.outputs, unsigned.payload, signatures), message


def transaction(keys: Keys, case: Json) -> Json:
    """A transaction's signing hash, signatures, encoding and id."""
    tx, message = signed_transaction(keys, case)
    out: Json = {"signing_hash": message.hex(), "signatures": [s.hex() for s in tx.signatures]}
    if isinstance(tx.payload, Registration):
        out["sn_signature"] = tx.payload.sn_signature.hex()
    if isinstance(tx.payload, StateChange):
        out["vote_signatures"] = [v.signature.hex() for v in tx.payload.votes]
    out["encoding"] = encode(tx).hex()
    out["txid"] = txid(tx).hex()
    return _with_refusal(out, [tx])


def _with_refusal(out: Json, txs: list[Transaction]) -> Json:
    """`out` with `refused`: why today's rules refuse one of `txs` without looking at the
    chain (a version before this one), when they do."""
    for tx in txs:
        try:
            check_stateless(tx)
        except InvalidTransaction as err:
            return {**out, "refused": str(err)}
    return out


# --- blocks -----------------------------------------------------------------------------------

def block(keys: Keys, case: Json) -> Json:
    """A block's header encoding and hash, its producer's signature and its validators'."""
    params = network(case["network"])
    txs = tuple(signed_transaction(keys, t)[0] for t in case["transactions"])
    made = make_block(
        version=fork(case).block_version, height=case["height"], prev_hash=bytes.fromhex(case["prev_hash"]),
        timestamp=case["timestamp"],
        transactions=txs, producer_key=keys[case["producer"]], network_id=params.network_id,
        round=case["round"], state_root=bytes.fromhex(case["state_root"]) if "state_root" in case else None,
    )
    h = block_hash(made.header)
    validator_message = pulse.validator_message(params.network_id, h)
    signed = {keys[v].public: keys[v].sign(validator_message) for v in case["signers"]}
    bitset, signatures = pulse.signer_set([_pub(keys, v) for v in case["validators"]], signed)
    full = Block(made.header, made.transactions, made.producer_signature, bitset, signatures)
    return _with_refusal({
        "header_encoding": encode(made.header).hex(), "block_hash": h.hex(),
        "producer_message": producer_message(params.network_id, h).hex(),
        "producer_signature": made.producer_signature.hex(),
        "validator_message": validator_message.hex(), "validator_bitset": bitset,
        "validator_signatures": [s.hex() for s in signatures], "block_encoding": encode(full).hex(),
    }, list(txs))


# --- selection --------------------------------------------------------------------------------

def service_node(keys: Keys, n: Json, params: NetworkParams) -> ServiceNode:
    """A funded solo node from its readable form (the fields selection reads)."""
    pubkey = _pub(keys, n["key"])
    stake = params.staking_requirement
    return ServiceNode(
        pubkey=pubkey, fee_ppm=0, registration_height=n["registration_height"], staking_requirement=stake,
        contributors=(Contribution(pubkey, stake, stake),), funded_height=n["registration_height"],
        active=n["active"], active_since=n["active_since"] if n["active"] else NO_HEIGHT,
        decommission_count=0, last_reward_height=n["last_reward_height"],
        last_state_change_height=n["registration_height"], last_state_change_reason=0,
        last_decommission_reason=0,
    )


def selection(keys: Keys, case: Json) -> Json:
    """The obligations quorum of the parent and each round's leader and validators for the next
    block, by the blocks' index forms; the rules as written must agree."""
    params = network(case["network"])
    nodes = [service_node(keys, n, params) for n in case["service_nodes"]]
    parent = bytes.fromhex(case["parent_hash"])
    height = case["parent_height"]
    authorities = [_pub(keys, a) for a in case["authorities"]]
    state = ChainState(height=height, tip_hash=parent, timestamp=0, issued=0,
                       service_nodes=immutables.Map({sn.pubkey: sn for sn in nodes}))
    quorum = obligations_quorum(nodes, parent, height, authorities, params)
    rounds = []
    for r in case["rounds"]:
        chosen = pulse.round_quorum(state, r, params)
        if (block_leader(nodes, height + 1, r, params) != chosen.leader
                or block_validators(nodes, parent, r, chosen.leader, params) != chosen.validators):
            raise AssertionError(f"round {r}: the index forms and the rules as written disagree")
        rounds.append({"round": r, "leader": chosen.leader.hex(),
                       "validators": [v.hex() for v in chosen.validators], "needed": chosen.needed})
    return {"obligations_quorum": {"members": [m.hex() for m in quorum.members], "needed": quorum.needed},
            "rounds": rounds}


# --- rewards ----------------------------------------------------------------------------------

def rewards(keys: Keys, case: Json) -> Json:
    """The split of one block reward among a node's contributors."""
    params = network(case["network"])
    contributors = tuple(Contribution(_pub(keys, c["owner"]), c["amount"], c["amount"])
                         for c in case["contributors"])
    sn = ServiceNode(
        pubkey=bytes(32), fee_ppm=case["fee_ppm"], registration_height=1,
        staking_requirement=params.staking_requirement, contributors=contributors, funded_height=1,
        active=True, active_since=1, decommission_count=0, last_reward_height=1,
        last_state_change_height=1, last_state_change_reason=0, last_decommission_reason=0,
    )
    return {"shares": [{"owner": owner.hex(), "amount": amount} for owner, amount in reward_split(sn, case["reward"])]}


# --- registration command and uptime proof ----------------------------------------------------

def registration_command(keys: Keys, case: Json) -> Json:
    """What the service node key signs to register, its signature and the wallet command line."""
    params = network(case["network"])
    reservations = tuple(Reservation(_pub(keys, r["owner"]), r["amount"]) for r in case["reservations"])
    key = keys[case["service_node"]]
    reg = sign_registration(key, params, case["fee_ppm"], reservations, case["expiry"])
    message = registration_hash(params.network_id, case["fee_ppm"], reservations, case["expiry"], key.public)
    return {"registration_hash": message.hex(), "signature": reg.sn_signature.hex(),
            "command": format_command(reg, params)}


def uptime_proof(keys: Keys, case: Json) -> Json:
    """An uptime proof's signed message, signature and encoding."""
    params = network(case["network"])
    proof = make_proof(keys[case["service_node"]], params, timestamp=case["timestamp"],
                       public_ip=case["public_ip"], p2p_port=case["p2p_port"],
                       quorumnet_port=case["quorumnet_port"], version=case["version"])
    return {"message": proof_message(params.network_id, proof).hex(), "signature": proof.signature.hex(),
            "encoding": encode(proof).hex()}


# --- state roots ------------------------------------------------------------------------------

def state_roots(keys: Keys, case: Json) -> Json:
    """Regtest's genesis with fork v2 at `fork_height`, then the case's blocks by the regtest
    authority, each with a transfer of the faucet's paying named keys: every block's header and the
    state root it carries, and a digest of the checksum of the whole state after it."""
    params = NETWORKS[case["network"]].with_test_forks((Fork(KNOWN_FORKS["v2"], case["fork_height"]),))
    state, _, consensus = genesis_state(regtest_genesis(), params)
    authority, faucet = SigningKey(REGTEST_AUTHORITY_SEED), SigningKey(REGTEST_FAUCET_SEED)
    out = []
    for spec in case["blocks"]:
        pool = mempool.Mempool()
        if spec["payments"]:
            mine = [(OutPoint(k[:32], int.from_bytes(k[32:], "big")), u) for k, u in state.utxos.items()
                    if u.owner == faucet.public and u.unlock_height <= state.height + 1]
            outputs = [TxOut(_pub(keys, p["to"]), p["amount"]) for p in spec["payments"]]
            tx = build_spend(mine, faucet, outputs, Transfer(), params, signed_for=params.rules_at(state.height + 1))
            pool, _ = mempool.admit(pool, tx, state, consensus, now=spec["timestamp"])
        block, _ = build_block(state, pool, consensus, authority, timestamp=spec["timestamp"])
        state, _ = apply_block(state, block, consensus)
        root = header_state_root(block.header)
        out.append({"height": block.header.height, "header_encoding": encode(block.header).hex(),
                    "block_hash": block_hash(block.header).hex(), "state_root": root.hex() if root else None,
                    "checksum_blake2b": hash32(state_checksum(state).to_bytes()).hex()})
    return {"blocks": out}


COMPUTE: dict[str, Callable[[Keys, Json], Json]] = {
    "genesis": genesis, "transactions": transaction, "blocks": block, "selection": selection,
    "rewards": rewards, "registration": registration_command, "proofs": uptime_proof,
    "transactions_v2": transaction, "blocks_v2": block, "state_roots": state_roots,
}
"""File name (without `.json`) -> the function that recomputes one of its cases."""
