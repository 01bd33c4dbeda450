"""A registered service node's key moved to a new data dir and address with `snode-cli key export`
and `key import`: the chain accepts its proofs from there, the doppelganger check still stops a
copy that runs beside the original, and the commands refuse what would lose or clash a key.

Real daemons (a hub and the service node's two homes), snode-cli as a child process; the test
suite's low Argon2id cost (SNODE_TEST_WALLET_KDF=min) keeps each seal cheap.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from snode.devchain import key_from_label
from tests.functional.framework import (
    NodeSet,
    assert_equal,
    connect_nodes,
    narrator,
    scaled,
    snode_cli,
    wait_until,
)
from tests.functional.sn_helpers import record, registered_solo

log = narrator(__name__)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """snode-cli with no daemon given (so none is asked)."""
    return subprocess.run([sys.executable, "-m", "snode.tools.cli", *args], capture_output=True,
                          text=True, timeout=scaled(60), stdin=subprocess.DEVNULL)


def _one_line(out: subprocess.CompletedProcess[str]) -> str:
    assert_equal(out.returncode, 1, out.stdout)
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    return out.stderr.strip()


def test_a_key_moved_to_a_new_data_dir_serves_there_and_a_copy_beside_it_is_stopped(
        nodes: NodeSet, tmp_path: Path) -> None:
    log.info("A hub and an active, registered service node")
    hub = nodes.add()
    old_home = nodes.add(extra_args=["--service-node"])
    connect_nodes(old_home, hub)
    pk = registered_solo(hub, old_home, "operator who moves the key")
    registered_at = record(hub, pk)["registration_height"]
    hub.generate_blocks(blocks=3)

    passphrase = tmp_path / "passphrase"
    passphrase.write_text("a long enough passphrase\n")
    passphrase.chmod(0o600)
    exported = tmp_path / "sn.key"
    log.info("key export while the node runs: a sealed file, mode 0600, without the key in clear")
    out = _cli("--regtest", "--data-dir", str(old_home.data_dir), "key", "export", str(exported),
               "--password-file", str(passphrase))
    assert_equal(out.returncode, 0, out.stderr)
    assert_equal(out.stdout.strip(), f"service-node key {pk} of {old_home.data_dir} exported to {exported} "
                                     "(sealed, mode 0600)")
    assert_equal(exported.stat().st_mode & 0o777, 0o600)
    seed_hex = (old_home.data_dir / "key").read_text().strip()
    assert seed_hex not in exported.read_text()
    assert_equal(json.loads(exported.read_text())["service_node_pubkey"], pk)

    log.info("key import into the running node's data dir: refused, naming its pid")
    assert old_home.process is not None
    out = _cli("--regtest", "--data-dir", str(old_home.data_dir), "key", "import", str(exported),
               "--password-file", str(passphrase), "--force")
    assert_equal(_one_line(out), f"snode-cli: --data-dir: {old_home.data_dir} is in use by a running snoded "
                                 f"(pid {old_home.process.pid}): stop it before importing a key into it")

    log.info("key import into a new data dir, asking the hub's chain: the key and its registration")
    new_home = nodes.add(extra_args=["--service-node"], start=False)
    assert new_home.ip != old_home.ip
    height = hub.get_info()["height"]
    out = snode_cli(hub, "--regtest", "--data-dir", str(new_home.data_dir), "key", "import", str(exported),
                    "--password-file", str(passphrase))
    assert_equal(out.returncode, 0, out.stderr)
    assert_equal(out.stdout.splitlines(), [
        f"service-node key {pk} imported into {new_home.data_dir}",
        f"file: {new_home.data_dir / 'key'}",
        f"registration: registered at height {registered_at}, Active (chain of http://{hub.ip}:{hub.rpc_port} "
        f"at height {height})",
    ])
    assert_equal((new_home.data_dir / "key").read_text().strip(), seed_hex)
    assert_equal((new_home.data_dir / "key").stat().st_mode & 0o777, 0o600)
    out = _cli("--regtest", "--data-dir", str(new_home.data_dir), "key", "show")
    assert_equal(out.stdout.splitlines()[0], f"service-node key {pk}")
    assert out.stdout.splitlines()[2].startswith("registration: not checked: no daemon given"), out.stdout
    log.info("--data-dir after the command reads the same, and given both ways the two must agree")
    after = _cli("--regtest", "key", "show", "--data-dir", str(new_home.data_dir))
    assert_equal(after.stdout, out.stdout, after.stderr)
    twice = _cli("--regtest", "--data-dir", str(tmp_path), "key", "show", "--data-dir", str(new_home.data_dir))
    assert_equal((twice.returncode, twice.stderr.strip()),
                 (1, f"snode-cli: --data-dir given twice, as {tmp_path} and as {new_home.data_dir}; give it once"))

    log.info("Start the new home beside the old one: the doppelganger check stops it")
    new_home.start()
    connect_nodes(new_home, hub)
    assert new_home.process is not None
    assert_equal(new_home.process.wait(timeout=scaled(30)), 1)
    last = new_home.stderr_text().strip().splitlines()[-1]
    assert last.startswith("snoded: another daemon runs this service node's key"), last
    assert f"declares IP {old_home.ip}" in last, last

    log.info("Stop the old home, start the new one: the hub accepts its proofs, the node stays active")
    assert_equal(old_home.stop(), 0)
    moved = int(time.time())
    new_home.start()
    connect_nodes(new_home, hub)
    wait_until(lambda: record(hub, pk)["last_uptime_proof"] > moved, timeout=30,
               what="a proof from the new home accepted by the hub")
    hub.generate_blocks(blocks=2)
    assert record(hub, pk)["active"], record(hub, pk)
    assert_equal(new_home.get_info()["last_uptime_proof_rejection"], "")
    assert new_home.running


def test_key_commands_refuse_bad_input_in_one_line(nodes: NodeSet, tmp_path: Path) -> None:
    node = nodes.add(extra_args=["--service-node"])
    assert_equal(node.stop(), 0)
    home = str(node.data_dir)
    pw, short, wrong = tmp_path / "pw", tmp_path / "short", tmp_path / "wrong"
    for path, text in ((pw, "a long enough passphrase\n"), (short, "short\n"), (wrong, "not the passphrase\n")):
        path.write_text(text)
    exported = tmp_path / "sn.key"

    def key(network: str, data_dir: str | Path, *args: str | Path) -> list[str]:
        return [f"--{network}", "--data-dir", str(data_dir), "key", *map(str, args)]

    def refused(*args: str) -> str:
        return _one_line(_cli(*args))

    log.info("export: a short passphrase, a data dir that is not there or of another network, a file "
             "that exists")
    assert_equal(refused(*key("regtest", home, "export", str(exported), "--password-file", str(short))),
                 f"snode-cli: --password-file {short}: a key file's passphrase needs at least 8 characters, "
                 "this one has 5")
    missing = tmp_path / "nowhere"
    assert_equal(refused(*key("regtest", missing, "show")),
                 f"snode-cli: --data-dir: {missing} does not exist: give the data dir of the node (its snoded "
                 "--data-dir)")
    assert_equal(refused(*key("testnet", home, "export", str(exported), "--password-file", str(pw))),
                 f"snode-cli: --data-dir: {home} holds a regtest chain (genesis.json), not testnet: add --regtest")
    out = _cli(*key("regtest", home, "export", exported, "--password-file", pw))
    assert_equal(out.returncode, 0, out.stderr)
    assert_equal(refused(*key("regtest", home, "export", str(exported), "--password-file", str(pw))),
                 f"snode-cli: FILE: {exported} already exists: choose another file, or add --force to replace it")

    log.info("import: wrong passphrase, wrong network (of the file, of the data dir), a damaged file, a "
             "file of something else")
    target = str(tmp_path / "new-home")
    assert_equal(refused(*key("regtest", target, "import", str(exported), "--password-file", str(wrong))),
                 f"snode-cli: wrong passphrase for key file {exported}")
    assert_equal(refused(*key("testnet", home, "import", str(exported), "--password-file", str(pw))),
                 f"snode-cli: --data-dir: {home} holds a regtest chain (genesis.json), not testnet: add --regtest")
    assert_equal(refused(*key("testnet", target, "import", str(exported), "--password-file", str(pw))),
                 f"snode-cli: FILE: {exported} holds a key for regtest, not testnet: add --regtest")
    doc = json.loads(exported.read_text())
    damaged = tmp_path / "damaged.key"
    damaged.write_text(json.dumps({**doc, "box": ("0" if doc["box"][0] != "0" else "1") + doc["box"][1:]}))
    assert_equal(refused(*key("regtest", target, "import", str(damaged), "--password-file", str(pw))),
                 f"snode-cli: FILE: {damaged} is corrupted: export the key again from its data dir, or use another "
                 "copy")
    assert_equal(refused(*key("regtest", target, "import", str(pw), "--password-file", str(pw))),
                 f"snode-cli: FILE: {pw} is not a service-node key file written by snode-cli key export")
    assert not Path(target, "key").exists()

    log.info("import over another key: refused without --force, done with it")
    other = tmp_path / "other-home"
    other.mkdir(mode=0o700)
    (other / "key").write_text(key_from_label("another node").seed.hex() + "\n")
    (other / "key").chmod(0o600)
    other_pub = key_from_label("another node").public.hex()
    assert_equal(refused(*key("regtest", str(other), "import", str(exported), "--password-file", str(pw))),
                 f"snode-cli: --data-dir: {other / 'key'} already holds service-node key {other_pub}: add --force "
                 "to replace it (export it first unless you mean to lose it)")
    out = _cli(*key("regtest", other, "import", exported, "--password-file", pw, "--force"))
    assert_equal(out.returncode, 0, out.stderr)
    assert_equal((other / "key").read_text(), (node.data_dir / "key").read_text())
    assert_equal((other / "key.pub").read_text(), (node.data_dir / "key.pub").read_text())
    assert sorted(p.name for p in other.iterdir() if p.name.startswith(".")) == []
