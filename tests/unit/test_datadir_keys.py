"""The data dir's service-node key and the public key it remembers beside it (`key.pub`).

A key file that has gone while `key.pub` remains must stop the daemon with one line naming the
file, the node and its registration, never make a new key; a data dir from before `key.pub`
gets one; no key file is ever written over. Real files in a temporary dir, a real chain state.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from snode.app.config import ConfigError
from snode.app.datadir import AUTHORITY_KEY_FILE, KEY_FILE, KEY_PUB_FILE, DataDir
from snode.common.data_dir import create_file
from snode.core.crypto import SigningKey
from snode.devchain import key_from_label
from tests.unit.conftest import LabChain


@pytest.fixture
def datadir(tmp_path: Path) -> DataDir:
    data_dir = DataDir(tmp_path / "dd")
    data_dir.create()
    return data_dir


def _write_key(datadir: DataDir, key: SigningKey) -> None:
    """A key file as an older snode (or an operator's restore) left it: no `key.pub` beside it."""
    (datadir.path / KEY_FILE).write_text(key.seed.hex() + "\n")
    (datadir.path / KEY_FILE).chmod(0o600)


def test_the_first_start_makes_a_private_key_and_remembers_its_public_key(datadir: DataDir) -> None:
    key = datadir.service_node_key()
    key_file, pub_file = datadir.path / KEY_FILE, datadir.path / KEY_PUB_FILE
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert pub_file.read_text() == key.public.hex() + "\n"
    assert datadir.remembered_service_node() == key.public
    before = (key_file.read_bytes(), pub_file.stat().st_mtime_ns)
    again = datadir.service_node_key()
    assert again.public == key.public
    assert (key_file.read_bytes(), pub_file.stat().st_mtime_ns) == before, "nothing is rewritten"
    assert sorted(p.name for p in datadir.path.iterdir()) == [KEY_FILE, KEY_PUB_FILE], "no temporary left"


def test_a_data_dir_from_before_key_pub_gets_one_for_its_key(datadir: DataDir) -> None:
    key = key_from_label("older data dir")
    _write_key(datadir, key)
    assert datadir.remembered_service_node() is None
    assert datadir.service_node_key().public == key.public
    assert (datadir.path / KEY_PUB_FILE).read_text() == key.public.hex() + "\n"


def test_a_missing_key_file_with_a_remembered_node_is_refused_and_no_key_is_made(datadir: DataDir) -> None:
    old = datadir.service_node_key()
    (datadir.path / KEY_FILE).unlink()
    with pytest.raises(ConfigError) as refused:
        datadir.service_node_key()
    key_file, pub_file = datadir.path / KEY_FILE, datadir.path / KEY_PUB_FILE
    assert str(refused.value) == (
        f"--data-dir: the service-node key file {key_file} is missing, but this data dir ran service "
        f"node {old.public.hex()} ({pub_file}); put the key file back from your backup, or remove "
        f"{pub_file} to start as a new service node"
    )
    assert not key_file.exists()
    assert datadir.remembered_service_node() == old.public


def test_the_refusal_says_whether_the_chain_has_the_node_registered(datadir: DataDir, chain: LabChain) -> None:
    sn_key = key_from_label("sn-1")
    _write_key(datadir, sn_key)
    datadir.service_node_key()
    (datadir.path / KEY_FILE).unlink()
    key_file, pub_file = datadir.path / KEY_FILE, datadir.path / KEY_PUB_FILE
    with pytest.raises(ConfigError) as unregistered:
        datadir.service_node_key(chain=chain.state)
    assert str(unregistered.value) == (
        f"--data-dir: the service-node key file {key_file} is missing, but this data dir ran service "
        f"node {sn_key.public.hex()} ({pub_file}), not registered on this node's chain at height "
        f"{chain.state.height}; put the key file back from your backup, or remove {pub_file} to start "
        "as a new service node"
    )
    assert chain.new_node(sn_label="sn-1") == sn_key.public
    registered_at = chain.state.height
    chain.mine_to(registered_at + 5)  # the refusal names the registration's height, not the tip's
    with pytest.raises(ConfigError) as registered:
        datadir.service_node_key(chain=chain.state)
    assert chain.state.service_nodes[sn_key.public].registration_height == registered_at
    assert str(registered.value) == (
        f"--data-dir: the service-node key file {key_file} is missing, but this data dir ran service "
        f"node {sn_key.public.hex()} ({pub_file}), registered on the chain at height "
        f"{registered_at} (without its key it sends no uptime proofs and will be decommissioned, "
        f"then deregistered); put the key file back from your backup, or remove {pub_file} to start "
        "as a new service node"
    )
    assert not key_file.exists()
    _write_key(datadir, sn_key)  # put back from the backup: the same node again
    assert datadir.service_node_key(chain=chain.state).public == sn_key.public


def test_removing_the_remembered_public_key_starts_a_new_node(datadir: DataDir) -> None:
    old = datadir.service_node_key()
    (datadir.path / KEY_FILE).unlink()
    (datadir.path / KEY_PUB_FILE).unlink()
    new = datadir.service_node_key()
    assert new.public != old.public
    assert datadir.remembered_service_node() == new.public


def test_an_unreadable_remembered_key_still_refuses_a_new_key(datadir: DataDir) -> None:
    pub_file = datadir.path / KEY_PUB_FILE
    pub_file.write_text("not a public key\n")
    with pytest.raises(ConfigError) as refused:
        datadir.service_node_key()
    assert str(refused.value) == (
        f"--data-dir: the service-node key file {datadir.path / KEY_FILE} is missing, and {pub_file}, "
        "which remembers its public key, is unreadable; put the key file back from your backup, or "
        f"remove {pub_file} to start as a new service node"
    )
    assert not (datadir.path / KEY_FILE).exists()


def test_with_the_key_file_present_a_wrong_or_damaged_record_is_replaced(
    datadir: DataDir, caplog: pytest.LogCaptureFixture,
) -> None:
    moved_in = key_from_label("moved in")
    _write_key(datadir, moved_in)
    pub_file = datadir.path / KEY_PUB_FILE
    pub_file.write_text("zz\n")
    assert datadir.service_node_key().public == moved_in.public
    assert pub_file.read_text() == moved_in.public.hex() + "\n"
    other = key_from_label("the node this data dir ran before")
    pub_file.write_text(other.public.hex() + "\n")
    with caplog.at_level(logging.WARNING):
        assert datadir.service_node_key().public == moved_in.public
    assert pub_file.read_text() == moved_in.public.hex() + "\n"
    assert f"named service node {other.public.hex()}; the key file holds {moved_in.public.hex()}" in caplog.text


def test_a_damaged_key_file_is_refused_and_left_as_it_is(datadir: DataDir) -> None:
    key_file = datadir.path / KEY_FILE
    key_file.write_text("12345\n")
    key_file.chmod(0o600)
    with pytest.raises(ConfigError, match="is damaged .*restore it from your backup"):
        datadir.service_node_key()
    assert key_file.read_text() == "12345\n"
    assert not (datadir.path / KEY_PUB_FILE).exists()


def test_a_new_file_never_replaces_an_existing_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / KEY_FILE
    assert create_file(target, b"first\n", 0o600)
    assert not create_file(target, b"second\n", 0o600)
    assert target.read_bytes() == b"first\n"

    def no_hard_links(src: object, dst: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", no_hard_links)
    assert not create_file(target, b"third\n", 0o600)
    assert target.read_bytes() == b"first\n"
    other = tmp_path / "other"
    assert create_file(other, b"made\n", 0o600)
    assert other.read_bytes() == b"made\n" and stat.S_IMODE(other.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [KEY_FILE, "other"], "no temporary left"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602])
@pytest.mark.parametrize("name,what", [(KEY_FILE, "service-node key file"), (AUTHORITY_KEY_FILE, "authority key file")])
def test_a_key_file_open_to_other_users_is_refused_naming_the_chmod(
    datadir: DataDir, mode: int, name: str, what: str,
) -> None:
    key_file = datadir.path / name
    key_file.write_text(key_from_label("kept private").seed.hex() + "\n")
    key_file.chmod(mode)
    read = datadir.service_node_key if name == KEY_FILE else datadir.authority_key
    with pytest.raises(ConfigError) as refused:
        read()
    assert str(refused.value) == (f"--data-dir: {what} {key_file} is open to other users of this machine "
                                  f"(mode {mode:04o}): run chmod 600 {key_file}")
    assert stat.S_IMODE(key_file.stat().st_mode) == mode, "the refusal changes nothing"
    key_file.chmod(0o400)
    assert read() is not None, "a read-only key of the owner's own is fine"


def test_a_data_dir_of_another_network_names_the_flag_that_opens_it(tmp_path: Path) -> None:
    from snode.params import DEVNET, MAINNET, REGTEST

    datadir = DataDir(tmp_path)
    datadir.genesis(REGTEST, None)
    with pytest.raises(ConfigError, match="this is regtest's; run with --regtest, or give another --data-dir"):
        datadir.genesis(DEVNET, None)
    with pytest.raises(ConfigError, match="this is regtest's; run with --regtest, or give another --data-dir"):
        datadir.genesis(MAINNET, None)


def test_a_running_marker_that_cannot_be_written_or_a_genesis_in_the_way_is_one_line(tmp_path: Path) -> None:
    from snode.params import REGTEST

    datadir = DataDir(tmp_path)
    (tmp_path / "running").mkdir()
    with pytest.raises(ConfigError, match="--data-dir: cannot write .*running: Is a directory"):
        datadir.mark_running()
    (tmp_path / "genesis.json").mkdir()
    with pytest.raises(ConfigError, match="--data-dir: cannot"):
        datadir.genesis(REGTEST, None)
