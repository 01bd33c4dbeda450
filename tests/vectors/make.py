"""Write the consensus test vectors: `python -m tests.vectors.make` (`--check`: only compare).

The cases' inputs are written here; their `expected` values are what today's code computes
(`tests.vectors.compute`). Regenerating changes a file only where consensus bytes changed: that
is a new network or a fork, and the diff of the JSON files is what a review reads (README,
"Consensus test vectors").
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.transactions import REFUSED_TX_VERSION, TX_VERSION
from snode.params import COIN, DEVNET, REGTEST, REGTEST_GENESIS_TIMESTAMP
from tests.vectors.compute import COMPUTE, Json, load_keys

HERE = Path(__file__).resolve().parent
KEY_NAMES = (
    "alice", "bob", "carol", "dave", "erin", "authority", "producer", "sn1", "sn2",
    *(f"node{i:02d}" for i in range(1, 15)),
)
SEEDS = {name: hashlib.blake2b(f"snode test vector key {name}".encode(), digest_size=32).hexdigest()
         for name in KEY_NAMES}
"""Every key of the vectors: its seed is BLAKE2b-256 of a label, written beside it in each file."""


def _hash(label: str) -> str:
    """A fixed 32-byte value standing for an earlier transaction or block (hex)."""
    return hashlib.blake2b(label.encode(), digest_size=32).hexdigest()


def _spend(owner: str, amount: int, label: str, index: int = 0) -> Json:
    """An input: output `index` of transaction `label`, owned by `owner`, holding `amount`."""
    return {"txid": _hash(label), "index": index, "owner": owner, "amount": amount}


def _tx(description: str, payload: Json, inputs: list[Json] | None = None,
        outputs: list[tuple[str, int]] | None = None, network: str = "regtest") -> Json:
    return {"description": description, "network": network, "version": TX_VERSION, "inputs": inputs or [],
            "outputs": [{"owner": o, "amount": a} for o, a in outputs or []], "payload": payload}


def _at_version_1(case: Json) -> Json:
    """A case as it was before version 2 (today's rules refuse it; its bytes stay pinned)."""
    description = f"version 1, refused: {case['description']}" if case["description"] else ""
    return {**case, "description": description, "version": REFUSED_TX_VERSION}


def transaction_cases() -> list[Json]:
    """Every kind at this version, then every kind at version 1."""
    cases = _transactions()
    return cases + [_at_version_1(c) for c in cases]


def _transactions() -> list[Json]:
    """One case per transaction kind (two where a kind has two shapes)."""
    reg_solo = {"kind": "registration", "service_node": "sn1", "fee_ppm": 0,
                "reservations": [{"owner": "carol", "amount": 200_000 * COIN}], "expiry": 1_767_312_000}
    reg_pool = {"kind": "registration", "service_node": "sn2", "fee_ppm": 55_000, "expiry": 1_767_312_000,
                "reservations": [{"owner": "carol", "amount": 100_000 * COIN},
                                 {"owner": "dave", "amount": 60_000 * COIN}]}
    return [
        _tx("transfer: alice pays bob 5 coins from one output, change back to alice",
            {"kind": "transfer"}, [_spend("alice", 20 * COIN, "funding 1")],
            [("bob", 5 * COIN), ("alice", 15 * COIN - 1_000_000)]),
        _tx("transfer with two inputs, one naming output 300 (a 2-byte index)",
            {"kind": "transfer"}, [_spend("alice", 3 * COIN, "funding 2"), _spend("alice", 4 * COIN, "funding 3", 300)],
            [("bob", 7 * COIN - 1_000_000)]),
        _tx("the first transfer on mainnet: the same bytes but for the network id, so another signing hash",
            {"kind": "transfer"}, [_spend("alice", 20 * COIN, "funding 1")],
            [("bob", 5 * COIN), ("alice", 15 * COIN - 1_000_000)], network="mainnet"),
        _tx("coinbase of block 7: the block reward to the producer", {"kind": "coinbase", "height": 7},
            outputs=[("producer", REGTEST.block_reward)]),
        _tx("registration of sn1 by carol alone (no fee), staking the whole requirement", reg_solo,
            [_spend("carol", 200_001 * COIN, "funding carol")], [("carol", COIN - 1_000_000)]),
        _tx("registration of a pool: sn2, 5.5 % fee, carol 100,000 and 60,000 reserved for dave", reg_pool,
            [_spend("carol", 100_001 * COIN, "funding carol 2")], [("carol", COIN - 1_000_000)]),
        _tx("stake: dave pays his 60,000 reserved on sn2",
            {"kind": "stake", "service_node": "sn2", "amount": 60_000 * COIN},
            [_spend("dave", 60_000 * COIN + 5 * COIN, "funding dave")], [("dave", 5 * COIN - 1_000_000)]),
        _tx("unlock request: carol asks for sn1's stakes back (no inputs, her one signature)",
            {"kind": "unlock_request", "service_node": "sn1", "contributor": "carol"}),
        _tx("state change: a quorum of three decommissions sn1 for missed uptime proofs",
            {"kind": "state_change", "service_node": "sn1", "state_change_kind": 2, "reason": 2,
             "quorum_height": 12, "voters": ["node01", "node02", "node03"]}),
        _tx("state change: deregistration of sn2, its outputs returning each stake",
            {"kind": "state_change", "service_node": "sn2", "state_change_kind": 4, "reason": 2,
             "quorum_height": 40, "voters": ["node01", "node02", "node03"]},
            outputs=[("carol", 100_000 * COIN), ("dave", 60_000 * COIN)]),
        _tx("stake return: sn1 leaves after its unlock, carol's stake comes back",
            {"kind": "stake_return", "service_node": "sn1", "reason": 1}, outputs=[("carol", 200_000 * COIN)]),
    ]


def block_cases() -> list[Json]:
    """Blocks of this version's transactions, then the same blocks of version 1's."""
    cases = _blocks()
    return cases + [{**c, "description": f"version 1 transactions, refused: {c['description']}",
                     "transactions": [_at_version_1(t) for t in c["transactions"]]} for c in cases]


def _blocks() -> list[Json]:
    """An authority block, and a service-node block with three of four validators' signatures."""
    coinbase = _tx("", {"kind": "coinbase", "height": 1}, outputs=[("producer", REGTEST.block_reward)])
    transfer = _transactions()[0]
    return [
        {"description": "authority block 1 on regtest: a coinbase and a transfer, no validators",
         "network": "regtest", "producer": "producer", "height": 1, "prev_hash": _hash("parent 0"),
         "timestamp": 1_767_225_700, "round": 0, "transactions": [coinbase, transfer],
         "validators": [], "signers": []},
        {"description": "service-node block 51 of round 2 on devnet: validators 0, 1 and 3 of 4 signed",
         "network": "devnet", "producer": "node05", "height": 51, "prev_hash": _hash("parent 50"),
         "timestamp": 1_767_225_800, "round": 2,
         "transactions": [{**coinbase, "network": "devnet", "payload": {"kind": "coinbase", "height": 51}}],
         "validators": ["node01", "node02", "node03", "node04"], "signers": ["node01", "node02", "node04"]},
    ]


def _for_v2(case: Json) -> Json:
    """A case as fork v2 makes it: its branch id in every signing hash, and block version 2."""
    description = f"fork v2: {case['description']}" if case["description"] else ""
    transactions = {"transactions": [_for_v2(t) for t in case["transactions"]]} if "transactions" in case else {}
    return {**case, "description": description, "fork": "v2", **transactions}


def v2_transaction_cases() -> list[Json]:
    """Every kind as fork v2 signs it (the kinds without a signature of the transaction keep
    their bytes: only the signing hash changed)."""
    return [_for_v2(c) for c in _transactions()]


def v2_block_cases() -> list[Json]:
    """The blocks of `block_cases`, as fork v2 makes them (header version 2, carrying a state
    root: here a fixed value standing for one, as the parent hash stands for a parent)."""
    return [{**_for_v2(c), "state_root": _hash(f"state after block {c['height']}")} for c in _blocks()]


def _node(key: str, active_since: int | None, last_reward: int, registered: int = 5) -> Json:
    return {"key": key, "active": active_since is not None, "active_since": active_since or 0,
            "last_reward_height": last_reward, "registration_height": registered}


def selection_cases() -> list[Json]:
    """Quorum, leaders and validators for fixed registries and parent hashes."""
    devnet = [_node("node01", 10, 60), _node("node02", 10, 55), _node("node03", 20, 70), _node("node04", 30, 58),
              _node("node05", 98, 98), _node("node06", None, 40), _node("node07", 12, 57)]
    mainnet = [_node(f"node{i:02d}", 10 + i, 80 - 3 * i) for i in range(1, 15)]
    small = [_node("node01", 10, 60), _node("node02", 10, 55), _node("node03", 20, 70)]
    return [
        {"description": "devnet, parent 100: six active (node05 inside its payable grace), one funded "
                        "but not active", "network": "devnet", "parent_height": 100,
         "parent_hash": _hash("selection parent 100"), "authorities": ["authority"],
         "service_nodes": devnet, "rounds": [0, 1, 5]},
        {"description": "mainnet, parent 200: fourteen active nodes, full-size quorum and validators",
         "network": "mainnet", "parent_height": 200, "parent_hash": _hash("selection parent 200"),
         "authorities": ["authority"], "service_nodes": mainnet, "rounds": [0, 3]},
        {"description": "devnet, three active (below the minimum of 4): the authority is the quorum",
         "network": "devnet", "parent_height": 100, "parent_hash": _hash("selection parent 100"),
         "authorities": ["authority"], "service_nodes": small, "rounds": [0]},
    ]


def reward_cases() -> list[Json]:
    """Operator fee, pro rata shares and the dust that goes to the operator."""
    reward = REGTEST.block_reward
    return [
        {"description": "solo node: the whole reward to the operator", "network": "mainnet", "reward": reward,
         "fee_ppm": 0, "contributors": [{"owner": "carol", "amount": 200_000 * COIN}]},
        {"description": "pool, 10 % fee, thirds that do not divide: the dust goes to the operator",
         "network": "mainnet", "reward": reward, "fee_ppm": 100_000,
         "contributors": [{"owner": "carol", "amount": 100_000 * COIN},
                          {"owner": "dave", "amount": 33_333 * COIN + 333_333_333},
                          {"owner": "erin", "amount": 66_666 * COIN + 666_666_667}]},
        {"description": "pool of a 7-unit reward, 5.5 % fee: a share rounded down to 0 is left out",
         "network": "mainnet", "reward": 7, "fee_ppm": 55_000,
         "contributors": [{"owner": "carol", "amount": 199_000 * COIN},
                          {"owner": "dave", "amount": 1_000 * COIN}]},
    ]


def registration_cases() -> list[Json]:
    """The command `get_service_node_registration_cmd` prints and the wallet takes."""
    return [
        {"description": "regtest, solo: carol stakes the whole requirement, no fee", "network": "regtest",
         "service_node": "sn1", "fee_ppm": 0, "expiry": 1_767_312_000,
         "reservations": [{"owner": "carol", "amount": 200_000 * COIN}]},
        {"description": "mainnet, a pool of three with a 5.5 % fee", "network": "mainnet",
         "service_node": "sn2", "fee_ppm": 55_000, "expiry": 1_767_312_000,
         "reservations": [{"owner": "carol", "amount": 100_000 * COIN},
                          {"owner": "dave", "amount": 60_000 * COIN}, {"owner": "erin", "amount": 40_000 * COIN}]},
    ]


def proof_cases() -> list[Json]:
    """Uptime proofs as a service node signs them."""
    return [
        {"description": "regtest, a loopback address", "network": "regtest", "service_node": "sn1",
         "timestamp": 1_767_225_900, "public_ip": "127.0.0.1", "p2p_port": 38090, "quorumnet_port": 38092,
         "version": "0.1.0"},
        {"description": "mainnet, an IPv6 address", "network": "mainnet", "service_node": "sn2",
         "timestamp": 1_767_225_900, "public_ip": "2001:4860:4860::8888", "p2p_port": 9230,
         "quorumnet_port": 9232, "version": "0.1.0"},
    ]


def genesis_cases() -> list[Json]:
    """Block 0 of every network and snode-sim's. Its coinbase is version 1 on every network
    (`core.genesis.genesis_block`): a coinbase spends nothing, so version 2 left block 0, and the
    data dirs that hold it, as the first release made them."""
    return [{**c, "tx_version": REFUSED_TX_VERSION} for c in _genesis()]


def _genesis() -> list[Json]:
    """Block 0 of every network, and snode-sim's."""
    authority = SigningKey(bytes.fromhex(SEEDS["authority"]))
    faucet = SigningKey(bytes.fromhex(SEEDS["alice"]))
    devnet_doc = {"network": "devnet", "timestamp": 1_767_225_600, "authorities": [authority.public.hex()],
                  "outputs": [{"address": encode_address(DEVNET.address_prefix, faucet.public),
                               "amount": 1_000_000 * COIN}]}
    return [
        {"description": "mainnet: the genesis shipped in the package (snode.app.builtin); the same block as "
                        "testnet's, since block 0 commits to neither the network nor its authority",
         "network": "mainnet", "source": "builtin"},
        {"description": "testnet: the genesis shipped in the package (snode.app.builtin)",
         "network": "testnet", "source": "builtin"},
        {"description": "regtest: built from the published authority and faucet seeds (snode.params)",
         "network": "regtest", "source": "regtest"},
        {"description": "devnet has no built-in genesis (snode-devnet writes one per network, with its "
                        "own keys and time); this one, written here, pins the rule on devnet's prefix",
         "network": "devnet", "source": "doc", "doc": devnet_doc},
        {"description": "snode-sim --service-nodes 12 --contributors 24 --seed 1: its simnet genesis",
         "network": "simnet", "source": "snode-sim", "sim": {"service_nodes": 12, "contributors": 24, "seed": 1}},
    ]


def state_root_cases() -> list[Json]:
    """Regtest chains across fork v2: its first blocks carry no root, then every block one."""
    t = REGTEST_GENESIS_TIMESTAMP
    return [
        {"description": "v2 from height 2: a v1 block, then v2 blocks, one with a faucet transfer paying two",
         "network": "regtest", "fork_height": 2, "blocks": [
             {"timestamp": t + 120, "payments": []},
             {"timestamp": t + 240, "payments": [{"to": "alice", "amount": 25 * COIN},
                                                    {"to": "bob", "amount": 7 * COIN}]},
             {"timestamp": t + 360, "payments": []},
             {"timestamp": t + 480, "payments": []},
         ]},
    ]


FILES = {
    "genesis": ("Block 0 of every network.", genesis_cases),
    "transactions": ("Every transaction kind: signing hash, signatures, encoding, id.", transaction_cases),
    "blocks": ("Block headers: hash, producer signature, validator signatures.", block_cases),
    "selection": ("Obligations quorum, round leaders and validators for a fixed registry and parent hash.",
                  selection_cases),
    "rewards": ("The split of a block reward among a node's contributors.", reward_cases),
    "registration": ("The registration command and the service node key's signature.", registration_cases),
    "proofs": ("Uptime proofs: the signed message and the signature.", proof_cases),
    "transactions_v2": ("Fork v2: every transaction kind, its signing hash committing to v2's branch id.",
                        v2_transaction_cases),
    "blocks_v2": ("Fork v2: block headers of version 2.", v2_block_cases),
    "state_roots": ("Fork v2: the state root each header carries on a regtest chain across the fork, and "
                    "the checksum of the whole state after each block (core/state_root.py).", state_root_cases),
}


def _names(value: Any) -> set[str]:
    """Every key name a case mentions."""
    if isinstance(value, dict):
        return set().union(*(_names(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_names(v) for v in value)) if value else set()
    return {value} if isinstance(value, str) and value in SEEDS else set()


def build_file(name: str) -> Json:
    """One vector file: its keys, and each case with what today's code computes for it."""
    description, cases = FILES[name]
    made = cases()
    used = sorted(_names(made), key=KEY_NAMES.index)
    doc: Json = {"description": description, "keys": {
        k: {"seed": SEEDS[k], "public_key": SigningKey(bytes.fromhex(SEEDS[k])).public.hex()} for k in used}}
    keys = load_keys(doc)
    doc["cases"] = [{**case, "expected": COMPUTE[name](keys, case)} for case in made]
    return doc


def render(doc: Json) -> str:
    """The file's text: stable, readable JSON."""
    return json.dumps(doc, indent=2) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for name in FILES:
        path = HERE / f"{name}.json"
        text = render(build_file(name))
        if not path.exists() or path.read_text() != text:
            changed.append(path.name)
            if not check:
                path.write_text(text)
    verb = "differ from what the code computes" if check else "rewritten"
    print(f"{', '.join(changed)}: {verb}" if changed else "every vector file is as the code computes it")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
