"""snoded's command line (`app.cli`) and its SIGUSR1 partition file (`app.partition`), without a
daemon: the command hands exactly one checked Config to whoever runs the daemon, or refuses with
the one line the operator sees; the flag warnings name the flag; a `deny_ips` file that cannot be
used changes nothing and says which file and why. Daemons with these flags run in
tests/functional/test_daemon.py and test_network_faults.py."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from snode.app.cli import snoded_command, warn_about_flags
from snode.app.config import Config, ConfigError
from snode.app.partition import CLOSED_FILE, DENY_FILE, read_denied, reload_denied
from snode.params import REGTEST


def _run(args: list[str]) -> list[Config]:
    started: list[Config] = []
    snoded_command(started.append).main(args=args, prog_name="snoded", standalone_mode=False)
    return started


def test_the_command_hands_one_checked_config_to_the_daemon(tmp_path: Path) -> None:
    [config] = _run(["--regtest", f"--data-dir={tmp_path}", "--rpc-admin", "127.0.0.1:1234",
                     "--service-node-public-ip", "10.0.0.1", "--non-interactive"])
    assert (config.params, config.data_dir, config.rpc_admin.port) == (REGTEST, tmp_path, 1234)
    assert (config.public_ip, config.service_node, config.non_interactive) == ("10.0.0.1", False, True)


def test_the_command_refuses_two_networks_and_a_bad_value_before_the_daemon_runs() -> None:
    with pytest.raises(ConfigError, match=r"^--testnet and --devnet: give at most one network flag$"):
        _run(["--devnet", "--testnet"])
    with pytest.raises(ConfigError, match=r"^--log-level: '9' is not a log level \(0 to 4\)$"):
        _run(["--regtest", "--log-level", "9"])


def test_a_flag_that_changes_nothing_is_named_in_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    [config] = _run(["--regtest", f"--data-dir={tmp_path}", "--service-node-public-ip", "10.0.0.1"])
    with caplog.at_level(logging.WARNING, logger="snoded"):
        warn_about_flags(config)
    assert caplog.messages == ["--service-node-public-ip is ignored without --service-node"]


class Denying:
    """Stands for the peer manager and quorumnet: what each was told to deny."""

    def __init__(self) -> None:
        self.denied: list[frozenset[str]] = []
        self.closed = False

    def deny(self, ips: frozenset[str]) -> None:
        self.denied.append(ips)

    def close_listener(self, closed: bool) -> bool:
        """quorumnet's fault-test listener: what it was told, and whether that changed it."""
        changed = closed != self.closed
        self.closed = closed
        return changed


def test_the_deny_file_cuts_off_its_addresses_and_no_file_heals(tmp_path: Path) -> None:
    peers, quorumnet = Denying(), Denying()
    (tmp_path / DENY_FILE).write_text("127.0.0.5\n\n 127.0.0.6 \n::1\n")
    reload_denied(tmp_path, peers, quorumnet)  # type: ignore[arg-type]
    (tmp_path / DENY_FILE).unlink()
    reload_denied(tmp_path, peers, None)  # type: ignore[arg-type]
    assert peers.denied == [frozenset({"127.0.0.5", "127.0.0.6", "::1"}), frozenset()]
    assert quorumnet.denied == [frozenset({"127.0.0.5", "127.0.0.6", "::1"})]


def test_the_closed_file_closes_quorumnets_listener_and_says_so_once(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    quorumnet = Denying()
    with caplog.at_level(logging.WARNING, logger="snoded"):
        (tmp_path / CLOSED_FILE).write_text("")
        reload_denied(tmp_path, Denying(), quorumnet)  # type: ignore[arg-type]
        reload_denied(tmp_path, Denying(), quorumnet)  # type: ignore[arg-type]
        assert quorumnet.closed
        (tmp_path / CLOSED_FILE).unlink()
        reload_denied(tmp_path, Denying(), quorumnet)  # type: ignore[arg-type]
    assert not quorumnet.closed
    said = [m for m in caplog.messages if "quorumnet listener" in m]
    assert said == ["partition: the quorumnet listener takes no new connection",
                    "partition: the quorumnet listener takes new connections"]


@pytest.mark.parametrize("content, words", [
    (b"127.0.0.5\nnot-an-ip\n", "not-an-ip is not an IP address; the partition is unchanged"),
    (b"\xff\xfe127.0.0.5\n", "cannot read it ("),
])
def test_a_deny_file_that_cannot_be_used_changes_nothing_and_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, content: bytes, words: str,
) -> None:
    path = tmp_path / DENY_FILE
    path.write_bytes(content)
    peers = Denying()
    with caplog.at_level(logging.WARNING, logger="snoded"):
        reload_denied(tmp_path, peers, None)  # type: ignore[arg-type]
    assert peers.denied == []
    assert read_denied(path) is None
    assert len(caplog.messages) == 2 and caplog.messages[0].startswith(f"{path}: ")
    assert words in caplog.messages[0]


def test_not_writable_names_the_directory_that_is_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #38, item 11: a data dir to create inside a directory this user cannot write named the
    data dir, which does not exist yet, as the one not writable. The kernel's answer is stood in
    for (tests may run as root, whom permissions do not stop)."""
    from snode.app import datadir

    parent = tmp_path / "srv"
    parent.mkdir()
    monkeypatch.setattr(datadir.os, "access", lambda path, mode: Path(path) != parent)
    with pytest.raises(ConfigError) as refused:
        datadir.check_writable(parent / "snode" / "regtest")
    assert str(refused.value) == (f"--data-dir: cannot create {parent / 'snode' / 'regtest'}: {parent} is not "
                                  "writable by this user")
    with pytest.raises(ConfigError, match=f"--data-dir: {parent} is not writable by this user"):
        datadir.check_writable(parent)
