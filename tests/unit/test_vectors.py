"""Consensus test vectors (tests/vectors/*.json): every stored hash, encoding, signature and
selection is recomputed by today's code and must equal the file, so a change to consensus bytes
fails here unless the files change with it (`python -m tests.vectors.make`; README, "Consensus
test vectors").

Each case is recomputed from the inputs written in its own file (`tests.vectors.compute`), as a
second implementation would; the files must also be exactly what the generator writes, so that
no case is stale or missing. Encodings decode back to the same bytes, and snode-sim's genesis is
the one its vector holds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snode.core.blocks import Block, block_hash
from snode.core.crypto import verify
from snode.core.encoding import decode, encode
from snode.core.errors import InvalidTransaction
from snode.core.proofs import UptimeProof
from snode.core.transactions import REFUSED_TX_VERSION, Transaction, check_stateless, txid
from snode.sim.world import SimConfig, World
from tests.vectors.compute import COMPUTE, Json, load_keys
from tests.vectors.make import FILES, HERE, build_file, render


def _load(name: str) -> Json:
    data: Json = json.loads((HERE / f"{name}.json").read_text())
    return data


CASES = [
    pytest.param(name, i, id=f"{name}[{i}]")
    for name in FILES for i in range(len(_load(name)["cases"]))
]


@pytest.mark.parametrize(("name", "index"), CASES)
def test_each_case_recomputes_to_its_stored_values(name: str, index: int) -> None:
    doc = _load(name)
    case = doc["cases"][index]
    assert COMPUTE[name](load_keys(doc), case) == case["expected"], case["description"]


@pytest.mark.parametrize("name", FILES)
def test_the_files_are_what_the_generator_writes(name: str) -> None:
    path: Path = HERE / f"{name}.json"
    assert path.read_text() == render(build_file(name)), (
        f"{path.name} is not what `python -m tests.vectors.make` writes: a consensus byte changed "
        "(a fork: regenerate and say so) or the file was edited by hand"
    )


def test_the_keys_are_their_seeds_keys() -> None:
    for name in FILES:
        doc = _load(name)
        for key_name, key in load_keys(doc).items():
            assert key.public.hex() == doc["keys"][key_name]["public_key"], f"{name}: {key_name}"


def test_stored_encodings_decode_to_the_same_bytes_and_ids() -> None:
    for case in _load("transactions")["cases"]:
        raw = bytes.fromhex(case["expected"]["encoding"])
        tx = decode(raw, Transaction)
        assert encode(tx) == raw and txid(tx).hex() == case["expected"]["txid"], case["description"]
    for case in _load("blocks")["cases"]:
        block = decode(bytes.fromhex(case["expected"]["block_encoding"]), Block)
        assert block_hash(block.header).hex() == case["expected"]["block_hash"], case["description"]
    for case in _load("proofs")["cases"]:
        proof = decode(bytes.fromhex(case["expected"]["encoding"]), UptimeProof)
        assert proof.signature.hex() == case["expected"]["signature"]


def test_stored_signatures_verify_against_the_stored_messages() -> None:
    """The stored signatures are Ed25519 over the stored messages by the named keys: a second
    implementation can check its signing hashes against them without our key derivation."""
    doc = _load("transactions")
    keys = load_keys(doc)
    for case in doc["cases"]:
        signer_names = ([case["payload"]["contributor"]] if case["payload"]["kind"] == "unlock_request"
                        else [i["owner"] for i in case["inputs"]])
        message = bytes.fromhex(case["expected"]["signing_hash"])
        for name, signature in zip(signer_names, case["expected"]["signatures"], strict=True):
            assert verify(keys[name].public, message, bytes.fromhex(signature)), case["description"]
    doc = _load("proofs")
    keys = load_keys(doc)
    for case in doc["cases"]:
        assert verify(keys[case["service_node"]].public, bytes.fromhex(case["expected"]["message"]),
                      bytes.fromhex(case["expected"]["signature"]))


def test_snode_sim_starts_from_its_vector_genesis() -> None:
    case = next(c for c in _load("genesis")["cases"] if c["source"] == "snode-sim")
    sim = case["sim"]
    world = World(SimConfig(service_nodes=sim["service_nodes"], contributors=sim["contributors"], blocks=1,
                            seed=sim["seed"]))
    assert world.node.state.height == 0
    assert world.node.state.tip_hash.hex() == case["expected"]["block_hash"]


def test_version_1_vectors_are_refused_by_todays_rules_and_todays_are_not() -> None:
    """Version 1's transactions and the blocks carrying them keep their stored bytes (checked
    above) and are refused, with the reason stored beside them; this version's are not."""
    for name in ("transactions", "blocks"):
        for case in _load(name)["cases"]:
            txs = ([case] if name == "transactions" else case["transactions"])
            refused = case["expected"].get("refused")
            assert (refused is not None) == any(t["version"] == REFUSED_TX_VERSION for t in txs), case["description"]
    for case in _load("transactions")["cases"]:
        tx = decode(bytes.fromhex(case["expected"]["encoding"]), Transaction)
        if case["version"] == REFUSED_TX_VERSION:
            with pytest.raises(InvalidTransaction, match="^transaction version 1 is no longer valid: its signatures"):
                check_stateless(tx)
            assert case["expected"]["refused"].startswith("transaction version 1 is no longer valid")
        else:
            check_stateless(tx)
    block = decode(bytes.fromhex(_load("blocks")["cases"][-1]["expected"]["block_encoding"]), Block)
    with pytest.raises(InvalidTransaction, match="version 1 is no longer valid"):
        for tx in block.transactions:
            check_stateless(tx)


def test_v2_vectors_sign_their_branch_id_and_carry_block_version_2() -> None:
    """Fork v2's vectors: the same transactions as v1's, each signing hash different (the
    branch id) and its signatures valid over it; its blocks are version 2 and their v1 twins 1."""
    v1, v2 = _load("transactions"), _load("transactions_v2")
    keys = load_keys(v2)
    twins = {c["description"]: c for c in v1["cases"]}
    for case in v2["cases"]:
        twin = twins[case["description"].removeprefix("fork v2: ")]
        assert case["expected"]["signing_hash"] != twin["expected"]["signing_hash"], case["description"]
        message = bytes.fromhex(case["expected"]["signing_hash"])
        signer_names = ([case["payload"]["contributor"]] if case["payload"]["kind"] == "unlock_request"
                        else [i["owner"] for i in case["inputs"]])
        for name, signature in zip(signer_names, case["expected"]["signatures"], strict=True):
            assert verify(keys[name].public, message, bytes.fromhex(signature)), case["description"]
    for name, version in (("blocks", 1), ("blocks_v2", 2)):
        for case in _load(name)["cases"]:
            block = decode(bytes.fromhex(case["expected"]["block_encoding"]), Block)
            assert block.header.version == version, case["description"]
