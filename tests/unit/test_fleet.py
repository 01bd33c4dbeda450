"""snode-cli fleet's pure parts: the line for each node (lag against the fleet's highest height,
reason, reward, fork fields when a daemon has them), the fleet file's format and its refusals,
and that many dead nodes are asked at once, not one after another."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from snode.tools.fleet import (
    MAX_FLEET,
    FleetError,
    Member,
    View,
    check_size,
    fork_fields,
    lines,
    look_all,
    parse_fleet_file,
)

NOW = 1_700_000_000


def _views() -> list[View]:
    return [
        View("a", "http://127.0.0.1:1", height=120, version="0.1.0", state="Active", last_uptime_proof=NOW - 42,
             credit_blocks=60, last_reward_height=118, fork={"next_fork": "v2", "next_fork_height": 200}),
        View("beta", "http://127.0.0.1:2", height=100, target_height=120, version="0.1.0", state="Decomm",
             reason="missed_uptime_proofs", last_uptime_proof=NOW - 3_700, credit_blocks=1),
        View("c", "http://127.0.0.1:3", error="Unable to connect to http://127.0.0.1:3: is snoded running?"),
        View("d", "http://127.0.0.1:4", height=120, version="0.1.0", state="not a service node"),
    ]


def test_each_node_is_one_line_with_its_lag_behind_the_highest_height() -> None:
    assert lines(_views(), now=NOW) == [
        "a     Active, proof 42s, credit 60 blocks, height 120, v0.1.0, next_fork v2, next_fork_height 200, "
        "last reward 118",
        "beta  Decomm (missed_uptime_proofs), proof 61m40s, credit 1 block, height 100 (lag 20), syncing to "
        "120, v0.1.0, no reward yet",
        "c     unreachable: Unable to connect to http://127.0.0.1:3: is snoded running?",
        "d     not a service node, height 120, v0.1.0",
    ]


def test_fork_fields_are_the_get_info_fields_that_name_a_fork() -> None:
    assert fork_fields({"height": 3, "next_fork": "v2", "fork_readiness": 0.8, "forks": [1]}) == {
        "next_fork": "v2", "fork_readiness": 0.8}
    assert fork_fields(["not", "a", "mapping"]) == {}


def test_the_next_fork_and_an_upgrade_required_are_their_sentences_on_the_line() -> None:
    """get_info's `next_fork` and `upgrade_required` are objects (issue #34): the line shows the
    sentence `snode-cli status` shows, not nothing."""
    summary = "fork v2 at 80 (in 17 blocks, ~1m): 3 of 3 active SNs ready; this node: ready"
    info = {"height": 62, "next_fork": {"fork": "v2", "height": 80, "summary": summary},
            "upgrade_required": {"fork": "v3", "height": 90, "action": "install a snoded that knows v3"}}
    upgrade = "UPGRADE REQUIRED: fork v3 at height 90: install a snoded that knows v3"
    fields = fork_fields(info)
    assert fields == {"next_fork_summary": summary, "upgrade_required_summary": upgrade}
    view = View("n", "http://127.0.0.1:1", height=62, version="0.2.0", state="not a service node", fork=fields)
    assert lines([view], now=NOW) == [f"n  not a service node, height 62, v0.2.0, {summary}, {upgrade}"]


def test_a_key_that_left_the_registry_says_how_as_the_status_line_does() -> None:
    from snode.api.types import Departure
    from snode.tools.fleet import _read_record
    view = View("n", "http://127.0.0.1:1")
    _read_record(view, None, Departure(height=99, kind="deregistered", reason="unreachable",
                                       stakes_unlock_height=139, stakes_locked_blocks=0))
    assert (view.state, view.reason) == ("deregistered at height 99", "unreachable")
    _read_record(view, None, None)
    assert (view.state, view.reason) == ("not registered", "")


def test_the_fleet_file_names_nodes_with_an_optional_login(tmp_path: Path) -> None:
    login = tmp_path / "login"
    login.write_text("ops:secret\n")
    login.chmod(0o600)
    fleet = tmp_path / "fleet"
    fleet.write_text(f"# two nodes\n\nnorth 10.0.0.1:9231 {login}\nsouth http://10.0.0.2:9231/\n")
    members = parse_fleet_file(fleet)
    assert [(m.name, m.url) for m in members] == [("north", "http://10.0.0.1:9231"), ("south", "http://10.0.0.2:9231")]
    assert members[0].login is not None and members[0].login.user == "ops"
    assert members[1].login is None


@pytest.mark.parametrize(("text", "said"), [
    ("north\n", "line 1: a node is NAME ADDRESS [LOGIN_FILE], not 1 fields"),
    ("# only a comment\n", "names no node"),
    ("north nowhere\n", "line 1: 'nowhere' is not of the form http://<ip>:<port>"),
    ("x" * 41 + " 10.0.0.1:1\n", "line 1: the name is over 40 characters"),
    ("north 10.0.0.1:1 /no/such/login\n", "cannot read /no/such/login"),
])
def test_a_bad_fleet_file_is_one_line_naming_the_line(tmp_path: Path, text: str, said: str) -> None:
    fleet = tmp_path / "fleet"
    fleet.write_text(text)
    with pytest.raises(FleetError) as refused:
        parse_fleet_file(fleet)
    assert said in str(refused.value) and str(refused.value).startswith(f"--fleet-file: {fleet}")


def test_a_fleet_names_each_node_once_and_is_bounded() -> None:
    with pytest.raises(FleetError, match="names a twice"):
        check_size([Member("a", "http://127.0.0.1:1"), Member("a", "http://127.0.0.1:2")])
    with pytest.raises(FleetError, match=f"asks {MAX_FLEET} at most"):
        check_size([Member(str(i), "http://127.0.0.1:1") for i in range(MAX_FLEET + 1)])


def test_silent_nodes_are_asked_at_once_each_within_its_timeout() -> None:
    """Sixteen listeners that accept and never answer: the fleet takes about one timeout, not sixteen
    (8 s one after another)."""
    silent = []
    try:
        for _ in range(16):
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(4)
            silent.append(listener)
        members = [Member(f"n{i}", f"http://127.0.0.1:{s.getsockname()[1]}") for i, s in enumerate(silent)]
        started = time.monotonic()
        views = look_all(members, timeout=0.5)
        took = time.monotonic() - started
    finally:
        for listener in silent:
            listener.close()
    assert [v.error for v in views] == [f"Unable to connect to {m.url}: timed out" for m in members]
    assert took < 4, took
