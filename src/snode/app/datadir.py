"""The data dir: lock, service-node key, genesis document. Keys and chain survive restarts."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import IO

from snode.app.builtin import BUILTIN_GENESIS
from snode.app.config import ConfigError
from snode.common.data_dir import (
    GENESIS_FILE,
    KEY_FILE,
    KEY_PUB_FILE,
    DirLocked,
    create_file,
    key_file_text,
    seed_of,
    take_lock,
    write_atomically,
)
from snode.common.files import LARGE_FILE_BYTES, SMALL_FILE_BYTES, read_bounded, too_open
from snode.core.crypto import PUBKEY_BYTES, SigningKey
from snode.core.errors import GenesisOfAnotherNetwork, InvalidGenesis
from snode.core.genesis import GenesisDoc, encode_genesis, parse_genesis, regtest_genesis
from snode.core.state import ChainState
from snode.params import NETWORKS, NetworkParams
from snode.store import DATABASE_FILE

AUTHORITY_KEY_FILE = "authority_key"
RUNNING_FILE = "running"
"""Present from the moment a daemon has opened the data dir's database until it closed it cleanly:
found at a start, the last stop was unclean (a crash, a kill, a power cut, or damage that
stopped the daemon), so the database is checked before it is used."""
LOG_FILE = "snoded.log"

log = logging.getLogger(__name__)


def check_writable(path: Path) -> None:
    """ConfigError unless path is (or can be created as) a writable directory."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ConfigError(f"--data-dir: {probe} exists and is not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        if probe != path:  # the directory to create is not the problem: the one it goes in is
            raise ConfigError(f"--data-dir: cannot create {path}: {probe} is not writable by this user")
        raise ConfigError(f"--data-dir: {path} is not writable by this user")


class DataDir:
    """One daemon's directory. Holding `lock()` keeps a second daemon out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock: IO[str] | None = None

    def create(self) -> None:
        """Create the directory (0700) if it does not exist."""
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)

    def lock(self) -> None:
        """Take the exclusive lock, or ConfigError naming the process that holds it."""
        try:
            self._lock = take_lock(self.path)
        except DirLocked as held:
            raise ConfigError(
                f"--data-dir: {self.path} is in use by another snoded (pid {held.holder}); stop it "
                "or choose another data dir"
            ) from None

    def unlock(self) -> None:
        """Release the lock (also released by the OS when the process dies)."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def stopped_cleanly(self) -> bool:
        """Whether the last daemon on this data dir closed its database cleanly (or none ran)."""
        return not (self.path / RUNNING_FILE).exists()

    def mark_running(self) -> None:
        """Say that a daemon uses the database (removed by `mark_stopped`)."""
        path = self.path / RUNNING_FILE
        try:
            path.write_text(f"{os.getpid()}\n")
        except OSError as err:
            raise ConfigError(f"--data-dir: cannot write {path}: {err.strerror or err}") from None

    def mark_stopped(self) -> None:
        """Say that the database was closed cleanly."""
        (self.path / RUNNING_FILE).unlink(missing_ok=True)

    @property
    def database(self) -> Path:
        return self.path / DATABASE_FILE

    @property
    def log_file(self) -> Path:
        return self.path / LOG_FILE

    def has_service_node_key(self) -> bool:
        return (self.path / KEY_FILE).exists()

    def service_node_key(self, chain: ChainState | None = None) -> SigningKey:
        """The SN key: created on first start (mode 0600), the same one on every later start,
        its public key remembered in `key.pub` (written for a data dir that has none yet).

        A key file that is gone while `key.pub` remains is a ConfigError, never a new key: a new
        key is a new node, and the chain's registered one would be decommissioned and
        deregistered. `chain`: the state at the tip, so that the refusal says whether the
        remembered node is registered.
        """
        key = self._key(KEY_FILE, create=False)
        if key is None:
            self._refuse_if_remembered(chain)
            key = self._key(KEY_FILE, create=True)
            assert key is not None, "created when missing"
        self._remember(key)
        return key

    def remembered_service_node(self) -> bytes | None:
        """The public key in `key.pub`, or None when there is no such file; ValueError when its
        content is not a public key."""
        try:
            text = read_bounded(self.path / KEY_PUB_FILE, SMALL_FILE_BYTES).decode().strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(str(err)) from None
        public = bytes.fromhex(text)
        if len(public) != PUBKEY_BYTES:
            raise ValueError(f"{len(public)} bytes, not {PUBKEY_BYTES}")
        return public

    def _refuse_if_remembered(self, chain: ChainState | None) -> None:
        key_path, pub_path = self.path / KEY_FILE, self.path / KEY_PUB_FILE
        try:
            public = self.remembered_service_node()
        except ValueError:
            raise ConfigError(
                f"--data-dir: the service-node key file {key_path} is missing, and {pub_path}, "
                "which remembers its public key, is unreadable; put the key file back from your "
                f"backup, or remove {pub_path} to start as a new service node"
            ) from None
        if public is None:
            return
        registered = ""
        known = chain.service_nodes.get(public) if chain is not None else None
        if known is not None:
            registered = (f", registered on the chain at height {known.registration_height} (without "
                          "its key it sends no uptime proofs and will be decommissioned, then deregistered)")
        elif chain is not None:
            registered = f", not registered on this node's chain at height {chain.height}"
        raise ConfigError(
            f"--data-dir: the service-node key file {key_path} is missing, but this data dir ran "
            f"service node {public.hex()} ({pub_path}){registered}; put the key file back from "
            f"your backup, or remove {pub_path} to start as a new service node"
        )

    def _remember(self, key: SigningKey) -> None:
        """Write `key.pub` for `key` unless it already says so; a record of another key (a key
        file copied in from elsewhere) is replaced: the key file is what the node runs."""
        try:
            remembered = self.remembered_service_node()
        except ValueError:
            remembered = None
        if remembered == key.public:
            return
        if remembered is not None:
            log.warning("%s named service node %s; the key file holds %s, remembered from now on",
                        self.path / KEY_PUB_FILE, remembered.hex(), key.public.hex())
        try:
            write_atomically(self.path / KEY_PUB_FILE, key.public.hex().encode() + b"\n", mode=0o644)
        except OSError as err:
            raise ConfigError(
                f"--data-dir: cannot write {self.path / KEY_PUB_FILE}: {err.strerror or err}"
            ) from None

    def authority_key(self) -> SigningKey | None:
        """The genesis authority key if this data dir holds one (devnet producer)."""
        return self._key(AUTHORITY_KEY_FILE, create=False)

    def _key(self, name: str, *, create: bool) -> SigningKey | None:
        path = self.path / name
        if path.exists():
            problem = too_open(path, "service-node key file" if name == KEY_FILE else "authority key file")
            if problem is not None:
                raise ConfigError(f"--data-dir: {problem}")
            try:
                return SigningKey(seed_of(read_bounded(path, SMALL_FILE_BYTES)))
            except OSError as err:
                raise ConfigError(f"--data-dir: cannot read key file {path}: {err.strerror or err}") from None
            except ValueError:
                raise ConfigError(
                    f"--data-dir: key file {path} is damaged (expected 64 hex characters); "
                    "restore it from your backup"
                ) from None
        if not create:
            return None
        seed = os.urandom(32)
        if not create_file(path, key_file_text(seed), mode=0o600):
            return self._key(name, create=False)  # made meanwhile: never overwrite a key
        return SigningKey(seed)

    def genesis(self, params: NetworkParams, genesis_file: Path | None) -> GenesisDoc:
        """The network's genesis: the data dir's copy, else --genesis FILE, else the built-in one.

        A --genesis that differs from the data dir's copy is refused: the chain in this data dir
        belongs to the other one.
        """
        stored = self.path / GENESIS_FILE
        given: GenesisDoc | None = None
        if genesis_file is not None:
            given = _read_genesis(genesis_file, params, "--genesis")
        if stored.exists():
            doc = _read_genesis(stored, params, "--data-dir")
            if given is not None and given != doc:
                raise ConfigError(
                    f"--genesis: {genesis_file} differs from the genesis in {stored}; this data "
                    "dir holds another chain: use a new --data-dir"
                )
            return doc
        doc = given or builtin_genesis(params)
        try:
            write_atomically(stored, encode_genesis(doc), mode=0o644)
        except OSError as err:
            raise ConfigError(f"--data-dir: cannot write {stored}: {err.strerror or err}") from None
        return doc


def _read_genesis(path: Path, params: NetworkParams, option: str) -> GenesisDoc:
    try:
        return parse_genesis(read_bounded(path, LARGE_FILE_BYTES), params)
    except OSError as err:
        raise ConfigError(f"{option}: cannot read {path}: {err.strerror}") from None
    except InvalidGenesis as err:
        hint = _other_network_hint(err.network, params, option) if isinstance(err, GenesisOfAnotherNetwork) else ""
        raise ConfigError(f"{option}: {path}: {err}{hint}") from None


def _other_network_hint(other: str, params: NetworkParams, option: str) -> str:
    """What to do about a genesis of another network we know: its flag, or another file or dir."""
    if other not in NETWORKS:
        return ""
    flag = "no network flag" if other == "mainnet" else f"--{other}"
    instead = "another --data-dir" if option == "--data-dir" else f"the genesis file of {params.name}"
    return f": this is {other}'s; run with {flag}, or give {instead}"


def builtin_genesis(params: NetworkParams) -> GenesisDoc:
    """The genesis shipped with the package for a network."""
    if params.generate_on_demand:
        return regtest_genesis()
    doc = BUILTIN_GENESIS.get(params.name)
    if doc is None:
        raise ConfigError(
            f"--genesis: {params.name} has no built-in genesis; give one with --genesis FILE "
            "(snode-devnet writes one)"
        )
    return doc
