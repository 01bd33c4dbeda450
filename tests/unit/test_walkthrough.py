"""The walkthrough (`make demo`) and the service-node table it shares with snode-cli.

Runs the walkthrough's main in-process with captured output: it must exit 0 and tell the story's
key facts; a story whose claim does not hold must exit 1 and name the claim. The table is
rendered from plain `get_service_nodes`-shaped records, as the RPC will return them.
"""

from __future__ import annotations

import io

import msgspec
import pytest

from snode.api.records import service_node_record
from snode.core.service_nodes import Status
from snode.devchain import DevChain, key_from_label
from snode.params import COIN, REGTEST
from snode.tools import walkthrough
from snode.tools.tables import make_console, proof_age, record_status, service_node_table

SPEC_FIELDS = {
    "service_node_pubkey", "active", "funded", "payable", "registration_height",
    "total_contributed", "staking_requirement", "operator_fee", "contributors",
    "last_uptime_proof", "decommission_count",
}


def test_walkthrough_tells_the_whole_story(capsys: pytest.CaptureFixture[str]) -> None:
    assert walkthrough.main() == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    # The registration commands stay on one line each, in the specification's shape.
    commands = [line.split() for line in lines if line.startswith("register_service_node ")]
    assert [c[1] for c in commands] == ["0", "5"]
    assert all(len(c) == 7 and c[2].startswith("snr1") for c in commands)
    assert [c[3] for c in commands] == ["200000000000000", "100000000000000"]
    for status in ("Await", "Decomm", "Active"):
        assert any(status in line for line in lines), status
    assert any("100000 / 200000" in line and "Await" in line for line in lines)
    assert any("(activation + 3): payable = no" in line for line in lines)
    assert any("(activation + 4): payable = yes" in line for line in lines)
    assert "reason missed_uptime_proofs" in out
    reward_lines = [line.split() for line in lines if line.strip().endswith("of 15.675")]
    assert [(w[0], w[2], w[4]) for w in reward_lines] == [
        ("bob", "8.6625", "8662500000"), ("carol", "4.7025", "4702500000"), ("dave", "3.135", "3135000000"),
    ]
    assert any(line.split()[:4] == ["total", "16.5", "coins", "16500000000"] for line in lines)
    assert lines[-1].startswith("walkthrough complete:")


def test_a_claim_that_does_not_hold_fails_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    # dave stakes too little, so the pool node never fills and the story's claim breaks.
    assert walkthrough.main({"carol": "60000", "dave": "30000"}) == 1
    _, err = capsys.readouterr()
    assert "walkthrough FAILED" in err
    assert "the two stakes fill the pool node" in err


def test_service_node_record_has_the_specification_fields() -> None:
    operator, sn_key = key_from_label("record operator"), key_from_label("record node")
    chain = DevChain.create({operator.public: 100_001 * COIN})
    chain.register(operator, sn_key, 100_000 * COIN, fee_ppm=25_000)
    chain.mine()
    record = msgspec.to_builtins(
        service_node_record(chain.state.service_nodes[sn_key.public], chain.state.height, walkthrough.PARAMS)
    )
    assert set(record) == SPEC_FIELDS
    assert record["service_node_pubkey"] == sn_key.public.hex()
    assert (record["funded"], record["active"], record["payable"]) == (False, False, False)
    assert record["total_contributed"] == 100_000 * COIN
    assert record["staking_requirement"] == REGTEST.staking_requirement
    assert record["operator_fee"] == 25_000
    assert record["contributors"][0]["address"].startswith("snr1")
    assert record_status(record) is Status.AWAIT


def test_node_table_renders_records_as_plain_text() -> None:
    record = {
        "service_node_pubkey": "ab" * 32, "active": False, "funded": True, "payable": False,
        "registration_height": 7, "total_contributed": 200_000 * COIN,
        "staking_requirement": 200_000 * COIN, "operator_fee": 25_000,
        "contributors": [{}, {}], "last_uptime_proof": 1_000, "decommission_count": 2,
    }
    buffer = io.StringIO()
    make_console(buffer).print(service_node_table([record], now=1_065))
    header, _, row = buffer.getvalue().splitlines()
    assert header.split()[-1] == "proof"
    assert row.split() == [
        "abababababab...", "Decomm", "no", "7", "200000", "/", "200000", "2.5", "2", "2",
        "1m05s",
    ]
    assert "\x1b[" not in buffer.getvalue()


@pytest.mark.parametrize(
    ("last", "now", "shown"),
    [(0, 500, "never"), (100, 145, "45s"), (100, 165, "1m05s"), (100, 100 + 7380, "2h03m")],
)
def test_proof_age(last: int, now: int, shown: str) -> None:
    assert proof_age(last, now) == shown


def test_the_node_table_shows_an_await_nodes_credit_as_the_rpc_says_it() -> None:
    """Issue #38, item 11: `nodes` showed `-` where get_service_nodes said 60."""
    record = {
        "service_node_pubkey": "cd" * 32, "active": False, "funded": False, "payable": False,
        "registration_height": 7, "total_contributed": 100_000 * COIN, "staking_requirement": 200_000 * COIN,
        "operator_fee": 0, "contributors": [{}], "last_uptime_proof": 0, "decommission_count": 0,
        "last_state_change_reason": "", "earned_downtime_blocks": 60, "requested_unlock_height": 0,
    }
    buffer = io.StringIO()
    make_console(buffer).print(service_node_table([record], now=1_000))
    header, _, row = buffer.getvalue().splitlines()
    assert header.split()[-3:] == ["change", "credit", "unlock"]
    assert row.split()[-3:] == ["-", "60", "-"]
