"""Shared steps for service-node tests: fund keys, register a daemon's key, stake, records.

Test keys come from `snode.devchain.key_from_label`: deterministic, so a failing run can be
replayed with the same addresses.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from snode.core.address import encode_address
from snode.core.crypto import SigningKey
from snode.core.genesis import GenesisDoc, GenesisOutput, encode_genesis
from snode.core.registration import parse_command
from snode.core.transactions import Stake
from snode.devchain import key_from_label
from snode.params import COIN, DEVNET, NETWORKS, REGTEST
from tests.functional.framework import NodeSet, address_of, connect_nodes, fund, send_spend, sync_blocks, wait_until

SOLO = REGTEST.staking_requirement
"""A solo node's stake: the whole staking requirement."""
POOL_MIN = REGTEST.pool_operator_min
"""The least an operator may stake on a pool node."""


def fund_and_unlock(generator: Any, payments: dict[bytes, int]) -> None:
    """Pay keys from the faucet and mine until the outputs are spendable."""
    fund(generator, payments)
    generator.generate_blocks(blocks=1 + NETWORKS[generator.network].unlock_confirmations)


def register(sn: Any, via: Any, operator: SigningKey, amount: int, *, cut: str = "0") -> str:
    """Ask daemon `sn` for its registration command and pay it from `operator` through `via`
    (once `sn` has caught up: a syncing daemon refuses, as the operator is told)."""
    wait_until(lambda: sn.get_info()["target_height"] == 0, timeout=30, what=f"node{sn.index} caught up")
    cmd = sn.get_service_node_registration_cmd(
        operator_cut=cut, contributor_addresses=[address_of(sn, operator)], contributor_amounts=[amount],
    )["registration_cmd"]
    return send_spend(via, operator, [], parse_command(cmd, NETWORKS[sn.network]))


def stake(via: Any, staker: SigningKey, sn_pubkey: str, amount: int) -> str:
    """Send a stake of amount from staker to service node sn_pubkey through `via`; its txid."""
    return send_spend(via, staker, [], Stake(bytes.fromhex(sn_pubkey), amount))


def record(node: Any, sn_pubkey: str) -> dict[str, Any]:
    """Service node sn_pubkey's record as node sees it."""
    found = node.get_service_nodes(service_node_pubkeys=[sn_pubkey])["service_node_states"]
    assert found, f"{sn_pubkey[:16]} is not registered on node{node.index}"
    return found[0]


def registered_solo(hub: Any, sn: Any, label: str, *, until: str = "active") -> str:
    """Register daemon `sn` as a solo node of key `label`'s operator through `hub` (connected to
    it), and mine until its record says `until` ("active" or "payable"); its public key."""
    operator = key_from_label(label)
    fund_and_unlock(hub, {operator.public: SOLO + COIN})
    register(sn, hub, operator, SOLO)
    hub.generate_blocks(blocks=1)
    pubkey: str = sn.get_service_node_key()["service_node_pubkey"]
    mine_until(hub, lambda: record(hub, pubkey)[until], timeout=60, what=f"the node {until}")
    sync_blocks([hub, sn])
    return pubkey


def mine_until(generator: Any, predicate: Any, *, timeout: float, what: str) -> Any:
    """Generate a block per poll until predicate holds (state changes need blocks)."""
    def step() -> Any:
        generator.generate_blocks(blocks=1)
        return predicate()
    return wait_until(step, timeout=timeout, what=what, interval=0.5)


def move_clocks(nodes: list[Any], timestamp: int, *, proving: list[Any], judges: list[Any]) -> None:
    """Set every node's mock clock to `timestamp` (regtest's set_mock_time, as Bitcoin Core's
    setmocktime), then wait until each judge has accepted a proof stamped at that time from each
    node of `proving` (their proof loops keep running on real time and sign with the new one).
    Time-outs are tested by moving time, not by waiting for it.

    Every node has the same tip first: a block mined before the move and adopted after it would
    be judged at the new time, before any proof carries it (a loaded CI machine saw every node
    decommissioned for missed proofs that way)."""
    sync_blocks(nodes)
    for node in nodes:
        node.set_mock_time(timestamp=timestamp)
    keys = [n.get_service_node_key()["service_node_pubkey"] for n in proving]
    wait_until(lambda: all(record(judge, k)["last_uptime_proof"] >= timestamp for judge in judges for k in keys),
               timeout=30, what=f"proofs stamped {timestamp} from the live service nodes")


class SnNet:
    """An authority daemon and `count` service-node daemons on a fresh devnet."""

    def __init__(self, nodes: NodeSet, tmp_path: Path, count: int, *, extra_args: tuple[str, ...] = (),
                 env_of: dict[int, dict[str, str]] | None = None) -> None:
        """`extra_args`: for every daemon; `env_of`: service node i's added environment."""
        self.operators = [key_from_label(f"sn blocks op {i}") for i in range(count)]
        authority = SigningKey(os.urandom(32))
        genesis = tmp_path / "genesis.json"
        genesis.write_bytes(encode_genesis(GenesisDoc(
            network="devnet", timestamp=int(time.time()) - 4, authorities=[authority.public.hex()],
            outputs=[GenesisOutput(encode_address(DEVNET.address_prefix, op.public), SOLO + COIN)
                     for op in self.operators],
        )))
        self.authority = nodes.add(network="devnet", extra_args=[f"--genesis={genesis}", *extra_args], start=False)
        self.authority.data_dir.mkdir(parents=True)
        (self.authority.data_dir / "authority_key").write_text(authority.seed.hex() + "\n")
        (self.authority.data_dir / "authority_key").chmod(0o600)
        self.authority.start()
        self.sns = [nodes.add(network="devnet", extra_args=[f"--genesis={genesis}", "--service-node", *extra_args],
                              start=False) for _ in range(count)]
        for i, sn in enumerate(self.sns):
            sn.start(env=(env_of or {}).get(i))
        for sn in self.sns:
            connect_nodes(sn, self.authority)
        self.pubkeys = [sn.get_service_node_key()["service_node_pubkey"] for sn in self.sns]

    @property
    def all(self) -> list[Any]:
        return [self.authority, *self.sns]

    def register_all(self) -> None:
        wait_until(lambda: all(sn.get_info()["target_height"] == 0 and sn.get_info()["height"] > 0
                               for sn in self.sns), timeout=30, what="service nodes synced")
        for sn, op in zip(self.sns, self.operators):
            register(sn, self.authority, op, SOLO)

    def active(self, node: Any) -> int:
        states = node.get_service_nodes()["service_node_states"]
        return sum(1 for s in states if s["active"])


def leader_queue(node: Any) -> list[str]:
    """The payable nodes in reward-queue order (last paid, registered, key): the first leads
    round 0 of the next block, which pays it and sends it to the back."""
    payable = [r for r in node.get_service_nodes()["service_node_states"] if r["payable"]]
    payable.sort(key=lambda r: (r["last_reward_height"], r["registration_height"], r["service_node_pubkey"]))
    return [r["service_node_pubkey"] for r in payable]


def notify_script(tmp_path: Path) -> tuple[Path, Path]:
    """An executable for `--notify` that appends its SNODE_* variables to a file, one JSON object
    a line; (the script, the file)."""
    out = tmp_path / "notified.jsonl"
    script = tmp_path / "notify.py"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os\n"
        f"with open({str(out)!r}, 'a') as f:\n"
        "    f.write(json.dumps({k: v for k, v in os.environ.items() if k.startswith('SNODE_')}) + '\\n')\n"
    )
    script.chmod(0o755)
    return script, out


def notified(out: Path) -> list[dict[str, str]]:
    """What the `notify_script` wrote so far."""
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
